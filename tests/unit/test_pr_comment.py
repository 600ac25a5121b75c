"""The pull-request comment and check output against golden files (KERNELWATCH_UPDATE_GOLDEN=1 rewrites them)."""

from __future__ import annotations

from service.detect.compare import BenchmarkKey, Pair, Side, compare
from service.report.compare_table import SideLabel
from service.report.pr_comment import (
    GITHUB_LIMIT,
    MARKER,
    CommentContext,
    check_output,
    conclusion,
    format_comment,
    headline,
)
from tests.builders import runs_of
from tests.golden import assert_golden

BASE = SideLabel(ref="1a2b3c4d", repository="kernels", commit="1a2b3c4d" * 5, subject="softmax: fuse the max")
HEAD = SideLabel(ref="9f8e7d6c", repository="kernels", commit="9f8e7d6c" * 5, subject="softmax: online | normaliser")
CPU = "cpu [3f2a9c1d0e]"
CTX = CommentContext(BASE, HEAD, public_url="https://kw.example.com")


def spread(level: float, n: int = 10, width: float = 0.01, phase: int = 0) -> tuple[float, ...]:
    """Deterministic samples around a level: the golden files must not move."""
    return tuple(level * (1 + width * (((i * 7 + phase) % 11) - 5) / 5) for i in range(n))


def key(name: str, metric: str = "wall_time", unit: str = "s", env: str = CPU, **params: object) -> BenchmarkKey:
    direction = "higher_is_better" if unit == "GB/s" else "lower_is_better"
    return BenchmarkKey("softmax", name, tuple((k, str(v)) for k, v in sorted(params.items())), metric, unit,
                        direction, env)  # type: ignore[arg-type]


def mixed_pairs() -> list[Pair]:
    return [
        Pair(key("rows", rows=256), runs_of(spread(1.2e-3)), runs_of(spread(1.5e-3, phase=3))),
        Pair(key("rows", rows=1024), runs_of(spread(4.8e-3)), runs_of(spread(4.81e-3, phase=5))),
        Pair(key("cols", cols=512), runs_of(spread(2.5e-4, n=12)), runs_of(spread(2.2e-4, n=12, phase=1))),
        Pair(key("rows", "algbw", "GB/s", rows=256), runs_of(spread(7.0)), runs_of(spread(5.6, phase=3))),
        Pair(key("fused", fused=True), runs_of(spread(2e-4)), Side((), "failed", "XlaRuntimeError: OOM\nTraceback")),
        Pair(key("online"), None, runs_of(spread(3e-3))),
        Pair(key("gone"), runs_of(spread(9e-4)), None),
        Pair(key("once"), Side(spread(1e-3, n=4)), Side(spread(1.4e-3, n=4))),  # one run a side: undecided
    ]


def test_a_mixed_comparison_reads_as_one_comment() -> None:
    report = compare(mixed_pairs())
    body = format_comment(report, CTX)
    assert body.startswith(MARKER + "\n")
    assert conclusion(report) == "failure"
    # Changed rows up front, the rest folded; the pipe in a subject does not break a table.
    assert body.index("#### Changed") < body.index("<details>")
    assert "online \\| normaliser" in body
    assert "https://kw.example.com/compare?base=" + BASE.commit in body
    assert "❔ inconclusive" in body and "inconclusive: one run a side" in body
    # Rows are metrics of benchmarks: rows=256 has two; a p under 0.001 is not printed as 0; the delta names its
    # runs B+H, which the pipeline's notes refer to.
    assert "2 regressions and 1 failed in 7 benchmarks (8 comparisons)" in body
    assert "p=0.000" not in body and "**+24.9%** (p<0.001 runs=3+3)" in body
    assert "Updated in place on every push" in body
    assert "Updated in place" not in check_output(report, CTX)["summary"]  # a check run is made per push
    assert_golden("pr_comment_mixed.md", body)


def test_a_benchmark_at_the_head_alone_is_named_beside_no_change() -> None:
    """One the merge-base could not import (the pull request adds it) is listed as failed: the headline said "no
    change" over it."""
    report = compare([Pair(key("rows", rows=256), runs_of(spread(1e-3)), runs_of(spread(1e-3, phase=2))),
                      Pair(key("added"), Side((), "failed", "ImportError: no module"), runs_of(spread(2e-3)))])
    assert conclusion(report) == "success"
    assert headline(report, CTX) == "no change in 2 benchmarks (1 at the head alone)"


