"""Two-sample comparison of a suite at two points (a pull request against its merge base, or any two commits),
benchstat style. PURE: numpy and scipy only, every parameter passed in.

Per benchmark present on both sides:

- **Each side's median with a confidence interval from order statistics.** ``[x(k), x(n+1-k)]`` holds the
  population median with probability ``1 - 2 P(Binomial(n, 1/2) <= k - 1)`` whatever the distribution; the
  narrowest such interval that reaches the level is taken. Below 6 samples no pair of order statistics reaches
  95 %, and the interval is reported as absent rather than invented (benchstat does the same).
- **The ratio head/base of the medians, with a percentile-bootstrap interval**: each side resampled on its own,
  the ratio of the two resampled medians, ``resamples`` times. Chosen over Hodges-Lehmann on log samples because
  its point estimate is the ratio of the two medians printed beside it, so the delta a reader sees is the one
  the interval is about. The generator is seeded from the seed given and the benchmark's identity, so a
  benchmark's interval does not depend on what else was compared. Only where both sides have an interval of
  their own (the bootstrap of a median of fewer samples has too few distinct values to carry one).
- **Mann-Whitney U, two-sided**: exact without ties; with ties, the exact permutation distribution when there
  are few arrangements, else the normal approximation with tie correction.
- **Benjamini-Hochberg q-values** over every benchmark tested in the one comparison (valid under the positive
  dependence that several metrics of one benchmark have).
- **A verdict**: a change counts only when ``q < alpha`` and ``|ratio - 1| >= min_effect``; the benchmark's
  direction says whether it is a regression or an improvement.

Per group of like benchmarks (environment, metric, unit): the geometric mean of the ratios, with bounds from the
same bootstrap replicates (the geomean of each replicate's ratios). Those bounds carry measurement noise only;
they say nothing about how representative the suite is.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from service.detect.types import Direction

Verdict = Literal["regression", "improvement", "unchanged", "failed", "new", "missing"]
VERDICTS: tuple[Verdict, ...] = ("regression", "improvement", "unchanged", "failed", "new", "missing")

EXACT_MAX_PRODUCT = 10_000  # m * n up to which the exact U distribution (no ties) is used
EXACT_MAX_ARRANGEMENTS = 5_000  # with ties: exact permutation test up to this many ways to split the samples
BOOTSTRAP_CELLS = 2_000_000  # resampled values held in memory at once


@dataclass(frozen=True)
class BenchmarkKey:
    suite: str
    name: str
    params: tuple[tuple[str, str], ...] = ()
    metric: str = "wall_time"
    unit: str = "s"
    direction: Direction = "lower_is_better"
    environment: str = ""  # both sides ran here: only like is compared with like

    @property
    def label(self) -> str:
        params = " ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.suite}/{self.name}" + (f" {params}" if params else "")


@dataclass(frozen=True)
class Side:
    """One side's measurement of a benchmark: every sample (runs of the same environment pooled)."""

    samples: tuple[float, ...]
    status: str = "ok"  # ok | failed
    message: str | None = None


@dataclass(frozen=True)
class Pair:
    key: BenchmarkKey
    base: Side | None  # None: the benchmark was not run on that side
    head: Side | None


