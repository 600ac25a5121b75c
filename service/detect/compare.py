"""Two-point comparison of a suite (a pull request against its merge base, or any two commits), benchstat
style, with the run (one benchmark process) as the unit of replication. PURE: numpy and scipy only, every
parameter passed in.

Per benchmark present on both sides (the statistics are in :mod:`service.detect.run_stats`):

- **Each side's centre**: the geometric mean of its runs' medians (one run: that run's median), with a t
  interval over the runs when there are two or more (or, with one run, from the series' stored noise between
  runs). Samples inside a run agree far better than runs do, so an interval from pooled samples would claim a
  precision the next process does not keep.
- **The ratio head/base of the centres, tested on the log run medians**: Welch's t-test with two or more runs a
  side (each side's variance bounded by the series' stored spread between runs), or the test of runs as quiet as
  their samples. The ratio and its interval come from the same t distribution as the p-value.
- **Benjamini-Hochberg q-values** over every benchmark tested in the one comparison.
- **A verdict**: a change counts only when ``q < alpha``, the interval does not hold 1, and
  ``|ratio - 1| >= min_effect``; the benchmark's direction says whether it is a regression or an improvement.
  Not significant is *unchanged* only when the interval also lies within ``±equivalence``; otherwise the data
  cannot tell no change from a change that matters, and the verdict is *inconclusive*, with the reason (as
  nvbench's AMBIGUOUS, benchstat's ``~``). A side of one run is inconclusive too, on a host whose runs vary:
  one run a side is not evidence of a change in time (exact figures and runs as quiet as their samples are
  tested; run_stats says why).

Per group of like benchmarks (environment, metric, unit): the geometric mean of the ratios, its interval from the
rows' standard errors (t with the smallest of the rows' degrees of freedom: conservative). Those bounds carry
measurement noise only; they say nothing about how representative the suite is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

from kernelwatch.vocabulary import Polarity
from service.detect.run_stats import (
    OWN_SPREAD_RUNS,
    Method,
    RunNoise,
    RunTest,
    bounded_exp,
    history_is_quiet,
    log_ratio_test,
    log_values,
    quiet_side,
    run_medians,
    side_variance,
    split_runs,
    t_quantile,
    t_quantiles,
    with_p_values,
    within_spread,
)

# kernelwatch.vocabulary.ComparisonVerdict's values, as a Literal for the checker (tests/unit/test_vocabulary.py).
Verdict = Literal["regression", "improvement", "unchanged", "inconclusive", "failed", "new", "missing"]
VERDICTS: tuple[Verdict, ...] = ("regression", "improvement", "unchanged", "inconclusive", "failed", "new",
                                 "missing")

# Why a verdict is inconclusive; one text per cause, so that a table can footnote each cause once.
WIDE_INTERVAL = "not significant, but the ratio's interval reaches past the equivalence margin: more runs would decide"
NO_SPREAD = "one run a side and no stored spread between runs of this series: more runs (--rounds) would decide"
IN_STATES = ("a side of one run, and runs of this series land in states of their own (two of one commit far "
             "apart): one run cannot tell a state from a change; more runs (--rounds) would decide")
ONE_RUN = ("a side of one run, and runs of this series vary: one run cannot tell the host's slow runs from a "
           "change; more runs (--rounds) would decide")
NO_RATIO = "a zero or negative value: no ratio to test"
IN_SPREAD = ("significant, but no farther than two runs of the same code have landed apart in this series: with "
             f"fewer than {OWN_SPREAD_RUNS} runs a side, every run of one side can share a slow state; more runs "
             "(--rounds) would decide")
# Past this many runs a side the estimate of the runs needed says only "more": a host that noisy needs another
# remedy (--xla-single-thread, --cpu-affinity, a quieter runner), not more rounds.
MAX_RUNS_NEEDED = 1000


@dataclass(frozen=True)
class BenchmarkKey:
    suite: str
    name: str
    params: tuple[tuple[str, str], ...] = ()
    metric: str = "wall_time"
    unit: str = "s"
    direction: Polarity = Polarity.LOWER_IS_BETTER  # the metric's polarity (the compare JSON's "direction")
    environment: str = ""  # both sides ran here: only like is compared with like
    # The version of the benchmark's code (runners/suite.py): an edited benchmark is another benchmark.
    benchmark_version: str = ""

    @property
    def label(self) -> str:
        params = " ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.suite}/{self.name}" + (f" {params}" if params else "")


@dataclass(frozen=True)
class Side:
    """One side's measurement of a benchmark: its samples, run after run, and how many each run holds."""

    samples: tuple[float, ...]
    status: str = "ok"  # ok | failed
    message: str | None = None
    # The achieved fraction of the roofline on this side (the median of its results' stored figures), carried
    # to the row as it is: a figure to show beside the time, not a statistic of this comparison.
    fraction: float | None = None
    run_sizes: tuple[int, ...] = ()  # samples per run, in order; () means one run
    noisy_runs: int = 0  # of its runs, those taken under heavy CPU steal (the host was busy elsewhere)

    @classmethod
    def of_runs(cls, runs: Sequence[Sequence[float]], **fields: object) -> Side:
        """A side from each run's samples."""
        sizes = tuple(len(r) for r in runs)
        return cls(tuple(float(v) for r in runs for v in r), run_sizes=sizes, **fields)  # type: ignore[arg-type]

    @property
    def runs(self) -> int:
        return len(self.run_sizes) if self.run_sizes else (1 if self.samples else 0)

    def run_medians(self) -> list[float]:
        return run_medians(self.samples, self.run_sizes)

    def run_samples(self) -> list[list[float]]:
        """Each run's samples, in order."""
        return split_runs(self.samples, self.run_sizes)


