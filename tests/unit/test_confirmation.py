"""Confirmation and bisection decisions on nested data where the answer is known: runs whose medians move 20-30 %
from one process to the next, with samples inside a run that agree to 2 % (what a shared host does)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.detect.confirmation import ConfirmParams, Decision, decide, next_to_measure
from service.detect.run_stats import RunNoise, pooled_noise

SAMPLES = 15  # per run, as the demo takes


def runs(level: float, count: int, rng: np.random.Generator, between: float = 0.25,
         within: float = 0.02) -> list[list[float]]:
    """``count`` runs at ``level``: each run's own offset (log-normal, ``between``) shared by its samples."""
    return [list(level * math.exp(between * rng.standard_normal()) * np.exp(within * rng.standard_normal(SAMPLES)))
            for _ in range(count)]


def history_noise(rng: np.random.Generator, between: float) -> RunNoise:
    """The spread a series' stored history would give: eight other commits with three runs each."""
    noise = pooled_noise([[math.log(float(np.median(run))) for run in runs(1.0, 3, rng, between)]
                          for _ in range(8)])
    assert noise is not None
    return noise


def sequence(ratio: float, rng: np.random.Generator, between: float, noise: RunNoise | None,
             params: ConfirmParams) -> tuple[Decision, int]:
    """A confirmation as the pipeline runs it: one round (a run a side) at a time, until decided or the cap."""
    base: list[list[float]] = []
    head: list[list[float]] = []
    for rounds in range(1, params.max_rounds + 1):
        base += runs(1.0, 1, rng, between)
        head += runs(ratio, 1, rng, between)
        decision = decide(base, head, True, rounds, noise, params)
        if decision.verdict != "undecided":
            return decision, rounds
    raise AssertionError("the cap must decide")


def test_unchanged_code_is_confirmed_at_a_rate_within_alpha() -> None:
    """The test is repeated after every round: each look at the full alpha would confirm these A/A pairs 1.9 %
    of the time (29 of 1,500) at alpha 1 %. Measured with the looks' levels: 0.7 % (11 of 1,500)."""
    rng, params = np.random.default_rng(11), ConfirmParams()
    verdicts = [sequence(1.0, rng, 0.25, history_noise(rng, 0.25), params)[0].verdict for _ in range(1500)]
    confirmed = verdicts.count("confirmed") / len(verdicts)
    assert confirmed <= params.alpha, confirmed
    # The cap is reached and the change refuted (rarely, refuted earlier: significant the other way).
    assert verdicts.count("refuted") == len(verdicts) - verdicts.count("confirmed")


def test_a_planted_2x_change_is_confirmed_within_a_few_rounds() -> None:
    """Measured: 296 of 300 at 20 % noise between runs, in 4.3 rounds on average (a cap of three rounds
    confirms about half as many)."""
    rng, params = np.random.default_rng(12), ConfirmParams()
    outcomes = [sequence(2.0, rng, 0.2, history_noise(rng, 0.2), params) for _ in range(300)]
    confirmed = [rounds for decision, rounds in outcomes if decision.verdict == "confirmed"]
    assert len(confirmed) / len(outcomes) >= 0.9, len(confirmed)
    assert np.mean(confirmed) <= 5
    # Never refuted as significant the other way: a refutation here is the cap reached.
    assert all(rounds == params.max_rounds for decision, rounds in outcomes if decision.verdict == "refuted")


def test_one_run_a_side_is_no_evidence_without_history_however_many_samples_it_holds() -> None:
    """What the pooled Mann-Whitney called p=3.4e-06: 15 samples of one process against 15 of another."""
    rng = np.random.default_rng(3)
    base, head = runs(1.0, 1, rng, between=0.0), runs(1.3, 1, rng, between=0.0)
    first = decide(base, head, True, rounds=1)
    assert first.verdict == "undecided" and first.p_value is None
    assert first.describe().endswith("runs=1+1") and "no test" in first.describe()
    assert "n=" not in first.describe()
    assert decide(base, head, True, rounds=ConfirmParams().max_rounds).verdict == "refuted"