@dataclass(frozen=True)
class CompareParams:
    alpha: float = 0.05
    min_effect: float = 0.01
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must lie between 0 and 1, not {self.alpha}")
        if not (self.min_effect >= 0 and math.isfinite(self.min_effect)):
            raise ValueError(f"the minimum effect must be a non-negative fraction, not {self.min_effect}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"the confidence level must lie between 0 and 1, not {self.confidence}")
        if self.resamples < 100:
            raise ValueError(f"at least 100 bootstrap resamples, not {self.resamples}")


@dataclass(frozen=True)
class MedianEstimate:
    n: int
    median: float
    low: float | None  # None: too few samples for an interval at the level asked
    high: float | None


@dataclass(frozen=True)
class SideResult:
    status: str
    message: str | None
    estimate: MedianEstimate | None  # None when the side failed


@dataclass(frozen=True)
class Comparison:
    key: BenchmarkKey
    verdict: Verdict
    base: SideResult | None
    head: SideResult | None
    ratio: float | None = None  # head median / base median
    ratio_low: float | None = None
    ratio_high: float | None = None
    p_value: float | None = None
    q_value: float | None = None
    below_min_effect: bool = False  # significant, but smaller than the minimum effect


@dataclass(frozen=True)
class Geomean:
    environment: str
    metric: str
    unit: str
    count: int  # benchmarks in it: those with positive medians on both sides
    base: float
    head: float
    ratio: float
    low: float | None  # None unless every benchmark in it has a bootstrap interval
    high: float | None


@dataclass(frozen=True)
class ComparisonReport:
    params: CompareParams
    rows: tuple[Comparison, ...]
    geomeans: tuple[Geomean, ...]
    tests: int  # the size of the Benjamini-Hochberg family

    def count(self, verdict: Verdict) -> int:
        return sum(1 for row in self.rows if row.verdict == verdict)

    @property
    def has_regression(self) -> bool:
        return self.count("regression") > 0


def min_samples_for_interval(confidence: float) -> int:
    """The fewest samples whose extreme order statistics hold the median with at least this probability."""
    n = 1
    while 1 - 2 * 0.5**n < confidence - 1e-12:
        n += 1
    return n


def median_estimate(samples: Sequence[float], confidence: float = 0.95) -> MedianEstimate:
    x = np.sort(np.asarray(samples, dtype=float))
    n = int(x.size)
    if n == 0:
        raise ValueError("no samples")
    median = float(np.median(x))
    if n < min_samples_for_interval(confidence):
        return MedianEstimate(n, median, None, None)
    ranks = np.arange(1, n // 2 + 1)
    coverage = 1 - 2 * stats.binom.cdf(ranks - 1, n, 0.5)  # decreasing in the rank
    k = int(ranks[coverage >= confidence - 1e-12].max())
    return MedianEstimate(n, median, float(x[k - 1]), float(x[n - k]))


def mann_whitney_p(base: Sequence[float], head: Sequence[float]) -> float:
    x, y = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    pooled = np.concatenate([x, y])
    if np.all(pooled == pooled[0]):
        return 1.0  # no information at all; the normal approximation would divide by zero
    ties = np.unique(pooled).size < pooled.size
    method: str | stats.PermutationMethod
    if not ties and x.size * y.size <= EXACT_MAX_PRODUCT:
        method = "exact"
    elif ties and math.comb(x.size + y.size, x.size) <= EXACT_MAX_ARRANGEMENTS:
        method = stats.PermutationMethod(n_resamples=np.inf)
    else:
        method = "asymptotic"
    p = float(stats.mannwhitneyu(x, y, alternative="two-sided", method=method).pvalue)
    return min(1.0, p)


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Adjusted p-values (q-values) controlling the false discovery rate, in the order given."""
    m = len(p_values)
    if m == 0:
        return []
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    q = np.empty(m)
    q[order] = adjusted
    return [float(v) for v in q]


def _rng_for(key: BenchmarkKey, seed: int) -> np.random.Generator:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def _resampled_medians(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    out = np.empty(resamples)
    chunk = max(1, BOOTSTRAP_CELLS // x.size)
    for start in range(0, resamples, chunk):
        rows = min(chunk, resamples - start)
        out[start:start + rows] = np.median(x[rng.integers(0, x.size, size=(rows, x.size))], axis=1)
    return out


def bootstrap_log_ratios(base: Sequence[float], head: Sequence[float], resamples: int,
                         rng: np.random.Generator) -> np.ndarray | None:
    """``log(median(head*) / median(base*))`` per bootstrap replicate; None where a resampled median is not
    positive (a ratio of such medians has no logarithm)."""
    x, y = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    mx = _resampled_medians(x, resamples, rng)
    my = _resampled_medians(y, resamples, rng)
    if np.any(mx <= 0) or np.any(my <= 0):
        return None
    return np.log(my) - np.log(mx)


def _side_result(side: Side | None, confidence: float) -> SideResult | None:
    if side is None:
        return None
    if side.status != "ok" or not side.samples:
        return SideResult(side.status if side.status != "ok" else "failed", side.message or "no samples", None)
    return SideResult("ok", side.message, median_estimate(side.samples, confidence))


def _absent_verdict(base: SideResult | None, head: SideResult | None) -> Verdict | None:
    """The verdict of a pair that cannot be tested, or None when both sides are measured."""
    if head is None:
        return "missing"
    if head.estimate is None:
        return "failed"
    if base is None:
        return "new"
    if base.estimate is None:
        return "failed"
    return None


def _percentiles(log_values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(log_values, [tail, 100 - tail])
    return float(math.exp(low)), float(math.exp(high))


def compare(pairs: Sequence[Pair], params: CompareParams | None = None) -> ComparisonReport:
    """Compare every pair; rows come back in the order given."""
    params = params or CompareParams()
    keys = [pair.key for pair in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a benchmark appears twice in one comparison")
    interval_n = min_samples_for_interval(params.confidence)

    sides: list[tuple[SideResult | None, SideResult | None]] = []
    tested: list[int] = []
    p_values: list[float] = []
    replicates: dict[int, np.ndarray] = {}
    for index, pair in enumerate(pairs):
        if pair.base is None and pair.head is None:
            raise ValueError(f"{pair.key.label}: neither side has it")
        base, head = _side_result(pair.base, params.confidence), _side_result(pair.head, params.confidence)
        sides.append((base, head))
        if _absent_verdict(base, head) is not None:
            continue
        assert pair.base is not None and pair.head is not None
        tested.append(index)
        p_values.append(mann_whitney_p(pair.base.samples, pair.head.samples))
        if min(len(pair.base.samples), len(pair.head.samples)) >= interval_n:
            logs = bootstrap_log_ratios(pair.base.samples, pair.head.samples, params.resamples,
                                        _rng_for(pair.key, params.seed))
            if logs is not None:
                replicates[index] = logs
    q_by_index = dict(zip(tested, benjamini_hochberg(p_values), strict=True))
    p_by_index = dict(zip(tested, p_values, strict=True))

    rows: list[Comparison] = []
    for index, (pair, (base, head)) in enumerate(zip(pairs, sides, strict=True)):
        absent = _absent_verdict(base, head)
        if absent is not None:
            rows.append(Comparison(pair.key, absent, base, head))
            continue
        rows.append(_tested_row(pair.key, base, head, p_by_index[index], q_by_index[index],
                                replicates.get(index), params))
    geomeans = _geomeans(rows, replicates, params.confidence)
    return ComparisonReport(params=params, rows=tuple(rows), geomeans=geomeans, tests=len(tested))


def _tested_row(key: BenchmarkKey, base: SideResult | None, head: SideResult | None, p: float, q: float,
                logs: np.ndarray | None, params: CompareParams) -> Comparison:
    assert base is not None and base.estimate is not None and head is not None and head.estimate is not None
    b, h = base.estimate.median, head.estimate.median
    ratio = h / b if b > 0 else None
    low = high = None
    if logs is not None:
        low, high = _percentiles(logs, params.confidence)
    significant = q < params.alpha and h != b
    # From a zero median any change is infinitely large relative to it.
    large = ratio is None or abs(ratio - 1) >= params.min_effect
    verdict: Verdict = "unchanged"
    if significant and large:
        worse = (h > b) == (key.direction == "lower_is_better")
        verdict = "regression" if worse else "improvement"
    return Comparison(key, verdict, base, head, ratio=ratio, ratio_low=low, ratio_high=high, p_value=p,
                      q_value=q, below_min_effect=significant and not large)


def _geomeans(rows: Sequence[Comparison], replicates: dict[int, np.ndarray],
              confidence: float) -> tuple[Geomean, ...]:
    groups: dict[tuple[str, str, str], list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault((row.key.environment, row.key.metric, row.key.unit), [])
        b = row.base.estimate if row.base is not None else None
        h = row.head.estimate if row.head is not None else None
        if row.ratio is not None and b is not None and h is not None and b.median > 0 and h.median > 0:
            groups[(row.key.environment, row.key.metric, row.key.unit)].append(index)
    out = []
    for (environment, metric, unit), members in groups.items():
        if not members:
            continue
        base_logs = [math.log(_median(rows[i].base)) for i in members]
        head_logs = [math.log(_median(rows[i].head)) for i in members]
        base_geo, head_geo = math.exp(float(np.mean(base_logs))), math.exp(float(np.mean(head_logs)))
        low = high = None
        if all(i in replicates for i in members):
            low, high = _percentiles(np.mean([replicates[i] for i in members], axis=0), confidence)
        out.append(Geomean(environment, metric, unit, len(members), base_geo, head_geo, head_geo / base_geo,
                           low, high))
    return tuple(out)


def _median(side: SideResult | None) -> float:
    assert side is not None and side.estimate is not None
    return side.estimate.median
