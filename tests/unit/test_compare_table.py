"""The comparison table and its JSON form against golden files (KERNELWATCH_UPDATE_GOLDEN=1 rewrites them)."""

from __future__ import annotations

import json

import pytest

from service.detect.compare import BenchmarkKey, CompareParams, Pair, Side, compare
from service.report.compare_table import SideLabel, comparison_from_json, format_text, format_value, from_json, to_json
from tests.builders import runs_of
from tests.golden import assert_golden

BASE = SideLabel(ref="1a2b3c4d", repository="kernels", commit="1a2b3c4d" * 5, subject="softmax: fuse the max",
                 runs=("run-a", "run-b"))
HEAD = SideLabel(ref="9f8e7d6c", repository="kernels", commit="9f8e7d6c" * 5, subject="softmax: online normaliser",
                 runs=("run-c",))
CPU = "cpu [3f2a9c1d0e]"


def spread(level: float, n: int = 10, width: float = 0.01, phase: int = 0) -> tuple[float, ...]:
    """Deterministic samples around a level (no random generator: the golden files must not move)."""
    return tuple(level * (1 + width * (((i * 7 + phase) % 11) - 5) / 5) for i in range(n))


def key(suite: str, name: str, metric: str = "wall_time", unit: str = "s", direction: str = "lower_is_better",
        environment: str = CPU, **params: object) -> BenchmarkKey:
    return BenchmarkKey(suite, name, tuple((k, str(v)) for k, v in sorted(params.items())), metric, unit,
                        direction, environment)  # type: ignore[arg-type]


def basic_pairs() -> list[Pair]:
    return [
        Pair(key("softmax", "softmax_rows", rows=256, cols=4096), runs_of(spread(1.2e-3)),
             runs_of(spread(1.5e-3, phase=3))),
        Pair(key("softmax", "softmax_rows", rows=1024, cols=4096), runs_of(spread(4.8e-3)),
             runs_of(spread(4.81e-3, phase=5))),
        Pair(key("matmul", "matmul", m=512, n=512), runs_of(spread(2.5e-4, n=12)),
             runs_of(spread(2.2e-4, n=12, phase=1))),
        Pair(key("matmul", "matmul", m=2048, n=2048), runs_of(spread(0.0312, n=10)),
             runs_of(spread(0.0311, n=10, phase=2))),
        Pair(key("softmax", "softmax_rows", "algbw", "GB/s", "higher_is_better", rows=256, cols=4096),
             runs_of(spread(7.0)), runs_of(spread(5.6, phase=3))),
    ]


def edge_pairs() -> list[Pair]:
    gpu = "gpu 1x NVIDIA H200 [77aa00bb11]"
    return [
        Pair(key("attention", "flash", seq=2048), None, runs_of(spread(3e-3))),
        Pair(key("attention", "flash", seq=512), runs_of(spread(9e-4)), None),
        Pair(key("norms", "layernorm", fused=True), runs_of(spread(2e-4)),
             Side((), "failed", "XlaRuntimeError: RESOURCE_EXHAUSTED: out of memory\nTraceback...")),
        Pair(key("norms", "rmsnorm"), runs_of(spread(1e-4, n=4)), runs_of(spread(1.3e-4, n=4, phase=2))),
        Pair(key("norms", "tiny_shift"), runs_of(spread(5e-5, n=40, width=0.0005), shift=0.00002),
             runs_of(spread(5.02e-5, n=40, width=0.0005, phase=4), shift=0.00002)),
        # One run a side and no stored spread between runs: a +40 % that cannot be decided.
        Pair(key("norms", "once"), Side(spread(1e-4, n=4)), Side(spread(1.4e-4, n=4, phase=2))),
        Pair(key("matmul", "matmul", environment=gpu, m=512), runs_of(spread(2e-5)), runs_of(spread(1.7e-5, phase=6))),
    ]


def test_basic_comparison_reads_like_benchstat() -> None:
    report = compare(basic_pairs())
    text = format_text(report, BASE, HEAD)
    assert_golden("compare_basic.txt", text)
    assert "+24.9% (p<0.001 runs=3+3)" in text and "~ (p=" in text and "regression" in text


def test_edge_cases_table() -> None:
    report = compare(edge_pairs())
    notes = ("base also ran on tpu 8x TPU v5 lite [5e5e5e5e5e], which the other side did not: those results are "
             "not compared",)
    text = format_text(report, BASE, HEAD, notes)
    assert_golden("compare_edge.txt", text)
    assert "new" in text and "missing" in text and "failed in head: XlaRuntimeError" in text and "± ∞ ¹" in text
    assert "? ⁴" in text and "⁴ one run a side and no stored spread" in text and "~ ²" in text


def test_json_form() -> None:
    report = compare(basic_pairs(), CompareParams(alpha=0.05, min_effect=0.01))
    doc = to_json(report, BASE, HEAD)
    assert_golden("compare_basic.json", json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    assert doc["format"] == "kernelwatch.compare" and doc["version"] == 2
    assert doc["summary"]["regression"] == 2 and doc["summary"]["improvement"] == 1
    first = doc["benchmarks"][0]
    assert first["verdict"] == "regression" and first["params"] == {"cols": "4096", "rows": "256"}
    assert first["ratio_ci_low"] < first["ratio"] < first["ratio_ci_high"]
    # A document read back keeps every row; one stored before the runs needed were added reads as none known.
    read = from_json(doc)[0].rows
    assert [(r.verdict, r.reason, r.runs_needed) for r in read] == [(r.verdict, r.reason, r.runs_needed)
                                                                       for r in report.rows]
    old = {**first}
    del old["runs_needed"]
    assert comparison_from_json(old).runs_needed is None


@pytest.mark.parametrize(("value", "unit", "text"), [
    (1.2345e-3, "s", "1.234ms"), (2.5e-7, "s", "250ns"), (3.0, "s", "3s"), (0.0, "s", "0"),
    (12.5, "GB/s", "12.5"), (1e-12 / 2, "s", "0.5ps"),
])
def test_value_formatting(value: float, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


def test_an_interval_wider_than_its_median_is_said_so_not_printed_as_a_percentage() -> None:
    """Two runs a side (one degree of freedom) put a log-scale interval's upper end hundreds of times above the
    median: that read as "± 64661%"."""
    from service.detect.compare import MedianEstimate, SideResult
    from service.report.compare_table import estimate_cell, median_cell

    wide = SideResult("ok", None, MedianEstimate(n=10, median=372.1e-6, low=0.6e-6, high=240.9e-3, runs=2))
    assert estimate_cell(wide, "s") == "372.1µs ± >100%"
    assert median_cell(wide, lambda v: format_value(v, "s")) == "372.1µs ± >100%"
    narrow = SideResult("ok", None, MedianEstimate(n=10, median=1e-3, low=0.98e-3, high=1.03e-3, runs=4))
    assert estimate_cell(narrow, "s") == "1ms ± 3%"
    just = SideResult("ok", None, MedianEstimate(n=10, median=1e-3, low=0.5e-3, high=2e-3, runs=4))
    assert estimate_cell(just, "s") == "1ms ± 100%"


def test_the_significance_family_is_said_even_when_nothing_was_tested() -> None:
    from service.report.compare_table import tests_text

    assert tests_text(2) == "over 2 tests" and tests_text(1) == "over 1 test"
    assert "0 tests" not in tests_text(0) and "no row had runs enough" in tests_text(0)
