"""Run-level statistics: the benchmark process (a run) is the unit of replication. PURE: numpy and scipy only.

On a shared host the same code's median moves 20-100 % from one benchmark process to the next, while the
samples inside one process agree to a few percent. A test that pools every sample of a side as if independent
measures the processes, not the code: on the demo's own history it flagged 15 of 34 unchanged comparisons.
Kalibera and Jones ("Rigorous Benchmarking in Reasonable Time", ISMM 2013) give the remedy: replicate at the
level that varies most (here the process), summarise the levels below it, and test across replicates.

So each run is summarised by the log of its median (robust inside the run, and a ratio of times is a
difference of logs), and two sides are compared on those values:

- **Both sides with two or more runs**: Welch's t-test on the log run medians. Its interval of the ratio,
  ``exp(diff ± t se)``, comes from the same t distribution as its p-value, so a change called significant has
  an interval that never holds 1.
- **A side with one run**: one run carries no information about the spread between runs, so the spread must
  come from elsewhere: the other side's runs and the series' own history (runs of the same commit in the same
  environment, :class:`RunNoise`), pooled under an equal-variance model (the pooled t-test). Where no such
  spread is known the test is not made at all: :func:`log_ratio_test` answers None, which the comparison turns
  into an honest "inconclusive" rather than a verdict.

- **Not paired by round.** Runs made round by round in one interleaved session (`run --rounds`, `ci`, the
  pull-request task) record their session and round (the manifest's ``round``), and a paired t-test on the
  per-round differences looked stronger: +20 % found in 88 % of draws of 3 rounds against 66 % unpaired. But
  its A/A false verdicts were not stable across calibration runs (bench/verdict_calibration.py: 1.6 % and
  7.2 % at 3 rounds, 2.1 % and 12.2 % at 5), where Welch's stayed at 0-1.5 %: with bimodal processes and an
  order inside each round, rounds that happen to split the same way look like a change. So verdicts use the
  unpaired test; the rounds are recorded for a later, calibrated use.
- **Processes here are bimodal** (a run lands in a fast or a slow state, 1.7x apart for the demo's matmul), so
  three runs a side that happen to share a state have almost no spread of their own, and any t-test then reads
  the two states as a change. Pooling the series' stored spread into every test made that worse, not better
  (its larger degrees of freedom lowered the bar: the demo's A/A check failed twice in two), so the history's
  spread enters Welch's test as a floor under each side's own variance, its degrees of freedom unchanged: three
  runs that share a state can no longer claim a spread the series has never shown. A side of one run, which
  has no spread of its own, is tested with the pooled spread. More rounds remain the cure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

Method = Literal["welch", "pooled"]


@dataclass(frozen=True)
class RunNoise:
    """A series' spread between runs of the same code, learned from stored history: the pooled standard
    deviation of log run medians around each commit's own mean, and its degrees of freedom (runs minus
    commits)."""

    sd: float
    df: int

    def __post_init__(self) -> None:
        if not (self.sd >= 0 and math.isfinite(self.sd)) or self.df < 1:
            raise ValueError(f"a run noise needs a finite sd >= 0 and df >= 1, not {self.sd}, {self.df}")


@dataclass(frozen=True)
class RunTest:
    """One comparison of log run medians: ``diff`` is mean(log head) - mean(log base), so exp(diff) is the
    ratio of the sides' geometric means of run medians."""

    diff: float
    se: float
    df: float
    p_value: float
    method: Method

    def interval(self, confidence: float, quantile: float | None = None) -> tuple[float, float]:
        """The ratio's interval at this level, from the test's own t distribution (``quantile``: its
        ``0.5 + confidence / 2`` quantile, when the caller computed many at once)."""
        if self.se == 0:
            return math.exp(self.diff), math.exp(self.diff)
        half = (quantile if quantile is not None else t_quantile(0.5 + confidence / 2, self.df)) * self.se
        return math.exp(self.diff - half), math.exp(self.diff + half)


def run_medians(samples: Sequence[float], run_sizes: Sequence[int]) -> list[float]:
    """The median of each run's samples; ``run_sizes``: how many of the samples, in order, each run holds
    (empty: all of them are one run)."""
    # statistics.median, not numpy's: a run holds tens of samples, where numpy's call overhead is most of the cost
    # (a comparison of 5,000 benchmarks takes 30,000 of these).
    values = [float(v) for v in samples]
    if not run_sizes:
        return [statistics.median(values)] if values else []
    if sum(run_sizes) != len(values) or min(run_sizes) < 1:
        raise ValueError(f"run sizes {list(run_sizes)} do not split {len(values)} samples")
    out, start = [], 0
    for size in run_sizes:
        out.append(statistics.median(values[start:start + size]))
        start += size
    return out


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


def log_ratio_test(base: np.ndarray, head: np.ndarray, noise: RunNoise | None = None,
                   defer_p: bool = False) -> RunTest | None:
    """Compare two sides' log run medians; None when no spread between runs is known (one run a side and no
    history). Identical values on both sides are no change (p = 1); a difference with no spread at all is a
    certain one (p = 0: counts and other exact figures repeat to the last bit). ``defer_p``: leave the p-value
    NaN, for ``with_p_values`` to compute many at once."""
    kb, kh = base.size, head.size
    if kb == 0 or kh == 0:
        raise ValueError("a side without runs cannot be compared")
    diff = float(head.mean() - base.mean())
    if kb >= 2 and kh >= 2:
        # The series' stored spread is a floor under each side's own (not pooled into it: see the module's note
        # on bimodal processes), and the degrees of freedom stay the sides' own.
        floor = noise.sd ** 2 if noise is not None else 0.0
        vb, vh = max(float(base.var(ddof=1)), floor) / kb, max(float(head.var(ddof=1)), floor) / kh
        se2 = vb + vh
        # Welch-Satterthwaite; with both variances zero any df will do (the p-value is 0 or 1 then).
        df = se2 ** 2 / (vb ** 2 / (kb - 1) + vh ** 2 / (kh - 1)) if se2 > 0 else float(kb + kh - 2)
        method: Method = "welch"
    else:
        ss = _ss(base) + _ss(head)
        df = float(kb - 1 + kh - 1)
        if noise is not None:
            ss += noise.sd ** 2 * noise.df
            df += noise.df
        if df < 1:
            return None
        se2 = ss / df * (1 / kb + 1 / kh)
        method = "pooled"
    se = math.sqrt(se2)
    if se == 0:
        return RunTest(diff, 0.0, df, 1.0 if diff == 0 else 0.0, method)
    return RunTest(diff, se, df, math.nan if defer_p else _two_sided_p(diff / se, df), method)


def pooled_noise(groups: Sequence[Sequence[float]]) -> RunNoise | None:
    """The spread between runs of the same code from groups of log run medians (each group: one commit's runs
    in one environment); None when no group has two runs."""
    ss, df = 0.0, 0
    for group in groups:
        if len(group) >= 2:
            values = np.asarray(group, dtype=float)
            ss += _ss(values)
            df += values.size - 1
    if df == 0:
        return None
    return RunNoise(math.sqrt(ss / df), df)