def test_one_run_a_side_waits_for_the_next_round_even_with_history() -> None:
    """One run cannot tell the host's slow runs from a change (run_stats' note), however far apart: the first
    round waits, and the second decides a change far beyond the spread the history knows."""
    noise = RunNoise(sd=0.25, df=16)
    rng = np.random.default_rng(4)
    base, head = runs(1.0, 2, rng, between=0.0), runs(12.0, 2, rng, between=0.0)
    first = decide(base[:1], head[:1], True, rounds=1, noise=noise)
    assert first.verdict == "undecided" and first.p_value is None
    assert "one run cannot tell the host's slow runs from a change" in first.describe()
    second = decide(base, head, True, rounds=2, noise=noise)
    assert second.verdict == "confirmed" and second.method == "welch" and second.describe().endswith("runs=2+2")


def test_describe_names_the_test_p_the_interval_and_the_run_counts() -> None:
    rng = np.random.default_rng(5)
    d = decide(runs(1.0, 3, rng, between=0.02), runs(1.5, 3, rng, between=0.02), True, rounds=3)
    assert d.verdict == "confirmed" and d.method == "welch"
    text = d.describe()
    assert text.startswith("confirmed: head/base +") and "Welch's t-test on log run medians p=" in text
    assert f"{d.confidence:.1%} interval {d.low - 1:+.1%} to {d.high - 1:+.1%}" in text
    assert text.endswith("runs=3+3") and "n=" not in text
    assert 1 < d.low < d.ratio < d.high and d.confidence == pytest.approx(1 - ConfirmParams().look_alpha(3))


def test_a_difference_the_other_way_refutes_at_once() -> None:
    rng = np.random.default_rng(6)
    d = decide(runs(1.0, 3, rng, between=0.05), runs(0.6, 3, rng, between=0.05), True, rounds=3)
    assert d.verdict == "refuted" and d.ratio < 1 and d.p_value is not None and d.p_value < 0.001


def test_an_expected_decrease_is_confirmed_and_an_increase_refutes_it() -> None:
    """Higher-is-better metrics regress downwards."""
    rng = np.random.default_rng(7)
    base, lower = runs(1.0, 3, rng, between=0.05), runs(0.5, 3, rng, between=0.05)
    assert decide(base, lower, False, rounds=3).verdict == "confirmed"
    assert decide(lower, base, False, rounds=3).verdict == "refuted"


def test_no_difference_asks_for_more_rounds_then_refutes_at_the_cap() -> None:
    rng = np.random.default_rng(8)
    base, head = runs(1.0, 3, rng), runs(1.0, 3, rng)
    assert decide(base, head, True, rounds=3).verdict == "undecided"
    params = ConfirmParams(max_rounds=3)
    assert decide(base, head, True, rounds=3, params=params).verdict == "refuted"


def test_a_significant_but_tiny_change_is_not_confirmed() -> None:
    rng = np.random.default_rng(9)
    base = runs(1.0, 5, rng, between=0.0005, within=0.001)
    head = runs(1.003, 5, rng, between=0.0005, within=0.001)
    d = decide(base, head, True, rounds=5, params=ConfirmParams(min_effect=0.01))
    assert d.p_value is not None and d.p_value < ConfirmParams().look_alpha(5) and d.low > 1
    assert d.verdict == "undecided"


def test_run_medians_decide_as_their_samples_do() -> None:
    rng = np.random.default_rng(10)
    base, head = runs(1.0, 4, rng), runs(1.6, 4, rng)
    medians = decide([float(np.median(r)) for r in base], [float(np.median(r)) for r in head], True, rounds=4)
    assert medians == decide(base, head, True, rounds=4)


def test_a_side_without_runs_waits_for_its_round() -> None:
    assert decide([[1.0, 1.1]], [], True, rounds=1).verdict == "undecided"
    assert decide([[1.0, 1.1]], [], True, rounds=ConfirmParams().max_rounds).verdict == "refuted"


def test_the_looks_levels_sum_to_twice_alpha_the_most_at_the_cap() -> None:
    params = ConfirmParams(alpha=0.01, max_rounds=6)
    levels = [params.look_alpha(r) for r in range(1, 7)]
    assert levels[-1] == 0.01 and levels[:-1] == [pytest.approx(0.002)] * 5
    assert sum(levels) == pytest.approx(2 * params.alpha)
    assert ConfirmParams(alpha=0.01, max_rounds=1).look_alpha(1) == 0.01
    with pytest.raises(ValueError):
        ConfirmParams(max_rounds=0)


def test_bisection_measures_the_middle_and_stops_when_nothing_is_left() -> None:
    assert next_to_measure(["a", "b", "c", "d"]) == "b"
    assert next_to_measure(["a", "b", "c"]) == "b"
    assert next_to_measure(["a"]) == "a"
    assert next_to_measure([]) is None
