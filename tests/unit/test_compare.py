"""The two-sample comparison on synthetic samples whose right answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from service.detect.compare import (
    BenchmarkKey,
    CompareParams,
    Pair,
    Side,
    benjamini_hochberg,
    compare,
    mann_whitney_p,
    median_estimate,
    min_samples_for_interval,
)


def samples(level: float, n: int = 10, noise: float = 0.01, seed: int = 0) -> tuple[float, ...]:
    rng = np.random.default_rng(seed)
    return tuple(float(v) for v in level * np.exp(noise * rng.standard_normal(n)))


def key(name: str = "k", direction: str = "lower_is_better", metric: str = "wall_time") -> BenchmarkKey:
    return BenchmarkKey("suite", name, (("n", "8"),), metric=metric, direction=direction)  # type: ignore[arg-type]


def one(base: tuple[float, ...] | None, head: tuple[float, ...] | None, direction: str = "lower_is_better",
        **params: float):  # type: ignore[no-untyped-def]
    pair = Pair(key(direction=direction), Side(base) if base is not None else None,
                Side(head) if head is not None else None)
    return compare([pair], CompareParams(**params)).rows[0]  # type: ignore[arg-type]


def test_identical_samples_are_unchanged() -> None:
    base = samples(1e-3)
    row = one(base, base)
    assert row.verdict == "unchanged" and row.p_value == 1.0 and row.ratio == 1.0
    assert row.ratio_low is not None and row.ratio_high is not None and row.ratio_low <= 1.0 <= row.ratio_high


def test_draws_from_one_distribution_are_unchanged_about_as_often_as_alpha_promises() -> None:
    flagged = 0
    for seed in range(200):
        row = one(samples(1e-3, noise=0.02, seed=2 * seed), samples(1e-3, noise=0.02, seed=2 * seed + 1))
        flagged += row.verdict != "unchanged"
    assert flagged <= 10  # alpha 5 %, and the minimum effect only removes flags


def test_a_clear_ten_percent_slowdown_is_a_regression() -> None:
    row = one(samples(1e-3, seed=1), samples(1.1e-3, seed=2))
    assert row.verdict == "regression"
    assert row.p_value is not None and row.p_value < 0.01 and row.q_value is not None and row.q_value < 0.01
    assert row.ratio == pytest.approx(1.1, rel=0.02)
    assert row.ratio_low is not None and row.ratio_high is not None
    assert 1.0 < row.ratio_low < 1.1 < row.ratio_high
    assert row.base is not None and row.base.estimate is not None and row.base.estimate.n == 10


def test_direction_decides_regression_or_improvement() -> None:
    slow, fast = samples(1.1e-3, seed=2), samples(1e-3, seed=1)
    assert one(fast, slow, "higher_is_better").verdict == "improvement"  # e.g. more GB/s
    assert one(slow, fast, "lower_is_better").verdict == "improvement"
    assert one(slow, fast, "higher_is_better").verdict == "regression"


def test_a_significant_change_below_the_minimum_effect_is_unchanged() -> None:
    base, head = samples(1e-3, n=30, noise=0.001, seed=1), samples(1.005e-3, n=30, noise=0.001, seed=2)
    row = one(base, head)
    assert row.q_value is not None and row.q_value < 1e-6
    assert row.verdict == "unchanged" and row.below_min_effect
    assert one(base, head, min_effect=0.001).verdict == "regression"


def test_too_few_samples_cannot_be_significant_and_have_no_interval() -> None:
    row = one((1.0, 1.01, 1.02), (2.0, 2.01, 2.02))
    assert row.p_value == pytest.approx(0.1)  # exact: 2 of the 20 ways to split six samples are as extreme
    assert row.verdict == "unchanged"
    assert row.base is not None and row.base.estimate is not None and row.base.estimate.low is None
    assert row.ratio == pytest.approx(2.01 / 1.01) and row.ratio_low is None and row.ratio_high is None


def test_benjamini_hochberg_on_a_worked_example() -> None:
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205]
    expected = [0.008, 0.032, 0.0672, 0.0672, 0.0672, 0.08, 0.074 * 8 / 7, 0.205]
    assert benjamini_hochberg(p) == pytest.approx(expected)
    shuffled = [p[i] for i in (5, 0, 7, 2, 1, 6, 4, 3)]
    assert benjamini_hochberg(shuffled) == pytest.approx([expected[i] for i in (5, 0, 7, 2, 1, 6, 4, 3)])
    assert benjamini_hochberg([]) == [] and benjamini_hochberg([0.9, 0.95]) == [0.95, 0.95]


def test_benjamini_hochberg_agrees_with_scipy() -> None:
    p = np.random.default_rng(3).uniform(0, 0.2, 40)
    assert benjamini_hochberg(list(p)) == pytest.approx(stats.false_discovery_control(p, method="bh"))


def test_q_values_span_the_suite() -> None:
    pairs = [Pair(key("slow"), Side(samples(1e-3, seed=1)), Side(samples(1.1e-3, seed=2)))]
    pairs += [Pair(key(f"same{i}"), Side(samples(1e-3, seed=10 + i)), Side(samples(1e-3, seed=20 + i)))
              for i in range(9)]
    report = compare(pairs)
    slow = report.rows[0]
    assert report.tests == 10 and slow.q_value == pytest.approx(min(1.0, slow.p_value * 10))  # type: ignore[operator]


def test_failed_new_and_missing() -> None:
    ok = Side(samples(1e-3))
    pairs = [
        Pair(key("new"), None, ok),
        Pair(key("missing"), ok, None),
        Pair(key("broken_head"), ok, Side((), "failed", "XlaRuntimeError: out of memory")),
        Pair(key("broken_base"), Side((), "failed", "boom"), ok),
        Pair(key("new_and_broken"), None, Side((), "failed", "boom")),
        Pair(key("fine"), ok, ok),
    ]
    report = compare(pairs)
    assert [r.verdict for r in report.rows] == ["new", "missing", "failed", "failed", "failed", "unchanged"]
    assert report.tests == 1  # only what both sides measured is tested
    broken = report.rows[2]
    assert broken.head is not None and broken.head.message == "XlaRuntimeError: out of memory"
    assert broken.p_value is None and broken.ratio is None
    assert report.count("failed") == 3 and not report.has_regression


def test_median_interval_from_order_statistics() -> None:
    assert min_samples_for_interval(0.95) == 6 and min_samples_for_interval(0.99) == 8
    five = median_estimate([5, 1, 4, 2, 3])
    assert five.median == 3 and five.low is None and five.high is None
    six = median_estimate([6, 1, 5, 2, 4, 3])
    assert (six.low, six.median, six.high) == (1, 3.5, 6)  # coverage 1 - 2/64
    ten = median_estimate(list(range(1, 11)))
    assert (ten.low, ten.high) == (2, 9)  # 1 - 2 * 11/1024 >= 0.95 > 1 - 2 * 56/1024


def test_intervals_cover_about_as_often_as_they_claim() -> None:
    rng = np.random.default_rng(11)
    trials, median_hits, ratio_hits = 200, 0, 0
    for i in range(trials):
        base = np.exp(0.02 * rng.standard_normal(10))
        head = 1.1 * np.exp(0.02 * rng.standard_normal(10))
        e = median_estimate(list(base))
        assert e.low is not None and e.high is not None
        median_hits += e.low <= 1.0 <= e.high
        row = compare([Pair(key(f"b{i}"), Side(tuple(base)), Side(tuple(head)))]).rows[0]
        assert row.ratio_low is not None and row.ratio_high is not None
        ratio_hits += row.ratio_low <= 1.1 <= row.ratio_high
    assert 0.93 <= median_hits / trials <= 1.0  # order statistics: at least 97.9 % in theory for n = 10
    assert 0.90 <= ratio_hits / trials <= 1.0


def test_mann_whitney_methods() -> None:
    assert mann_whitney_p([1.0, 1.0], [1.0, 1.0]) == 1.0
    # Ties and few samples: the exact permutation distribution, not the normal approximation.
    tied = mann_whitney_p([1.0, 2.0, 2.0], [2.0, 3.0, 3.0])
    exact = stats.mannwhitneyu([1.0, 2.0, 2.0], [2.0, 3.0, 3.0],
                               method=stats.PermutationMethod(n_resamples=np.inf)).pvalue
    assert tied == pytest.approx(exact)
    assert mann_whitney_p(list(range(10)), [v + 100 for v in range(10)]) == pytest.approx(2 / math.comb(20, 10))


def test_geomean_of_the_ratios() -> None:
    pairs = [
        Pair(key("a"), Side(samples(1e-3, seed=1)), Side(samples(1.21e-3, seed=2))),
        Pair(key("b"), Side(samples(4e-3, seed=3)), Side(samples(4e-3, seed=4))),
        Pair(key("c"), None, Side(samples(1e-3, seed=5))),  # new: no ratio, not in the mean
        Pair(key("bw", metric="algbw"), Side(samples(10.0, seed=6)), Side(samples(12.0, seed=7))),
    ]
    report = compare(pairs)
    wall, bw = report.geomeans
    assert (wall.metric, wall.count, bw.metric, bw.count) == ("wall_time", 2, "algbw", 1)
    a, b = report.rows[0].ratio, report.rows[1].ratio
    assert a is not None and b is not None and wall.ratio == pytest.approx(math.sqrt(a * b))
    assert wall.ratio == pytest.approx(1.1, rel=0.02) and wall.base == pytest.approx(2e-3, rel=0.02)
    assert wall.low is not None and wall.high is not None and wall.low < wall.ratio < wall.high
    assert wall.high / wall.low < 1.05


def test_results_do_not_depend_on_order_or_neighbours() -> None:
    pairs = [Pair(key(f"b{i}"), Side(samples(1e-3, seed=i)), Side(samples(1.02e-3, seed=50 + i))) for i in range(4)]
    forward = compare(pairs)
    backward = compare(pairs[::-1])
    assert forward.rows == backward.rows[::-1]
    alone = compare(pairs[:1]).rows[0]
    assert (alone.ratio_low, alone.ratio_high) == (forward.rows[0].ratio_low, forward.rows[0].ratio_high)


def test_bad_parameters_and_input() -> None:
    with pytest.raises(ValueError, match="alpha"):
        CompareParams(alpha=0)
    with pytest.raises(ValueError, match="minimum effect"):
        CompareParams(min_effect=-0.1)
    with pytest.raises(ValueError, match="twice"):
        compare([Pair(key(), Side((1.0,)), Side((1.0,)))] * 2)
    with pytest.raises(ValueError, match="neither"):
        compare([Pair(key(), None, None)])


def test_vectorised_mann_whitney_agrees_with_one_pair_at_a_time() -> None:
    from service.detect.compare import _mann_whitney_many

    rng = np.random.default_rng(3)
    base = rng.normal(1.0, 0.01, (40, 10))
    head = rng.normal(1.005, 0.01, (40, 10))
    head[5] = base[5]  # ties: the per-row permutation path
    head[6, :3] = base[6, :3]
    many = _mann_whitney_many(base, head)
    assert many.tolist() == pytest.approx([mann_whitney_p(b, h) for b, h in zip(base, head, strict=True)],
                                          rel=1e-12)


def test_intervals_filled_in_later_match_the_full_comparison() -> None:
    from service.detect.compare import with_intervals

    pairs = [Pair(key(f"b{i}"), Side(samples(1e-3, seed=i)), Side(samples(1.03e-3, seed=90 + i)))
             for i in range(12)]
    full = compare(pairs)
    bare = compare(pairs, intervals_for=())
    assert all(row.ratio_low is None for row in bare.rows) and bare.geomeans == full.geomeans
    filled = with_intervals(bare, pairs, [7, 2])
    assert filled.rows[7] == full.rows[7] and filled.rows[2] == full.rows[2]
    assert filled.rows[3].ratio_low is None


def test_a_large_group_geomean_interval_matches_its_replicates() -> None:
    """From GEOMEAN_NORMAL_MIN members on the interval is the normal one; it must agree with the percentiles of
    the members' averaged replicates, which the small-group path takes."""
    from service.detect.compare import GEOMEAN_NORMAL_MIN, _geomean_interval, _replicates

    n = GEOMEAN_NORMAL_MIN + 10
    keys = [key(f"b{i}") for i in range(n)]
    base = np.sort(np.array([samples(1e-3, seed=i) for i in range(n)]), axis=1)
    head = np.sort(np.array([samples(1.02e-3, seed=500 + i) for i in range(n)]), axis=1)
    members = [r for r in _replicates(keys, base, head, CompareParams()) if r is not None]
    assert len(members) == n
    low, high = _geomean_interval(members, CompareParams())
    averaged = np.mean([m.values(CompareParams()) for m in members], axis=0)
    tail_low, tail_high = np.exp(np.percentile(averaged, [2.5, 97.5]))
    width = tail_high - tail_low
    assert abs(low - tail_low) < 0.1 * width and abs(high - tail_high) < 0.1 * width
