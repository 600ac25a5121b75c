"""`kernelwatch detect`'s input: a CSV of samples, read strictly."""

import numpy as np
import pytest

from kernelwatch.errors import InvalidInput
from service.detect.changepoints import ChangePointParams
from service.detect.samples_csv import change_points_report, read_samples_csv


def test_rows_of_one_commit_are_its_samples_and_columns_may_come_in_any_order() -> None:
    text = "value,series,position,host\n1.0,a,3,x\n1.2,a,3,y\n2.0,b,1,x\n1.1,a,5,x\n"
    assert read_samples_csv(text) == {"a": {3: [[1.0, 1.2]], 5: [[1.1]]}, "b": {1: [[2.0]]}}


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty file"),
    ("series,value\na,1\n", "header lacks position"),
    ("series,position,value\na,1.5,2\n", "input:2: position '1.5' is not an integer"),
    ("series,position,value\na,1,nan\n", "input:2: value nan must be a finite number > 0"),
    ("series,position,value\na,1,-3\n", "input:2: value -3.0 must be"),
    ("series,position,value\na,1,1\nb,2\n", "input:3: 2 fields, the header has 3"),
    ("series,position,value\n,1,1\n", "input:2: a series name"),
    ('series,position,value\n"a' + "x" * 5000 + ',1,1\n', "input:2"),
])
def test_bad_input_is_refused_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(".", r"\.")):
        read_samples_csv(text)


def test_report_gives_the_first_position_of_the_new_level_in_the_callers_numbering() -> None:
    rng = np.random.default_rng(2)
    samples = {"k": {10 * p: [list(np.exp(rng.normal(0, 0.01, 3)) * (0.8 if p >= 12 else 1.0))] for p in range(30)},
               "flat": {p: [[1.0 + 0.001 * (p % 3)]] for p in range(30)}}
    (change,) = change_points_report(samples, ChangePointParams())["change_points"]
    assert change["series"] == "k" and change["position"] == 120 and change["previous_position"] == 110
    assert change["direction"] == "decrease" and change["magnitude"] == pytest.approx(-0.2, abs=0.02)
    assert 0 <= change["p_value"] < 1e-6


def test_a_run_column_keeps_the_runs_of_a_commit_apart() -> None:
    text = "series,position,value,run\na,1,1.0,r1\na,1,1.1,r1\na,1,2.0,r2\na,2,1.0,r1\n"
    assert read_samples_csv(text) == {"a": {1: [[1.0, 1.1], [2.0]], 2: [[1.0]]}}


def test_with_runs_each_run_is_one_vote_and_the_test_counts_runs() -> None:
    """4 commits a side of 1-3 runs that disagree by ~25 % (10-20 samples each, agreeing within 2 %), a 2x step,
    60 seeds: with the run column the step is found in 40; the same rows without it (one pool a commit, as the
    engine read every CSV before) in 24."""
    found = {"runs": 0, "pooled": 0}
    for seed in range(60):
        rng = np.random.default_rng(seed)
        rows = ["series,position,value,run"]
        for p in range(8):
            for r in range(int(rng.integers(1, 4))):
                level = (2.0 if p >= 4 else 1.0) * np.exp(0.25 * rng.standard_normal())
                rows += [f"k,{p},{level * np.exp(0.02 * rng.standard_normal()):.6f},{p}-{r}"
                         for _ in range(int(rng.integers(10, 21)))]
        without = ["series,position,value"] + [",".join(line.split(",")[:3]) for line in rows[1:]]
        for reading, lines in (("runs", rows), ("pooled", without)):
            report = change_points_report(read_samples_csv("\n".join(lines) + "\n"), ChangePointParams())
            found[reading] += [(c["position"], c["direction"]) for c in report["change_points"]] == [(4, "increase")]
    assert found["runs"] >= 34, found
