"""`ci --max-rounds`: which undecided benchmarks a job says it leaves undecided, and says so once."""

from __future__ import annotations

import pytest

from service.cli.ci import _out_of_reach
from service.detect.compare import BenchmarkKey, Pair, compare
from service.report.compare_view import suite_key
from tests.unit.test_compare import exact_runs


def test_a_benchmark_past_its_budget_is_named_once_and_a_reachable_one_never(
        capsys: pytest.CaptureFixture[str]) -> None:
    hopeless, near = BenchmarkKey("s", "hopeless"), BenchmarkKey("s", "near")
    rows = compare([Pair(hopeless, exact_runs(1.0, 3, 0.6), exact_runs(1.0, 3, 0.6)),
                    Pair(near, exact_runs(1.0, 3, 0.03), exact_runs(1.0, 3, 0.03))]).rows
    assert [row.verdict for row in rows] == ["inconclusive", "inconclusive"]
    assert _out_of_reach(rows, 6, frozenset()) == {suite_key(hopeless)}
    assert "1 benchmark(s) undecided but not measured again" in capsys.readouterr().err
    assert _out_of_reach(rows, 6, frozenset({suite_key(hopeless)})) == frozenset()  # said before: not again
    assert capsys.readouterr().err == ""
