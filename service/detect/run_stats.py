"""Run-level statistics: the benchmark process (a run) is the unit of replication. PURE: numpy and scipy only.

On a shared host the same code's median moves 20-100 % from one benchmark process to the next, while the
samples inside one process agree to a few percent. A test that pools every sample of a side as if independent
measures the processes, not the code: on the demo's own history it flagged 15 of 34 unchanged comparisons.
Kalibera and Jones ("Rigorous Benchmarking in Reasonable Time", ISMM 2013) give the remedy: replicate at the
level that varies most (here the process), summarise the levels below it, and test across replicates.

So each run is summarised by the log of its median (robust inside the run, and a ratio of times is a
difference of logs), and two sides are compared on those values:

- **Both sides with two or more runs**: Welch's t-test on the log run medians, each side's variance bounded
  by the series' stored spread between runs (:class:`RunNoise`): a side of 2-3 runs has that spread as a
  floor under its own, a side of ``OWN_SPREAD_RUNS`` or more has its own moderated by it as in Smyth's
  empirical-Bayes t (limma: the history a prior worth ``PRIOR_DF`` degrees of freedom, added to the side's
  own sum of squares and degrees of freedom). Its interval of the ratio, ``exp(diff ± t se)``, comes from the
  same t distribution as its p-value, so a change called significant has an interval that never holds 1.
- **One run a side** carries no information about the spread between runs, and on a host whose runs vary it is
  not tested: :func:`log_ratio_test` answers None, which the comparison turns into an honest "inconclusive"
  rather than a verdict. Only two kinds of one-run comparison are made: exact figures (counts repeat to the last
  bit on both sides and in the history: any difference is certain), and runs as quiet as their samples (below),
  where the samples say how far a run moves. It was tested before against the spread learned from the history
  (the other side's runs and the history as a prior, a pooled t), and that could not be made to hold: this host's
  runs have a slow tail (one in 8-16 runs 1.1-1.6x slow), one drawn slow run is by construction missing from the
  history it is judged against, and its A/A false verdicts read 2.1, 2.9 and 6.6 % in three measurements (8.3 %
  on one benchmark; bench/verdict_calibration.py, 2026-12-04), the failures no spread or state rule on that
  history could see. Where the history shows runs in states of their own (two runs of one commit
  ``STATE_GAP`` times farther apart than such runs typically are, ``RunNoise.states``) the comparison says so.

- **Not paired by round.** Runs made round by round in one interleaved session (`run --rounds`, `ci`, the
  pull-request task) record their session and round (the manifest's ``round``), and a paired t-test on the
  per-round differences looked stronger: +20 % found in 88 % of draws of 3 rounds against 66 % unpaired. But
  its A/A false verdicts were not stable across calibration runs (bench/verdict_calibration.py: 1.6 % and
  7.2 % at 3 rounds, 2.1 % and 12.2 % at 5), where Welch's stayed at 0-1.5 %: with bimodal processes and an
  order inside each round, rounds that happen to split the same way look like a change. So verdicts use the
  unpaired test; the rounds are recorded for a later, calibrated use.
- **Processes here are bimodal** (a run lands in a fast or a slow state, 1.7x apart for the demo's matmul), so
  three runs a side that happen to share a state have almost no spread of their own, and a plain Welch test
  then reads the two states as a change. Three ways of bringing the history in were measured
  (bench/verdict_calibration.py, the same saved runs judged each way). Pooling the whole history into every
  test lowered the bar with its many degrees of freedom (the demo's A/A check failed twice in two). The
  history's spread as a floor under each side's own keeps A/A near 0 %, but one slow run in the history then
  hid a +20 % change even at 5 runs a side (found in 5-48 % of draws). The moderated variance, the prior
  capped at ``PRIOR_DF``, found that +20 % at 5 runs in 92 % of draws with A/A at 1-3 %, but at 2-3 runs it
  is the floor that holds: there both sides sharing opposite states is common (3-12 % of A/A pairs when the
  states are even) and the moderated test calls it a change (p = 0.01 for three slow against three fast
  under a 1.7x split). Hence the floor below ``OWN_SPREAD_RUNS`` runs a side and the prior from there on.
  A floor that binds under a side of 3 runs brings the prior's degrees of freedom with it (the variance is then
  the history's); under 2 runs it does not (``side_variance`` gives the measurements). From 4 runs the prior
  moderates only a side quieter than the history: a side that shows more spread keeps its own (one slow run
  among five, shrunk toward a quiet history, read as a change).
  The cap also kept the former test of one run a side (below) from trusting a spread learned from many runs
  with a heavy tail (the slow state): 7 % A/A false verdicts as a t with all its degrees of freedom.
- **Few runs a side: the band.** Even with the floor, a side of 2-3 runs is a handful of draws from a host
  whose processes land in a fast or a slow state (this host's demo softmax: a quarter of its runs 1.5x slow,
  runs inside a state 3-5 % apart), and all of one side in one state and all of the other in the other is a draw
  of 1-2 % there: its two sides agree within themselves, differ by the state, and pass the test (the demo's A/A
  check in CI: an unchanged softmax 1.85x "slower", p = 0.005; generated runs of that shape, 1.2-1.4 % of A/A
  comparisons at three runs a side, where the demo makes 32 and must call none). No spread learned from the
  history tells that draw from a change; its size does: where the history's runs vary beyond their samples, a
  difference between sides of fewer than ``OWN_SPREAD_RUNS`` runs that is no larger than the farthest apart two
  runs of one commit have landed (``RunNoise.widest``) is not called (:func:`within_spread`; the comparison
  says "inconclusive, more runs would decide", and at ``OWN_SPREAD_RUNS`` a side the band no longer applies).
  On that generated shape it took A/A from 1.2-1.4 to 0.0-0.1 % at three runs a side (a 2x change found 74 % of
  the time, 82 % without), and on the saved real runs of bench/verdict_calibration.py (2026-12-05) A/A from 0.2
  and 0.5 % (2 runs, adaptive) to 0.0 %, at the cost of +20 % at 2-3 runs a side (17-20 % -> 1-3 %; +50 %
  unchanged at 33-50 %): on a host this noisy, 2-3 runs cannot tell a 20 % change from the host, and saying so
  is the honest answer (`ci` starts at 4 rounds, where the band does not apply).
- **Runs as quiet as their samples.** On a quiet host (a dedicated runner, a GPU) runs agree as closely as the
  samples inside them allow, and a test over 2-3 run medians throws away what the samples know: on generated
  runs with no spread between them it found +5 % at 2 runs a side in 25 % of draws where pooled samples found
  100 % (bench/verdict_calibration.py --generate 0). So where the series' history (``QUIET_HISTORY_DF``
  degrees of freedom or more) shows no more spread between runs than its samples can explain at
  ``QUIET_HISTORY_ALPHA`` (the variance of a run's median from its samples alone, :func:`sample_spread`), the
  samples are brought in. A run is then summarised by the ``TRIM``-trimmed mean of its log samples rather than
  its median, with Yuen's winsorized variance as its spread from the samples: 94 % of a mean's efficiency on
  normal samples where a median has 64 %, and robust to the odd slow sample. Its variance is the nested design's
  two components (Searle, Casella and McCulloch, "Variance Components"): the samples' share, each side's samples
  pooled with the history's (known to hundreds of degrees of freedom), plus the spread between runs, which is what
  the history's runs' trimmed means show beyond that share (:class:`TrimmedSpread`; by the method of moments,
  none where that is negative, and counted at the uncertainty of the history's figure even then), pooled with
  the runs' own spread. The history's degrees of freedom count once for both sides. Each side must show no
  more spread than the history's at ``QUIET_SIDE_ALPHA``, its runs' trimmed means against the history's runs' and
  its samples against the history's samples at ``QUIET_SAMPLES_ALPHA`` (a host gone noisy since the history;
  a side of one run shows it there alone). Sides of 1-3 runs: from ``OWN_SPREAD_RUNS`` runs the moderated test
  has the degrees of freedom already, and at 5 runs a side the samples cost 1.2 points of A/A on runs 0.01
  apart (2026-12-04).
  History of this design, each step measured on generated runs (bench/verdict_calibration.py --generate, the
  same seeds before and after; bench/README.md). Until 2026-12-05 the history had to pass Bancroft's preliminary
  test at 0.25 and the spread between runs was then taken as none: a quarter of quiet histories turned away by
  design, what it let through assumed away. Its replacement (2026-12-05, evening) estimated the spread between
  runs from run medians (their variance less a median's from its samples), with each side's samples read alone
  (5 degrees of freedom a run): +5 % at 1 and 2 runs a side found in 77 and 88 % of draws. Reading the spread
  from the history's trimmed means, the samples pooled with the history's and the sides checked at 0.01
  (2026-12-06) took that to 83 and 95 % (90 and 97 % with the whole history as the service reads it, where
  pooled samples find 89 and 100 %), A/A unchanged at 2.9-3.3 % where runs agree and 3.2-4.4 % at 0.01 apart
  (the worst case). Tried and not kept: the history's trimmed means alone with all their degrees of freedom (an
  exact t: 88 % found but A/A at 4.9-5.6 %, no margin at alpha), and a floor at the samples' share with the
  history's degrees of freedom (81 %). Hosts whose runs land apart (the CPU hosts measured here: runs 5-27 %
  apart, samples 2-9 %) fail the history's test and keep the tests
  above.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

Method = Literal["welch", "pooled", "quiet"]

# How many degrees of freedom the series' stored spread counts for at most in one test: as much as six runs of a
# side's own. More let a quiet stretch of history lower the bar for every later comparison (the demo's A/A
# check failed with the whole history's); none left three runs that share a process state claiming no spread.
PRIOR_DF = 5
# From how many runs a side's own spread is trusted to show the process states: with 2-3 runs, all of one side in
# one state and all of the other in the other happens in 3-12 % of A/A pairs when the states are even, and no
# spread of their own gives that away; with 4 it is under 1 %.
OWN_SPREAD_RUNS = 4
# From how many runs a side whose spread the stored one floors counts the stored spread's degrees of freedom.
FLOOR_DF_RUNS = 3
# Runs as quiet as their samples (the module's note). The fewest samples a run needs for its median's spread to be
# read from them; the history's degrees of freedom between runs that can tell a quiet host from a noisy one; and
# the preliminary tests' levels. The history's: beyond it the runs clearly vary beyond their samples (a noisy
# host: the run-level tests and the band of :func:`within_spread`); strict, so that a quiet host's history rarely
# fails it by chance (at 0.05 the band alone cost +5 % at 2-3 runs a side 2-3 points of power on generated quiet
# runs), and short of it the spread between runs it does show is estimated, not assumed away. Each side's runs at
# 0.01 against the history's: they only have to catch a host gone noisy since the history (at 0.05 a tenth of quiet
# draws at 2-3 runs a side lost the samples: +5 % at 2 runs found in 89 % of generated draws, at 0.01 in 97 %, A/A
# at runs 0.01 apart 3.0-3.7 against 3.4-4.2 %). Its samples at 0.001: a winsorized variance of 5 degrees of
# freedom has a long upper tail, and at 0.01 it cost +5 % at one run a side 4 points of power on generated runs.
QUIET_MIN_SAMPLES = 5
QUIET_HISTORY_DF = 6
QUIET_HISTORY_ALPHA = 0.01
QUIET_SIDE_ALPHA = 0.01
QUIET_SAMPLES_ALPHA = 0.001
# A run's samples' scale is read from their pairwise differences (Shamos's estimator: the median |x_i - x_j| of
# normal data is 0.9539 sd, with 86 % of the sample sd's efficiency, and it needs no centre: deviations from a run's
# own median of 10 samples read 11 % low, 54 % at 5). A median of n samples varies by pi/2 sd^2 / n asymptotically
# (normal theory; :func:`_median_variance` has its value at small n, which this bounds from above). At most
# ``_PAIRS_SAMPLES`` samples of a run, evenly spaced in time, are paired: the cost stays linear in the run.
_PAIR_MEDIAN_TO_SD = 1 / 0.9539
_PAIR_EFFICIENCY = 0.86
_MEDIAN_VARIANCE = math.pi / 2
_PAIRS_SAMPLES = 32
# The quiet test summarises a run by the mean of its log samples with this share cut from each end: 94 % of a
# mean's efficiency on normal samples where a median has 64 %, and robust to the odd slow sample (Yuen's trimmed
# means, with Wilcox's customary 20 %).
TRIM = 0.2


@dataclass(frozen=True)
class SampleSpread:
    """How far one run's log median moves from its own samples alone (no spread between runs): its variance,
    over the runs it was read from, and the degrees of freedom that variance is known to."""

    median_var: float
    df: float

    def __post_init__(self) -> None:
        if not (self.median_var > 0 and math.isfinite(self.median_var)) or not self.df > 0:
            raise ValueError(f"a sample spread needs a variance > 0 and df > 0, not {self.median_var}, {self.df}")


def sample_spread(runs: Sequence[Sequence[float]]) -> SampleSpread | None:
    """The variance a run's log median has from its samples alone: the samples' scale inside runs (the median of
    every pairwise difference of log samples inside a run, pooled over the runs: robust to the odd slow sample,
    blind to where each run is centred) through the median's normal-theory variance, averaged over the runs'
    sizes. None where it cannot be read: a run of fewer than ``QUIET_MIN_SAMPLES`` samples, a value that is not
    positive, or samples that do not vary (a timer's resolution). Runs of one size are paired in one array
    operation: a comparison reads this for every series of a suite."""
    by_size: dict[int, list[np.ndarray]] = {}
    inverse_sizes, df = [], 0.0
    for run in runs:
        logs = log_values(run) if len(run) >= QUIET_MIN_SAMPLES else None
        if logs is None:
            return None
        if logs.size > _PAIRS_SAMPLES:
            logs = logs[np.linspace(0, logs.size - 1, _PAIRS_SAMPLES).round().astype(int)]
        by_size.setdefault(logs.size, []).append(logs)
        inverse_sizes.append(_median_variance(len(run)))
        df += _PAIR_EFFICIENCY * (logs.size - 1)
    if not by_size:
        return None
    differences = []
    for size, group in by_size.items():
        i, j = _pairs(size)
        stacked = np.vstack(group)
        differences.append(np.abs(stacked[:, i] - stacked[:, j]).ravel())
    scale = _PAIR_MEDIAN_TO_SD * float(np.median(np.concatenate(differences)))
    if scale <= 0:
        return None
    return SampleSpread(scale ** 2 * float(np.mean(inverse_sizes)), df)


def _median_variance(n: int) -> float:
    """The variance of the median of ``n`` normal samples of unit variance: pi / (2 n) asymptotically, less at small
    n and less for even n (their median averages two middle values); within 1.5 % of simulation from 5 samples.
    The history's test reads the runs' spread against this, so it must not err either way: the asymptotic value
    read a 10-sample run's median 14 % wide."""
    return _MEDIAN_VARIANCE * (1 - (0.4 if n % 2 else 1.2) / n) / n


def could_be_quiet(noise: RunNoise, runs: Sequence[Sequence[float]]) -> bool:
    """Whether a history could pass :func:`history_is_quiet` at all, from the runs' ranges alone: a run's median
    varies by at most what its range allows (the pairwise differences' median is never above their largest), so
    where even that bound leaves the runs' spread too large the samples need not be read (every CPU host measured
    here). Cheap: a comparison of thousands of series asks it of each."""
    if noise.df < QUIET_HISTORY_DF or not runs:
        return False
    widest, inverse = 0.0, 0.0
    for run in runs:
        if len(run) < QUIET_MIN_SAMPLES or min(run) <= 0:
            return False
        widest = max(widest, math.log(max(run)) - math.log(min(run)))
        inverse += 1 / len(run)
    bound = _MEDIAN_VARIANCE * (_PAIR_MEDIAN_TO_SD * widest) ** 2 * inverse / len(runs)
    return bound > 0 and _no_more_spread(noise.sd ** 2 * noise.df, noise.df, bound, QUIET_HISTORY_ALPHA)


@lru_cache(maxsize=128)
def _pairs(size: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(size, k=1)
    return i, j


@dataclass(frozen=True)
class RunNoise:
    """A series' spread between runs of the same code, learned from stored history: the pooled standard
    deviation of log run medians around each commit's own mean, and its degrees of freedom (runs minus
    commits)."""

    sd: float
    df: int
    # The spread of the history's samples inside runs, where it can be read: what tells a host whose runs agree as
    # closely as their samples allow (the module's note) from one whose processes land apart.
    samples: SampleSpread | None = None
    # Whether runs of one commit land in states of their own (:func:`pooled_noise`): then one run a side cannot
    # tell a state from a change, and is not tested (``log_ratio_test``).
    states: bool = False
    # The farthest apart two runs of one commit landed (log medians): how far the host alone has moved the same
    # code, the band a comparison of few runs a side must clear (:func:`within_spread`).
    widest: float = 0.0
    # The same runs read as the quiet test reads a side (:class:`TrimmedSpread`): the variance it tests with.
    trimmed: TrimmedSpread | None = None

    def __post_init__(self) -> None:
        if not (self.sd >= 0 and math.isfinite(self.sd)) or self.df < 1:
            raise ValueError(f"a run noise needs a finite sd >= 0 and df >= 1, not {self.sd}, {self.df}")
        if not (self.widest >= 0 and math.isfinite(self.widest)):
            raise ValueError(f"the widest gap between runs must be finite and >= 0, not {self.widest}")


@dataclass(frozen=True)
class RunTest:
    """One comparison of log run medians: ``diff`` is mean(log head) - mean(log base), so exp(diff) is the
    ratio of the sides' geometric means of run medians (method ``quiet``: of the runs' trimmed means, the
    figures that test compared)."""

    diff: float
    se: float
    df: float
    p_value: float
    method: Method

    def interval(self, confidence: float, quantile: float | None = None) -> tuple[float, float]:
        """The ratio's interval at this level, from the test's own t distribution (``quantile``: its
        ``0.5 + confidence / 2`` quantile, when the caller computed many at once)."""
        if self.se == 0:
            return bounded_exp(self.diff), bounded_exp(self.diff)
        half = (quantile if quantile is not None else t_quantile(0.5 + confidence / 2, self.df)) * self.se
        return bounded_exp(self.diff - half), bounded_exp(self.diff + half)


# The largest log a ratio is taken back from: exp of more overflows a float. Stored samples are any finite numbers
# (a manifest of 1e308 seconds passes its schema), and a comparison of them must not fail: its ratio reads ~8e307.
MAX_LOG = 709.0


def bounded_exp(x: float) -> float:
    """exp(x), held below the float's overflow (MAX_LOG)."""
    return math.exp(min(x, MAX_LOG))


def split_runs(samples: Sequence[float], run_sizes: Sequence[int]) -> list[list[float]]:
    """Each run's samples; ``run_sizes``: how many of the samples, in order, each run holds (empty: all of them
    are one run)."""
    values = [float(v) for v in samples]
    if not run_sizes:
        return [values] if values else []
    if sum(run_sizes) != len(values) or min(run_sizes) < 1:
        raise ValueError(f"run sizes {list(run_sizes)} do not split {len(values)} samples")
    out, start = [], 0
    for size in run_sizes:
        out.append(values[start:start + size])
        start += size
    return out


def run_medians(samples: Sequence[float], run_sizes: Sequence[int]) -> list[float]:
    """The median of each run's samples (``split_runs``)."""
    # statistics.median, not numpy's: a run holds tens of samples, where numpy's call overhead is most of the cost
    # (a comparison of 5,000 benchmarks takes 30,000 of these).
    return [statistics.median(run) for run in split_runs(samples, run_sizes)]


def log_values(values: Sequence[float]) -> np.ndarray | None:
    """Logs of positive values; None when any is not positive (a ratio of such values means nothing)."""
    array = np.asarray(values, dtype=float)
    if array.size == 0 or not np.all(array > 0) or not np.all(np.isfinite(array)):
        return None
    return np.log(array)


@lru_cache(maxsize=1024)
def t_quantile(q: float, df: float) -> float:
    from scipy import stats  # here, not at the top: the CLI's other commands never need scipy

    return float(stats.t.ppf(q, df))


def t_quantiles(q: float, dfs: Sequence[float]) -> list[float]:
    """``t_quantile`` of many degrees of freedom in one call (a comparison has thousands)."""
    from scipy import stats

    return [float(v) for v in np.atleast_1d(stats.t.ppf(q, np.asarray(dfs, dtype=float)))] if len(dfs) else []


def _two_sided_p(t: float, df: float) -> float:
    from scipy import stats

    return float(min(1.0, 2 * stats.t.sf(abs(t), df)))


def with_p_values(tests: Sequence[RunTest]) -> list[RunTest]:
    """The tests with their p-values computed in one call (those made with ``p_value`` NaN by ``defer_p``)."""
    from scipy import stats

    if not tests:
        return []
    t = np.array([abs(x.diff) / x.se if x.se > 0 else 0.0 for x in tests])
    p = np.minimum(1.0, 2 * stats.t.sf(t, np.array([x.df for x in tests])))
    return [x if not math.isnan(x.p_value) else
            replace(x, p_value=float(p[i]) if x.se > 0 else (1.0 if x.diff == 0 else 0.0))
            for i, x in enumerate(tests)]


def _ss(logs: np.ndarray) -> float:
    return float(np.sum((logs - logs.mean()) ** 2))


def side_variance(logs: np.ndarray, noise: RunNoise | None) -> tuple[float, float]:
    """One side's variance of log run medians and its degrees of freedom, the history brought in as the module's
    note says: a floor under a side of fewer than ``OWN_SPREAD_RUNS`` runs, a prior of ``PRIOR_DF`` degrees of
    freedom moderating a side of more."""
    own_df = logs.size - 1
    if noise is None:
        return _ss(logs) / own_df, own_df
    if logs.size < OWN_SPREAD_RUNS:
        own, floor = _ss(logs) / own_df, noise.sd ** 2
        if floor < own:
            return own, own_df
        # Where the floor binds the variance is the history's, known to the prior's degrees of freedom rather
        # than to the side's own two: at 3 runs a side that found +50 % in 46-89 % of draws where the own df
        # found 34-88 %, A/A unchanged within 0.6 points (bench/verdict_calibration.py, five measurements). At 2
        # runs only where the history shows no process states (``RunNoise.states``): two runs share a state half
        # the time, and before that rule the same change raised A/A to 3.9 % in one measurement and `ci`'s
        # adaptive rounds, which start at 2, to 6.2 %; with it, +20 % at 2 runs a side was found in 55 % of
        # draws where it was 1 %, A/A 0.0 -> 0.3 % (2026-12-04, late).
        return floor, (max(own_df, min(noise.df, PRIOR_DF))
                       if logs.size >= FLOOR_DF_RUNS or not noise.states else own_df)
    own = _ss(logs) / own_df
    if own > noise.sd ** 2:
        # Moderation only ever raises a side's spread toward the history's, never lowers one the side shows:
        # runs here have a heavy slow tail, and one slow run among five shrunk toward a quiet history read as a
        # change (A/A 5.2 % at 5 runs a side, 8.5 % for one benchmark; with this, 0.3 % and 0.0 %, at the cost of
        # +5-10 % power: bench/verdict_calibration.py, 2026-12-04). Robust limma (Phipson et al. 2016) weighs
        # such outlying variances down the same way.
        return own, own_df
    prior_df = min(noise.df, PRIOR_DF)
    return (_ss(logs) + noise.sd ** 2 * prior_df) / (own_df + prior_df), own_df + prior_df


@lru_cache(maxsize=256)
def _chi2_quantile(q: float, df: float) -> float:
    from scipy import stats

    return float(stats.chi2.ppf(q, df))


@lru_cache(maxsize=256)
def _f_quantile(q: float, df_num: float, df_den: float) -> float:
    from scipy import stats

    return float(stats.f.ppf(q, df_num, df_den))


def _no_more_spread(ss: float, df: float, median_var: float, alpha: float) -> bool:
    """The preliminary test of the module's note: runs whose log medians' sum of squares ``ss`` (``df`` degrees
    of freedom) a chi-square at ``alpha`` does not set apart from their medians' variance from the samples."""
    return ss / median_var <= _chi2_quantile(1 - alpha, df)


def history_is_quiet(noise: RunNoise | None) -> bool:
    """Whether the series' history shows no more spread between runs than its samples can explain, at
    ``QUIET_HISTORY_ALPHA`` (the module's note). Cheap: a caller reads the sides' sample spreads only where this
    holds."""
    return noise is not None and noise.df >= QUIET_HISTORY_DF and _within_samples(noise)


def _within_samples(noise: RunNoise) -> bool:
    """Whether a history's runs show no more spread than its samples can explain at ``QUIET_HISTORY_ALPHA``
    (False where its samples were not read): the one level the quiet test and the band both read."""
    return noise.samples is not None and _no_more_spread(noise.sd ** 2 * noise.df, noise.df,
                                                         noise.samples.median_var, QUIET_HISTORY_ALPHA)


@dataclass(frozen=True)
class QuietSide:
    """A side as the quiet test reads it: each run's ``TRIM``-trimmed mean of log samples (the module's note says
    why not the median), and the variance one such mean has from its run's samples alone (Yuen 1974: a run of n
    samples, g trimmed at each end and h = n - 2g kept, has (n - 1) s_w^2 / (h (h - 1)), s_w^2 being the
    winsorized variance; pooled over the runs, averaged over their sizes), with its degrees of freedom (the
    runs' h - 1)."""

    means: np.ndarray
    # The runs' pooled winsorized sum of squares over their degrees of freedom, before the division by each run's
    # kept samples: what one side's samples are compared with another's by (sizes apart).
    sample_var: float
    mean_df: float
    # The runs' mean of 1 / (samples kept after trimming).
    inverse_kept: float

    def __post_init__(self) -> None:
        if (not (self.sample_var > 0 and math.isfinite(self.sample_var)) or not self.mean_df > 0
                or not self.means.size or not self.inverse_kept > 0):
            raise ValueError(f"a quiet side needs runs, a variance > 0, df > 0 and kept samples, not "
                             f"{self.sample_var}, {self.mean_df}, {self.inverse_kept}")

    @property
    def mean_var(self) -> float:
        """The variance one run's trimmed mean has from its samples alone (Yuen)."""
        return self.sample_var * self.inverse_kept


def quiet_side(runs: Sequence[Sequence[float]]) -> QuietSide | None:
    """A side's runs (each run's samples) for the quiet test, read in one pass: runs of one size are sorted,
    trimmed and winsorized as one array. None where :func:`sample_spread` cannot be read either (a run of fewer
    than ``QUIET_MIN_SAMPLES`` samples, a value that is not positive, samples that do not vary)."""
    if not runs or sample_spread(runs) is None:
        return None
    by_size: dict[int, tuple[list[int], list[np.ndarray]]] = {}
    for position, run in enumerate(runs):
        logs = log_values(run)
        assert logs is not None  # sample_spread read them
        positions, group = by_size.setdefault(logs.size, ([], []))
        positions.append(position)
        group.append(logs)
    means = np.empty(len(runs))
    ss, df, inverse_kept = 0.0, 0.0, []
    for size, (positions, group) in by_size.items():
        stacked = np.sort(np.vstack(group), axis=1)
        g = int(TRIM * size)
        means[positions] = stacked[:, g:size - g].mean(axis=1)
        clipped = np.clip(stacked, stacked[:, [g]], stacked[:, [size - g - 1]])
        ss += float(np.sum((clipped - clipped.mean(axis=1, keepdims=True)) ** 2))
        kept = size - 2 * g
        df += (kept - 1) * len(group)
        inverse_kept += [1 / kept] * len(group)
    if ss <= 0:
        return None
    return QuietSide(means, ss / df, df, float(np.mean(inverse_kept)))


@dataclass(frozen=True)
class TrimmedSpread:
    """A history read as the quiet test reads a side. ``run_var``: how far a run's trimmed mean lands from its
    commit's mean (the spread between runs and the samples' share at once: the variance one run's figure has),
    known to ``run_df``. ``sample_var``: its samples' variance as :class:`QuietSide` reads it, known to
    ``sample_df``, with the runs' ``inverse_kept``: what a side's samples are checked against, and what moves
    ``run_var`` to a side whose runs keep another number of samples."""

    run_var: float
    run_df: int
    sample_var: float
    sample_df: float
    inverse_kept: float

    def __post_init__(self) -> None:
        if not (self.run_var > 0 and math.isfinite(self.run_var)) or self.run_df < 1 or not self.sample_var > 0:
            raise ValueError(f"a trimmed spread needs a variance > 0 and df >= 1, not {self.run_var}, {self.run_df}")

    def run_variance(self, side: QuietSide) -> float:
        """The variance of one of ``side``'s runs' trimmed means as the history shows it: its samples' share moved
        to the side's run size (nothing moves where the sizes are the same, as in one suite); a move to larger runs
        that would leave nothing falls back to the samples' share."""
        moved = self.run_var + self.sample_var * (side.inverse_kept - self.inverse_kept)
        return moved if moved > 0 else self.sample_var * side.inverse_kept


def trimmed_spread(commits: Sequence[Sequence[Sequence[float]]]) -> TrimmedSpread | None:
    """A history's :class:`TrimmedSpread` from each commit's runs' samples (commits of one run add nothing);
    None where a run cannot be read as :func:`quiet_side` reads one, or no commit has two runs."""
    ss, df, sample_ss, sample_df, inverse = 0.0, 0, 0.0, 0.0, []
    for runs in commits:
        if len(runs) < 2:
            continue
        side = quiet_side(runs)
        if side is None:
            return None
        ss += _ss(side.means)
        df += side.means.size - 1
        sample_ss += side.sample_var * side.mean_df
        sample_df += side.mean_df
        inverse += [side.inverse_kept] * side.means.size
    if df == 0 or ss <= 0:
        return None
    return TrimmedSpread(ss / df, df, sample_ss / sample_df, sample_df, float(np.mean(inverse)))


def with_samples(noise: RunNoise, commits: Sequence[Sequence[Sequence[float]]]) -> RunNoise:
    """``noise`` with its history's samples read (:func:`sample_spread`, :func:`trimmed_spread`), from the same
    runs' samples, per commit: what the quiet test needs."""
    flat = [run for runs in commits for run in runs]
    return replace(noise, samples=sample_spread(flat), trimmed=trimmed_spread(commits))


def runs_are_quiet(noise: RunNoise | None, sides: Sequence[QuietSide | None]) -> bool:
    """Whether the history (:func:`history_is_quiet`, its runs read as trimmed means too) and every side show no
    more spread than the history's: a side's samples against the history's at ``QUIET_SAMPLES_ALPHA`` (a side of
    one run has no other spread to show), and a side's runs' trimmed means against the history's runs' variance
    (:meth:`TrimmedSpread.run_variance`) at ``QUIET_SIDE_ALPHA``. Either failing is a host gone noisy since the
    history."""
    if not history_is_quiet(noise):
        return False
    assert noise is not None
    history = noise.trimmed
    if history is None:
        return False
    for side in sides:
        if side is None:
            return False
        wider = side.sample_var / history.sample_var
        if wider > _f_quantile(1 - QUIET_SAMPLES_ALPHA, side.mean_df, history.sample_df):
            return False
        k = side.means.size
        if k >= 2 and (_ss(side.means) / (k - 1) / history.run_variance(side)
                       > _f_quantile(1 - QUIET_SIDE_ALPHA, k - 1, history.run_df)):
            return False
    return True


def _quiet_test(base: QuietSide, head: QuietSide, history: TrimmedSpread) -> tuple[float, float]:
    """The standard error and degrees of freedom of a comparison of quiet runs. One run's trimmed mean varies by
    its samples' share (each side's samples pooled with the history's: known to many degrees of freedom) plus the
    spread between runs, estimated as what the history's runs show beyond that share (the method of moments, none
    where that is negative) and counted at its uncertainty (2 v^2 / df of the history's figure) even where it is
    none: on a quiet host the estimate is nothing half the time by chance, and neither the history's figure alone
    with its degrees of freedom (A/A at alpha, no margin) nor floored at the share with them (+5 % at one run a side
    found in 81 % of generated draws against 85 %) did as well. That per-run variance is pooled with each side's own
    runs, Welch-Satterthwaite between the sides."""
    parts, known_dfs = [], []
    for side in (base, head):
        k = side.means.size
        share_df = side.mean_df + history.sample_df
        share = ((side.sample_var * side.mean_df + history.sample_var * history.sample_df) / share_df
                 * side.inverse_kept)
        run_var = history.run_variance(side)
        known = max(run_var, share)
        known_df = known ** 2 / (share ** 2 / share_df + run_var ** 2 / history.run_df)
        known_dfs.append(known_df)
        df = k - 1 + known_df
        parts.append(((_ss(side.means) + known * known_df) / df / k, df))
    (vb, dfb), (vh, dfh) = parts
    se2 = vb + vh
    # One history stands behind both sides: what it knows counts once.
    cap = max(known_dfs) + base.means.size - 1 + head.means.size - 1
    return math.sqrt(se2), min(se2 ** 2 / (vb ** 2 / dfb + vh ** 2 / dfh), cap)


def log_ratio_test(base: np.ndarray, head: np.ndarray, noise: RunNoise | None = None,
                   defer_p: bool = False,
                   quiet: tuple[QuietSide | None, QuietSide | None] | None = None) -> RunTest | None:
    """Compare two sides' log run medians; None where a side of one run cannot be tested (the module's note: runs
    that vary, not quiet ones). Identical values on both sides are no change (p = 1); a difference with no spread
    at all is a certain one (p = 0: counts and other exact figures repeat to the last bit). ``defer_p``: leave the
    p-value NaN, for ``with_p_values`` to compute many at once. ``quiet``: each side's :func:`quiet_side`, where the
    caller has the samples; with them runs as quiet as their samples are tested as such (the module's note), on
    their trimmed means."""
    kb, kh = base.size, head.size
    if kb == 0 or kh == 0:
        raise ValueError("a side without runs cannot be compared")
    if quiet is not None and max(kb, kh) < OWN_SPREAD_RUNS and runs_are_quiet(noise, quiet):
        quiet_base, quiet_head = quiet
        assert quiet_base is not None and quiet_head is not None
        assert noise is not None and noise.trimmed is not None
        se, df = _quiet_test(quiet_base, quiet_head, noise.trimmed)
        diff = float(quiet_head.means.mean() - quiet_base.means.mean())
        return RunTest(diff, se, df, math.nan if defer_p else _two_sided_p(diff / se, df), "quiet")
    diff = float(head.mean() - base.mean())
    if min(kb, kh) == 1:
        # A side of one run has no spread of its own, and on a host whose runs vary no spread learned elsewhere
        # speaks for it (the module's note, "One run a side"): tested only where every figure repeats exactly
        # (counts: a difference is then certain), or above, where its samples speak for it (runs as quiet as
        # their samples).
        prior_df = min(noise.df, PRIOR_DF) if noise is not None else 0
        ss = _ss(base) + _ss(head) + (noise.sd ** 2 * prior_df if noise is not None else 0.0)
        df = float(kb - 1 + kh - 1 + prior_df)
        if df < 1 or ss > 0:
            return None
        return RunTest(diff, 0.0, df, 1.0 if diff == 0 else 0.0, "pooled")
    (vb, dfb), (vh, dfh) = side_variance(base, noise), side_variance(head, noise)
    vb, vh = vb / kb, vh / kh
    se2 = vb + vh
    if se2 == 0:
        # No spread at all: exact figures (the p-value is 0 or 1; any df will do).
        return RunTest(diff, 0.0, float(dfb + dfh), 1.0 if diff == 0 else 0.0, "welch")
    df = se2 ** 2 / (vb ** 2 / dfb + vh ** 2 / dfh)  # Welch-Satterthwaite
    se = math.sqrt(se2)
    return RunTest(diff, se, df, math.nan if defer_p else _two_sided_p(diff / se, df), "welch")


def within_spread(test: RunTest, base_runs: int, head_runs: int, noise: RunNoise | None) -> bool:
    """Whether a difference between sides of few runs is no larger than the farthest apart two runs of one commit
    have landed in the series' history (``RunNoise.widest``): then a verdict cannot rest on it, however small its
    p-value (the module's note, "Few runs a side"). Only where the history's runs clearly vary beyond what
    their samples explain (their spread unread, as on every CPU host measured here, or larger at
    ``QUIET_HISTORY_ALPHA``): runs that differ by about what their samples explain land apart by chance, as the
    test's own variance says, not in states (on generated quiet runs a band everywhere cost +5 % at 2-3 runs a
    side 6-8 points of power)."""
    if noise is None or test.method != "welch" or min(base_runs, head_runs) >= OWN_SPREAD_RUNS:
        return False
    return not _within_samples(noise) and abs(test.diff) <= noise.widest


def pooled_noise(groups: Sequence[Sequence[float]]) -> RunNoise | None:
    """The spread between runs of the same code from groups of log run medians (each group: one commit's runs
    in one environment); None when no group has two runs. Their samples are read by :func:`with_samples`."""
    ss, df, gaps = 0.0, 0, []
    for group in groups:
        if len(group) >= 2:
            values = np.asarray(group, dtype=float)
            ss += _ss(values)
            df += values.size - 1
            i, j = np.triu_indices(values.size, k=1)
            gaps.append(np.abs(values[i] - values[j]))
    if df == 0:
        return None
    every_gap = np.concatenate(gaps)
    return RunNoise(math.sqrt(ss / df), df, None, _has_states(every_gap), float(every_gap.max()))


# Runs in states of their own: two runs of one commit farther apart than STATE_GAP times the median such distance
# (for normal spread the largest of 50 such distances is about 4.3 times their median; this host's slow runs,
# 1.2-1.4x, are 10-20 times it), read from at least STATE_PAIRS pairs.
STATE_GAP = 8.0
STATE_PAIRS = 6


def _has_states(gaps: np.ndarray) -> bool:
    """Whether the distances between runs of one commit (log medians) show runs in states of their own."""
    if gaps.size < STATE_PAIRS:
        return False
    typical = float(np.median(gaps))
    return bool(gaps.max() > STATE_GAP * typical) if typical > 0 else bool(gaps.max() > 0)


@dataclass(frozen=True)
class RunOrigin:
    """Where a run was made: its environment, and the interleaved session it was a round of (None: a run made on
    its own, which shares its host's minute with no other)."""

    environment: int
    session: str | None


@dataclass(frozen=True)
class CoMeasured:
    """The runs of each side that a comparison keeps, and how many of each side's it left out."""

    base: tuple[int, ...]
    head: tuple[int, ...]
    left_out: tuple[int, int]


def co_measured(base: Mapping[int, RunOrigin], head: Mapping[int, RunOrigin], min_runs: int = 2) -> CoMeasured:
    """Each side's runs made in sessions the other side was measured in too, where that leaves every common
    environment at least ``min_runs`` runs a side; otherwise every run.

    The host's state drifts over minutes (on the shared VM this was written on the same code's runs land up to 3x
    apart, and a stretch of minutes lands mostly fast or mostly slow), so runs of one side made at another time
    than any run of the other carry the time as well as the code. A confirmation session adds rounds of a commit
    and its parent only: compared with the commit after it, whose runs were all made in the demo's rounds, those
    extra runs called an unchanged softmax 1.75x faster (p = 0.006, the demo's A/A check in CI). Runs interleaved
    in one session (``run --rounds``, ``ci``, the demo, a confirmation) share the host's minutes, so a
    comparison of those alone tests the code (Kalibera and Jones's randomised, interleaved design)."""
    shared = ({o.session for o in base.values() if o.session is not None}
              & {o.session for o in head.values() if o.session is not None})
    everything = CoMeasured(tuple(sorted(base)), tuple(sorted(head)), (0, 0))
    if not shared:
        return everything
    kept_base = {r for r, o in base.items() if o.session in shared}
    kept_head = {r for r, o in head.items() if o.session in shared}
    for environment in {o.environment for o in base.values()} & {o.environment for o in head.values()}:
        for kept, side in ((kept_base, base), (kept_head, head)):
            if sum(1 for r in kept if side[r].environment == environment) < min_runs:
                return everything
    return CoMeasured(tuple(sorted(kept_base)), tuple(sorted(kept_head)),
                      (len(base) - len(kept_base), len(head) - len(kept_head)))


# Sides measured apart are compared run by run only where the history shows that a commit's sessions land no
# farther apart than their runs explain (:func:`sessions_add_spread`), and it takes this many degrees of freedom at
# each level to tell. The test's level is high on purpose: "the sessions add nothing" is the bold conclusion (it
# gives the runs back as replicates), so a history has to fail to show a session effect at 0.25, not at 0.05.
SESSIONS_ALPHA = 0.25
SESSIONS_MIN_DF = 4


def sessions_add_spread(commits: Sequence[Sequence[Sequence[float]]]) -> bool:
    """Whether sessions of one commit land farther apart than their runs explain, from a history of commits, each
    its sessions, each its runs' log medians: the one-way nested analysis of variance (Searle, Casella and
    McCulloch), the mean square between sessions of a commit over the mean square between runs of a session, an F
    test at ``SESSIONS_ALPHA``. True (compare sessions) also where the history cannot tell: fewer than
    ``SESSIONS_MIN_DF`` degrees of freedom between sessions or between runs.

    On the runs of bench/apart_verdicts.py (this host, 2026-12-06) the runs of one session varied as much as the
    sessions did, and comparing sessions cost +50 % at two sessions a side most of its power (90 -> 39 %) for
    nothing; on the host of the +11 % read, two runs of one session agreed within 1 % while its sessions landed
    232-471 us, and comparing runs called an unchanged commit a regression."""
    ss_runs = ss_sessions = 0.0
    df_runs = df_sessions = 0
    for sessions in commits:
        means, sizes = [], []
        for runs in sessions:
            if not runs:
                continue
            mean = sum(runs) / len(runs)
            ss_runs += sum((x - mean) ** 2 for x in runs)
            df_runs += len(runs) - 1
            means.append(mean)
            sizes.append(len(runs))
        if len(means) >= 2:
            grand = sum(k * m for k, m in zip(sizes, means, strict=True)) / sum(sizes)
            ss_sessions += sum(k * (m - grand) ** 2 for k, m in zip(sizes, means, strict=True))
            df_sessions += len(means) - 1
    if df_sessions < SESSIONS_MIN_DF or df_runs < SESSIONS_MIN_DF:
        return True
    if ss_runs == 0:
        return ss_sessions > 0
    ratio = (ss_sessions / df_sessions) / (ss_runs / df_runs)
    return ratio > _f_quantile(1 - SESSIONS_ALPHA, df_sessions, df_runs)


def session_units(base: Mapping[int, RunOrigin], head: Mapping[int, RunOrigin]) -> dict[int, str] | None:
    """Where two sides were measured apart (a run of either side made in no session that holds runs of the other):
    each run's unit of replication, the session it was a round of (a run of no session is one of its own). None
    where every run shares a session with the other side: the runs themselves are the units there.

    Why: the runs of one session are made back to back and share the host's minutes, so across sessions they are
    not independent replicates of the code. A range run (`run --commits A..B --rounds 2`) makes each commit a
    session of its own: two runs of a docstring-only commit landed 274 and 271 us, the next commit's 305 and 300,
    and tested as four runs that +11 % was called a regression (p = 0.010); the same commits measured in other
    sessions landed anywhere in 232-471 us. Kalibera and Jones's rule, replicate at the level that varies most,
    is the session there: a side's runs of one session are one replicate (their samples taken together), and the
    spread they are judged against is the spread between sessions of one commit (service/store/run_noise.py),
    unless the history shows the sessions adding nothing to the runs' own spread (:func:`sessions_add_spread`)."""
    shared = ({o.session for o in base.values() if o.session is not None}
              & {o.session for o in head.values() if o.session is not None})
    origins = {**base, **head}
    if all(o.session in shared for o in origins.values()):
        return None
    return {run: o.session if o.session is not None else f"run {run}" for run, o in origins.items()}