@dataclass(frozen=True)
class Pair:
    key: BenchmarkKey
    base: Side | None  # None: the benchmark was not run on that side
    head: Side | None
    # The series' spread between runs of the same code, from stored history: what a side of one run is
    # compared with (None: none known, and such a side cannot decide).
    noise: RunNoise | None = None


@dataclass(frozen=True)
class CompareParams:
    alpha: float = 0.05
    min_effect: float = 0.01
    confidence: float = 0.95
    # Not significant reads "unchanged" only when the ratio's interval lies within ±equivalence (5 %): a wider
    # interval cannot tell no change from one a kernel engineer would care about.
    equivalence: float = 0.05

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must lie between 0 and 1, not {self.alpha}")
        if not (self.min_effect >= 0 and math.isfinite(self.min_effect)):
            raise ValueError(f"the minimum effect must be a non-negative fraction, not {self.min_effect}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"the confidence level must lie between 0 and 1, not {self.confidence}")
        if not (self.equivalence > 0 and math.isfinite(self.equivalence)):
            raise ValueError(f"the equivalence margin must be a positive fraction, not {self.equivalence}")


@dataclass(frozen=True)
class MedianEstimate:
    """A side's centre: the geometric mean of its runs' medians (the one run's median), over ``n`` samples in
    ``runs`` runs, with its interval when the spread between runs is known."""

    n: int
    median: float
    low: float | None  # None: no spread between runs known (one run, no history)
    high: float | None
    runs: int = 1


@dataclass(frozen=True)
class SideResult:
    status: str
    message: str | None
    estimate: MedianEstimate | None  # None when the side failed
    noisy_runs: int = 0


@dataclass(frozen=True)
class Comparison:
    key: BenchmarkKey
    verdict: Verdict
    base: SideResult | None
    head: SideResult | None
    ratio: float | None = None  # head centre / base centre
    ratio_low: float | None = None
    ratio_high: float | None = None
    p_value: float | None = None
    q_value: float | None = None
    below_min_effect: bool = False  # significant, but smaller than the minimum effect
    base_fraction: float | None = None  # each side's achieved fraction of the roofline (Side.fraction)
    head_fraction: float | None = None
    method: Method | None = None  # the test made (None: none could be)
    df: float | None = None  # its degrees of freedom
    reason: str | None = None  # why an inconclusive verdict is one
    # For an inconclusive verdict that more runs can settle: about how many runs a side would decide it, at the
    # ratio and spread measured (``runs_needed``; MAX_RUNS_NEEDED + 1: more than that); None otherwise.
    runs_needed: int | None = None

    @property
    def noisy_runs(self) -> int:
        """Runs of either side taken under heavy CPU steal: the verdict rests on them."""
        return sum(side.noisy_runs for side in (self.base, self.head) if side is not None)


@dataclass(frozen=True)
class Geomean:
    environment: str
    metric: str
    unit: str
    count: int  # benchmarks in it: those with positive medians on both sides
    base: float
    head: float
    ratio: float
    low: float | None  # None unless every benchmark in it was tested
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


def median_estimate(samples: Sequence[float], confidence: float = 0.95) -> MedianEstimate:
    """The median of one set of samples with its distribution-free interval from order statistics (a series
    point's own spread, shown on its chart): ``[x(k), x(n+1-k)]`` holds the median with probability
    ``1 - 2 P(Binomial(n, 1/2) <= k - 1)``; below 6 samples no pair reaches 95 % and there is no interval."""
    values = np.sort(np.asarray(samples, dtype=float))
    n = values.size
    if n == 0:
        raise ValueError("no samples")
    k = _interval_rank(n, confidence)
    median = float(np.median(values))
    if k is None:
        return MedianEstimate(n, median, None, None)
    return MedianEstimate(n, median, float(values[k - 1]), float(values[n - k]))


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


@dataclass(frozen=True)
class _Measured:
    """A side that worked, reduced to what the statistics need."""

    result: SideResult
    medians: list[float]
    logs: np.ndarray | None  # None when a median is not positive


def _side(side: Side | None, noise: RunNoise | None, confidence: float) -> _Measured | SideResult | None:
    if side is None:
        return None
    if side.status != "ok" or not side.samples:
        status = side.status if side.status != "ok" else "failed"
        return SideResult(status, side.message or "no samples", None, side.noisy_runs)
    medians = side.run_medians()
    logs = log_values(medians)
    if logs is None:  # a zero or negative figure: its centre is the plain median, with no interval
        centre, low, high = float(np.median(medians)), None, None
    else:
        mean = float(logs.mean())
        centre, low, high = bounded_exp(mean), None, None
        # The spread the test gives this side (run_stats.side_variance: the history's a floor under a side of few
        # runs), so that a side's interval and the verdict rest on one estimate: with its own df of 1, a side of
        # two runs read +-1000 % beside a verdict the history's spread had decided.
        if logs.size >= 2:
            variance, df = side_variance(logs, noise)
            sd: float | None = math.sqrt(variance)
        else:
            sd, df = (noise.sd, noise.df) if noise is not None else (None, 0)
        if sd is not None and df >= 1:
            half = t_quantile(0.5 + confidence / 2, df) * sd / math.sqrt(logs.size)
            low, high = bounded_exp(mean - half), bounded_exp(mean + half)
    estimate = MedianEstimate(len(side.samples), centre, low, high, runs=len(medians))
    return _Measured(SideResult("ok", side.message, estimate, side.noisy_runs), medians, logs)


def _test(base: _Measured, head: _Measured, pair: Pair) -> RunTest | None:
    """Welch with the stored spread as a prior, the pooled test for a side of one run, or the test of runs as
    quiet as their samples where the history and both sides are (run_stats says why, and why runs are not paired
    by round)."""
    assert base.logs is not None and head.logs is not None and pair.base is not None and pair.head is not None
    # The sides' samples are read only where the history is quiet: on a host whose runs land apart, never.
    quiet = ((quiet_side(pair.base.run_samples()), quiet_side(pair.head.run_samples()))
             if history_is_quiet(pair.noise) else None)
    return log_ratio_test(base.logs, head.logs, pair.noise, defer_p=True, quiet=quiet)


def _untested_reason(noise: RunNoise | None, base_runs: int, head_runs: int) -> str:
    """Why a comparison of varying figures made no test (a side of one run: run_stats' note)."""
    if noise is not None and noise.states:
        return IN_STATES
    return NO_SPREAD if noise is None and base_runs == head_runs == 1 else ONE_RUN


def _result(side: _Measured | SideResult | None) -> SideResult | None:
    return side.result if isinstance(side, _Measured) else side


def more_runs_would_decide(row: Comparison) -> bool:
    """An inconclusive verdict that further runs of both sides can settle (not one with no ratio to test)."""
    return row.verdict == "inconclusive" and row.reason in (WIDE_INTERVAL, NO_SPREAD, IN_STATES, ONE_RUN, IN_SPREAD)


# How far past the rounds left a row's runs_needed may be and still be measured again (`ci --max-rounds`). The
# estimate rests on the spread of a few runs and moves with the next ones, so a strict cut-off stops rows that
# more rounds would have decided; at twice the budget, measured on the kept verdict sets (bench/README.md,
# "fourteenth"), A/A comparisons used 2.5-3.0 rounds a side of 2->6 instead of 6.0 at a power 0-4 points lower.
RUNS_NEEDED_MARGIN = 2


def worth_more_rounds(row: Comparison, max_rounds: int) -> bool:
    """Whether `ci --max-rounds` should measure an undecided row again: more runs could decide it
    (:func:`more_runs_would_decide`) and its spread between runs does not put that far past ``max_rounds`` runs a
    side (``runs_needed`` at most RUNS_NEEDED_MARGIN x max_rounds; a row with no spread to go by is tried). A row
    that needs "over 1000 runs" costs every round it is given and is not decided by them: a quieter host is its
    remedy."""
    return more_runs_would_decide(row) and (row.runs_needed is None
                                            or row.runs_needed <= RUNS_NEEDED_MARGIN * max_rounds)


def looks_alpha(alpha: float, looks: int) -> float:
    """The level of each of ``looks`` tests of one comparison that grows between them (`ci --max-rounds`: more
    rounds while a benchmark is undecided). Testing again until significant raises the chance of a false verdict
    with every look; Bonferroni over the looks keeps it within ``alpha`` whatever the data, at some cost in power
    (bench/verdict_calibration.py measures both)."""
    if looks < 1:
        raise ValueError(f"at least one look, not {looks}")
    return alpha / looks


# Rounds a commit each further look adds (`ci --max-rounds`): two, so that each commit goes first once more and
# the ABBA balance holds (the last step may be one, when the rounds left are fewer).
ROUNDS_PER_LOOK = 2


def adaptive_looks(rounds: int, max_rounds: int) -> int:
    """How many times a comparison that starts with ``rounds`` a commit and grows by ROUNDS_PER_LOOK while a
    benchmark is undecided, up to ``max_rounds``, may be tested: the ``looks`` of looks_alpha."""
    if rounds < 1 or max_rounds < rounds:
        raise ValueError(f"rounds from {rounds} to {max_rounds}: give 1 <= rounds <= max_rounds")
    return 1 + -(-(max_rounds - rounds) // ROUNDS_PER_LOOK)


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


def compare(pairs: Sequence[Pair], params: CompareParams | None = None) -> ComparisonReport:
    """Compare every pair; rows come back in the order given."""
    params = params or CompareParams()
    keys = [pair.key for pair in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a benchmark appears twice in one comparison")
    for pair in pairs:
        if pair.base is None and pair.head is None:
            raise ValueError(f"{pair.key.label}: neither side has it")
    sides = [(_side(pair.base, pair.noise, params.confidence), _side(pair.head, pair.noise, params.confidence))
             for pair in pairs]
    tests: dict[int, RunTest] = {}
    reasons: dict[int, str] = {}
    for index, (pair, (base, head)) in enumerate(zip(pairs, sides, strict=True)):
        if not (isinstance(base, _Measured) and isinstance(head, _Measured)):
            continue
        if base.logs is None or head.logs is None:
            if base.medians != head.medians:
                reasons[index] = NO_RATIO
            continue
        test = _test(base, head, pair)
        if test is None and len(set(base.medians) | set(head.medians)) > 1:
            # One value each, the same exact figure on both sides, is no change.
            reasons[index] = _untested_reason(pair.noise, base.logs.size, head.logs.size)
        elif test is not None:
            tests[index] = test
    tested = sorted(tests)
    tests = dict(zip(tested, with_p_values([tests[i] for i in tested]), strict=True))
    quantiles = dict(zip(tested, t_quantiles(0.5 + params.confidence / 2, [tests[i].df for i in tested]),
                         strict=True))
    q_by_index = dict(zip(tested, benjamini_hochberg([tests[i].p_value for i in tested]), strict=True))
    rows: list[Comparison] = []
    for index, (pair, (base, head)) in enumerate(zip(pairs, sides, strict=True)):
        b, h = _result(base), _result(head)
        absent = _absent_verdict(b, h)
        if absent is not None:
            rows.append(Comparison(pair.key, absent, b, h))
        else:
            assert isinstance(base, _Measured) and isinstance(head, _Measured)
            rows.append(_tested_row(pair.key, base, head, tests.get(index), q_by_index.get(index),
                                    quantiles.get(index), reasons.get(index), pair.noise, params))
    rows = [_with_fractions(row, pair) for row, pair in zip(rows, pairs, strict=True)]
    return ComparisonReport(params=params, rows=tuple(rows), geomeans=_geomeans(rows, tests, params),
                            tests=len(tested))


def _with_fractions(row: Comparison, pair: Pair) -> Comparison:
    base = pair.base.fraction if pair.base is not None else None
    head = pair.head.fraction if pair.head is not None else None
    return row if base is None and head is None else replace(row, base_fraction=base, head_fraction=head)


def _tested_row(key: BenchmarkKey, base: _Measured, head: _Measured, test: RunTest | None, q: float | None,
                quantile: float | None, reason: str | None, noise: RunNoise | None,
                params: CompareParams) -> Comparison:
    b, h = _median(base.result), _median(head.result)
    ratio = h / b if b > 0 else None
    if test is None:
        # Untested: equal exact figures are unchanged; anything else cannot be decided.
        verdict: Verdict = "unchanged" if reason is None else "inconclusive"
        return Comparison(key, verdict, base.result, head.result, ratio=ratio, reason=reason)
    assert q is not None
    low, high = test.interval(params.confidence, quantile)
    ratio = bounded_exp(test.diff)
    significant = q < params.alpha and not low <= 1.0 <= high and test.diff != 0
    large = abs(ratio - 1) >= params.min_effect
    verdict, why = "unchanged", None
    runs = len(base.medians), len(head.medians)
    needed: int | None = None
    if significant and large and within_spread(test, *runs, noise):
        # run_stats' note, "Few runs a side": at OWN_SPREAD_RUNS a side the band no longer applies.
        verdict, why, needed = "inconclusive", IN_SPREAD, OWN_SPREAD_RUNS
    elif significant and large:
        worse = (ratio > 1) == (key.direction == Polarity.LOWER_IS_BETTER)
        verdict = "regression" if worse else "improvement"
    elif not significant and (low < 1 / (1 + params.equivalence) or high > 1 + params.equivalence):
        verdict = "inconclusive"
        why = WIDE_INTERVAL
        needed = runs_needed(test, *runs, params)
    return Comparison(key, verdict, base.result, head.result, ratio=ratio, ratio_low=low, ratio_high=high,
                      p_value=test.p_value, q_value=q, below_min_effect=significant and not large,
                      method=test.method, df=test.df, reason=why, runs_needed=needed)


def runs_needed(test: RunTest, base_runs: int, head_runs: int, params: CompareParams) -> int | None:
    """About how many runs a side (the same on both; more than either has) would decide a comparison whose ratio
    and spread between runs stay as this test measured them: the fewest at which the ratio's interval lies
    within ±equivalence (unchanged) or clear of 1 (a change), whichever comes first; ``MAX_RUNS_NEEDED`` + 1
    past that, None with no spread to go by.

    A planning figure in the spirit of Kalibera and Jones's repetition counts, not a promise: the next runs
    move both the ratio and the spread, and the Benjamini-Hochberg correction over a suite is left out. The
    interval's half-width at n runs a side is t(2n - 2) x s x sqrt(2 / n), s being one run's spread as the
    test saw it (its standard error over sqrt(1 / base_runs + 1 / head_runs)); it decides once that is below
    the larger of the distance to the margin and the distance to no change, which is never below half the
    margin, so the answer is always finite."""
    if test.se <= 0:
        return None
    spread2 = test.se ** 2 / (1 / base_runs + 1 / head_runs)
    target = max(math.log1p(params.equivalence) - abs(test.diff), abs(test.diff))
    q = 0.5 + params.confidence / 2
    z = t_quantile(q, 1e9)
    # The normal quantile gives a lower bound (t's is larger); from there, up until the t interval is narrow
    # enough. At least one run more than either side has: these runs did not decide it.
    n = max(base_runs + 1, head_runs + 1, math.ceil(2 * z * z * spread2 / target ** 2))
    while n <= MAX_RUNS_NEEDED:
        if t_quantile(q, 2 * n - 2) * math.sqrt(2 * spread2 / n) < target:
            return n
        n += max(1, n // 20)  # within 5 %: an estimate, not a schedule
    return MAX_RUNS_NEEDED + 1


def _geomeans(rows: Sequence[Comparison], tests: dict[int, RunTest], params: CompareParams) -> tuple[Geomean, ...]:
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
        base_log = float(np.mean([math.log(_median(rows[i].base)) for i in members]))
        head_log = float(np.mean([math.log(_median(rows[i].head)) for i in members]))
        base_geo, head_geo = math.exp(base_log), math.exp(head_log)
        low = high = None
        if all(i in tests for i in members):
            found = [tests[i] for i in members]
            mean = float(np.mean([t.diff for t in found]))
            se = math.sqrt(sum(t.se ** 2 for t in found)) / len(found)
            half = t_quantile(0.5 + params.confidence / 2, min(t.df for t in found)) * se
            low, high = bounded_exp(mean - half), bounded_exp(mean + half)
        out.append(Geomean(environment, metric, unit, len(members), base_geo, head_geo,
                           bounded_exp(head_log - base_log), low, high))
    return tuple(out)


def _median(side: SideResult | None) -> float:
    assert side is not None and side.estimate is not None
    return side.estimate.median
