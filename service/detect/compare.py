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
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

import numpy as np

from service.detect.types import Direction

if TYPE_CHECKING:
    from scipy import stats

Verdict = Literal["regression", "improvement", "unchanged", "failed", "new", "missing"]
VERDICTS: tuple[Verdict, ...] = ("regression", "improvement", "unchanged", "failed", "new", "missing")

EXACT_MAX_PRODUCT = 10_000  # m * n up to which the exact U distribution (no ties) is used
EXACT_MAX_ARRANGEMENTS = 5_000  # with ties: exact permutation test up to this many ways to split the samples
GEOMEAN_NORMAL_MIN = 30  # members from which a geomean's interval is the normal one (see _geomean_interval)


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
    # The achieved fraction of the roofline on this side (the median of its results' stored figures), carried
    # to the row as it is: a figure to show beside the time, not a statistic of this comparison.
    fraction: float | None = None


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
    base_fraction: float | None = None  # each side's achieved fraction of the roofline (Side.fraction)
    head_fraction: float | None = None


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
    # The whole comparison's count per verdict when ``rows`` holds one page of it (a stored comparison is read a
    # page at a time); None when ``rows`` is all of it.
    totals: tuple[tuple[Verdict, int], ...] | None = None

    def count(self, verdict: Verdict) -> int:
        if self.totals is not None:
            return dict(self.totals).get(verdict, 0)
        return sum(1 for row in self.rows if row.verdict == verdict)

    @property
    def compared(self) -> int:
        """How many benchmarks the comparison holds, listed here or not."""
        return len(self.rows) if self.totals is None else sum(n for _, n in self.totals)

    @property
    def has_regression(self) -> bool:
        return self.count("regression") > 0


def min_samples_for_interval(confidence: float) -> int:
    """The fewest samples whose extreme order statistics hold the median with at least this probability."""
    n = 1
    while 1 - 2 * 0.5**n < confidence - 1e-12:
        n += 1
    return n