def test_a_cut_subject_leaves_no_code_span_open() -> None:
    subject = "kernels: move `" + "x" * 45 + "` into `pallas_call` and more words after it"
    body = format_comment(None, CommentContext(BASE, SideLabel(ref="9f8e7d6c", repository="kernels",
                                                               commit="9f8e7d6c" * 5, subject=subject)))
    line = next(li for li in body.splitlines() if li.startswith("Head "))
    said = line.split("` ", 1)[1].split(" against merge-base")[0]
    assert said.count("`") % 2 == 0 and said.endswith("…") and len(said) <= 72, said


def test_a_comparison_of_inconclusive_rows_only_is_neutral_and_says_so() -> None:
    undecided = compare([Pair(key("once"), Side(spread(1e-3, n=4)), Side(spread(1.4e-3, n=4)))])
    assert conclusion(undecided) == "neutral"
    assert headline(undecided, CTX) == "undecided: 1 inconclusive in 1 benchmark"
    mixed = compare([Pair(key("once"), Side(spread(1e-3, n=4)), Side(spread(1.4e-3, n=4))),
                     Pair(key("same"), runs_of(spread(1e-3)), runs_of(spread(1e-3)))])
    assert conclusion(mixed) == "success" and headline(mixed, CTX).endswith("(1 inconclusive)")


def test_a_clean_comparison_succeeds() -> None:
    pairs = [Pair(key("rows", rows=n), runs_of(spread(1e-3 * n / 256)), runs_of(spread(1e-3 * n / 256, phase=2)))
             for n in (256, 512, 1024)]
    report = compare(pairs)
    assert conclusion(report) == "success"
    assert headline(report, CTX) == "no change in 3 benchmarks"
    body = format_comment(report, CommentContext(BASE, HEAD))  # no public URL: no links
    assert "](" not in body and "#### Changed" not in body
    assert_golden("pr_comment_clean.md", body)


def test_no_baseline_is_neutral() -> None:
    ctx = CommentContext(BASE, HEAD, missing_baseline="the merge-base 1a2b3c4d1a2b has no runs")
    assert conclusion(None) == "neutral"
    body = format_comment(None, ctx)
    assert "no baseline" in body
    assert_golden("pr_comment_no_baseline.md", body)
    only_new = compare([Pair(key("online"), None, runs_of(spread(3e-3)))])
    assert conclusion(only_new) == "neutral"
    assert headline(only_new, CTX) == "no baseline: the merge-base ran none of the 1 benchmark"
    # The pull request that adds the suite: every benchmark failed at the merge-base (no suite there) alone.
    suite_added = compare([Pair(key("rows", rows=n), Side((), "failed", "this commit has no benchmark suite"),
                                runs_of(spread(1e-3))) for n in (256, 512)])
    assert conclusion(suite_added) == "neutral"
    assert headline(suite_added, CTX) == "no baseline: the merge-base ran none of the 2 benchmarks"
    one_added = compare([Pair(key("new"), Side((), "failed", "ImportError"), runs_of(spread(1e-3))),
                         Pair(key("gone"), runs_of(spread(1e-3)), None)])
    assert headline(one_added, CTX) == "no baseline: 1 of 2 benchmarks ran at the head alone"


def test_a_huge_suite_is_trimmed_under_githubs_limit_with_a_note() -> None:
    pairs = [Pair(key(f"kernel_{i:05d}", shape="x" * 40), runs_of(spread(1e-3)),
                  runs_of(spread(1.3e-3 if i % 3 else 1e-3, phase=2)))
             for i in range(3000)]
    report = compare(pairs)
    body = format_comment(report, CTX)
    assert len(body) <= GITHUB_LIMIT
    assert "left out to stay within GitHub's size limit" in body
    assert body.rstrip().endswith("</sub>")  # the footer survives the cut
    assert "kernel_00001" in body  # the first regressions are kept before anything else
    summary = check_output(report, CTX)["summary"]
    assert len(summary) < GITHUB_LIMIT and MARKER not in summary