@lru_cache(maxsize=256)
def _interval_rank(n: int, confidence: float) -> int | None:
    """k of the narrowest ``[x(k), x(n+1-k)]`` holding the median with at least this probability; None below
    the fewest samples that can."""
    if n < min_samples_for_interval(confidence):
        return None
    from scipy import stats  # here, not at the top: half a second that the CLI's other commands never need

    ranks = np.arange(1, n // 2 + 1)
    coverage = 1 - 2 * stats.binom.cdf(ranks - 1, n, 0.5)  # decreasing in the rank
    return int(ranks[coverage >= confidence - 1e-12].max())


def _estimates(sorted_samples: np.ndarray, confidence: float) -> list[MedianEstimate]:
    """Median estimates of each row of a (rows, n) array sorted along its rows."""
    rows, n = sorted_samples.shape
    if n == 0:
        raise ValueError("no samples")
    medians = np.median(sorted_samples, axis=1).tolist()
    k = _interval_rank(n, confidence)
    if k is None:
        return [MedianEstimate(n, m, None, None) for m in medians]
    lows, highs = sorted_samples[:, k - 1].tolist(), sorted_samples[:, n - k].tolist()
    return [MedianEstimate(n, m, lo, hi) for m, lo, hi in zip(medians, lows, highs, strict=True)]


def median_estimate(samples: Sequence[float], confidence: float = 0.95) -> MedianEstimate:
    return _estimates(np.sort(np.asarray(samples, dtype=float)).reshape(1, -1), confidence)[0]


def mann_whitney_p(base: Sequence[float], head: Sequence[float]) -> float:
    from scipy import stats

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


def _mann_whitney_many(base: np.ndarray, head: np.ndarray) -> np.ndarray:
    """``mann_whitney_p`` of each row pair of two (rows, n) arrays. Rows without ties (timings nearly always)
    go to scipy in one vectorised call, whose exact distribution is built once per pair of sizes; the rare rows
    with ties take the per-row path and its permutation test."""
    rows, nx = base.shape
    ny = head.shape[1]
    pooled = np.sort(np.concatenate([base, head], axis=1), axis=1)
    tied = np.any(pooled[:, 1:] == pooled[:, :-1], axis=1)
    p = np.empty(rows)
    clean = np.flatnonzero(~tied)
    if clean.size:
        from scipy import stats

        method = "exact" if nx * ny <= EXACT_MAX_PRODUCT else "asymptotic"
        result = stats.mannwhitneyu(base[clean], head[clean], axis=1, alternative="two-sided", method=method)
        p[clean] = np.minimum(1.0, result.pvalue)
    for i in np.flatnonzero(tied):
        p[i] = mann_whitney_p(base[i], head[i])
    return p


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


@lru_cache(maxsize=64)
def _median_draws(n: int, resamples: int, seed: int, side: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bootstrap resamples of n values, as what they select: the median of a resample is the mean of two order
    statistics of the sample (one, twice, for odd n), so a draw is the pair of their positions in the sorted
    sample. Returns the distinct pairs (``lo``, ``hi``) and each draw's index among them. The draws depend only
    on n, the seed and the side, which is what lets every benchmark share them (see ``_ratio_replicates``)."""
    rng = np.random.default_rng([seed, n, side])
    draws = np.sort(rng.integers(0, n, size=(resamples, n)), axis=1)
    lo, hi = draws[:, (n - 1) // 2], draws[:, n // 2]
    atoms, inverse = np.unique(lo * n + hi, return_inverse=True)
    return atoms // n, atoms % n, inverse.reshape(-1)


@dataclass(frozen=True)
class _Replicates:
    """One benchmark's bootstrap distribution of ``log(median(head*) / median(base*))``, kept as the log medians
    of each side's distinct draws (a few dozen values) and which draw each replicate takes: the replicates
    themselves (``resamples`` values) are only made for the rows and groups whose interval is asked for."""

    key: BenchmarkKey
    base_logs: np.ndarray  # log median per distinct base draw
    head_logs: np.ndarray
    base_draws: np.ndarray  # per replicate: its distinct base draw (shared by every benchmark of this size)
    head_draws: np.ndarray
    mean: float  # of the replicates, and their variance: exact, from the draws' counts
    variance: float

    def values(self, params: CompareParams) -> np.ndarray:
        """The replicates, each side's draws read from this benchmark's own rotation (made only when asked:
        hashing the identity of thousands of benchmarks is not free)."""
        digest = hashlib.sha256(repr((params.seed, self.key)).encode()).digest()
        shift_base = int.from_bytes(digest[:8], "little") % params.resamples
        shift_head = int.from_bytes(digest[8:16], "little") % params.resamples
        return (self.head_logs[np.roll(self.head_draws, -shift_head)]
                - self.base_logs[np.roll(self.base_draws, -shift_base)])


def _moments(logs: np.ndarray, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance over the replicates of each row of a (rows, distinct draws) table of log medians."""
    weights = np.bincount(draws, minlength=logs.shape[1]) / draws.size
    mean = logs @ weights
    return mean, ((logs - mean[:, None]) ** 2) @ weights


def _replicates(keys: Sequence[BenchmarkKey], base: np.ndarray, head: np.ndarray,
                params: CompareParams) -> list[_Replicates | None]:
    """The bootstrap of the ratio for rows of equal sample sizes: one set of draws per size and side, shared by
    every benchmark (a benchmark's interval still depends only on its own samples, the seed and its identity),
    each benchmark reading them from its own rotation so that two benchmarks' replicates are independent (the
    geomean's interval needs that). None for a row where a resampled median is not positive (no logarithm)."""
    sides = []
    for code, values in ((0, base), (1, head)):
        lo, hi, inverse = _median_draws(values.shape[1], params.resamples, params.seed, code)
        medians = (values[:, lo] + values[:, hi]) / 2
        positive = np.all(medians > 0, axis=1)
        logs = np.log(np.where(medians > 0, medians, 1.0))
        sides.append((logs, inverse, positive, *_moments(logs, inverse)))
    (bl, bi, bpos, bmean, bvar), (hl, hi_, hpos, hmean, hvar) = sides
    out: list[_Replicates | None] = []
    for row, key in enumerate(keys):
        if not (bpos[row] and hpos[row]):
            out.append(None)
            continue
        out.append(_Replicates(key, bl[row], hl[row], bi, hi_, float(hmean[row] - bmean[row]),
                               float(hvar[row] + bvar[row])))
    return out


def _sample_matrix(sides: Sequence[Side | None]) -> np.ndarray:
    """The samples of sides of one size as the rows of an array."""
    return np.array([side.samples if side is not None else () for side in sides], dtype=np.float64)


def _side_results(sides: Sequence[Side | None], confidence: float) -> list[SideResult | None]:
    """Each side's median estimate, computed for all sides of one sample size at once."""
    out: list[SideResult | None] = [None] * len(sides)
    by_size: dict[int, list[int]] = {}
    for index, side in enumerate(sides):
        if side is None:
            continue
        if side.status != "ok" or not side.samples:
            out[index] = SideResult(side.status if side.status != "ok" else "failed", side.message or "no samples",
                                    None)
        else:
            by_size.setdefault(len(side.samples), []).append(index)
    for indices in by_size.values():
        values = np.sort(_sample_matrix([sides[i] for i in indices]), axis=1)
        for index, estimate in zip(indices, _estimates(values, confidence), strict=True):
            out[index] = SideResult("ok", sides[index].message, estimate)  # type: ignore[union-attr]
    return out


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


def compare(pairs: Sequence[Pair], params: CompareParams | None = None, *,
            intervals_for: Collection[int] | None = None) -> ComparisonReport:
    """Compare every pair; rows come back in the order given. ``intervals_for``: the rows (indices into pairs)
    whose ratio interval is wanted, every row when None; a page of a large comparison asks for its own rows
    only, since an interval takes ``resamples`` values to make where everything else takes a few."""
    params = params or CompareParams()
    keys = [pair.key for pair in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a benchmark appears twice in one comparison")
    for pair in pairs:
        if pair.base is None and pair.head is None:
            raise ValueError(f"{pair.key.label}: neither side has it")
    interval_n = min_samples_for_interval(params.confidence)
    bases = _side_results([pair.base for pair in pairs], params.confidence)
    heads = _side_results([pair.head for pair in pairs], params.confidence)

    # Tested pairs, grouped by their sample sizes so that each statistic runs over arrays.
    by_sizes: dict[tuple[int, int], list[int]] = {}
    for index, (pair, base, head) in enumerate(zip(pairs, bases, heads, strict=True)):
        if _absent_verdict(base, head) is None:
            assert pair.base is not None and pair.head is not None
            by_sizes.setdefault((len(pair.base.samples), len(pair.head.samples)), []).append(index)
    p_by_index: dict[int, float] = {}
    replicates: dict[int, _Replicates] = {}
    for (nx, ny), indices in by_sizes.items():
        base_values = _sample_matrix([pairs[i].base for i in indices])
        head_values = _sample_matrix([pairs[i].head for i in indices])
        p_by_index.update(zip(indices, _mann_whitney_many(base_values, head_values).tolist(), strict=True))
        if min(nx, ny) >= interval_n:
            made = _replicates([keys[i] for i in indices], base_values, head_values, params)
            replicates.update((i, r) for i, r in zip(indices, made, strict=True) if r is not None)
    tested = sorted(p_by_index)
    q_by_index = dict(zip(tested, benjamini_hochberg([p_by_index[i] for i in tested]), strict=True))

    wanted = range(len(pairs)) if intervals_for is None else set(intervals_for)
    rows: list[Comparison] = []
    for index, (pair, base, head) in enumerate(zip(pairs, bases, heads, strict=True)):
        absent = _absent_verdict(base, head)
        if absent is not None:
            rows.append(Comparison(pair.key, absent, base, head))
            continue
        found = replicates.get(index)
        interval = _percentiles(found.values(params), params.confidence) if found and index in wanted else None
        rows.append(_tested_row(pair.key, base, head, p_by_index[index], q_by_index[index], interval, params))
    rows = [_with_fractions(row, pair) for row, pair in zip(rows, pairs, strict=True)]
    geomeans = _geomeans(rows, replicates, params)
    return ComparisonReport(params=params, rows=tuple(rows), geomeans=geomeans, tests=len(tested))


def with_intervals(report: ComparisonReport, pairs: Sequence[Pair], indices: Sequence[int]) -> ComparisonReport:
    """The report of ``compare(pairs, intervals_for=())`` with the ratio intervals of these rows filled in, as
    the full comparison would have them: a row's interval depends only on its own pair and the parameters."""
    if not indices or not pairs:  # no pairs: a stored report, whose every row has its interval already
        return report
    part = compare([pairs[i] for i in indices], report.params)
    rows = list(report.rows)
    for index, row in zip(indices, part.rows, strict=True):
        rows[index] = replace(rows[index], ratio_low=row.ratio_low, ratio_high=row.ratio_high)
    return replace(report, rows=tuple(rows))


def _with_fractions(row: Comparison, pair: Pair) -> Comparison:
    base = pair.base.fraction if pair.base is not None else None
    head = pair.head.fraction if pair.head is not None else None
    return row if base is None and head is None else replace(row, base_fraction=base, head_fraction=head)


def _tested_row(key: BenchmarkKey, base: SideResult | None, head: SideResult | None, p: float, q: float,
                interval: tuple[float, float] | None, params: CompareParams) -> Comparison:
    assert base is not None and base.estimate is not None and head is not None and head.estimate is not None
    b, h = base.estimate.median, head.estimate.median
    ratio = h / b if b > 0 else None
    low, high = interval if interval is not None else (None, None)
    significant = q < params.alpha and h != b
    # From a zero median any change is infinitely large relative to it.
    large = ratio is None or abs(ratio - 1) >= params.min_effect
    verdict: Verdict = "unchanged"
    if significant and large:
        worse = (h > b) == (key.direction == "lower_is_better")
        verdict = "regression" if worse else "improvement"
    return Comparison(key, verdict, base, head, ratio=ratio, ratio_low=low, ratio_high=high, p_value=p,
                      q_value=q, below_min_effect=significant and not large)


def _geomean_interval(members: Sequence[_Replicates], params: CompareParams) -> tuple[float, float]:
    """The percentile interval of the mean of the members' independent log-ratio replicates. From
    ``GEOMEAN_NORMAL_MIN`` members on, that mean is normal to well within the Monte Carlo error of the
    percentiles (a mean of that many independent, bounded terms), and its exact mean and variance come from
    the members' draws without making a single replicate; below, the replicates are averaged as they are."""
    if len(members) < GEOMEAN_NORMAL_MIN:
        return _percentiles(np.mean([m.values(params) for m in members], axis=0), params.confidence)
    mean = float(np.mean([m.mean for m in members]))
    spread = math.sqrt(sum(m.variance for m in members)) / len(members)
    from scipy import stats

    z = float(stats.norm.ppf(0.5 + params.confidence / 2))
    return math.exp(mean - z * spread), math.exp(mean + z * spread)


def _geomeans(rows: Sequence[Comparison], replicates: dict[int, _Replicates],
              params: CompareParams) -> tuple[Geomean, ...]:
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
        base_geo = math.exp(float(np.mean([math.log(_median(rows[i].base)) for i in members])))
        head_geo = math.exp(float(np.mean([math.log(_median(rows[i].head)) for i in members])))
        low = high = None
        if all(i in replicates for i in members):
            low, high = _geomean_interval([replicates[i] for i in members], params)
        out.append(Geomean(environment, metric, unit, len(members), base_geo, head_geo, head_geo / base_geo,
                           low, high))
    return tuple(out)


def _median(side: SideResult | None) -> float:
    assert side is not None and side.estimate is not None
    return side.estimate.median
