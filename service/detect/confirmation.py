"""Confirmation and bisection decisions: pure functions the bisect pipeline asks before each run it schedules.

Confirmation (as Chromium's Pinpoint does it): a change point found on the history is re-measured by running the
base and head commits interleaved on the same machine, one round (a run of each, ABBA) at a time, until the runs
decide or a cap of rounds is reached; an undecided change at the cap is not confirmed.

The run (one benchmark process) is the unit of replication (service/detect/run_stats.py): on a shared host the
median moves 20-100 % from one process to the next while the samples inside one agree to a few percent, so the
samples of a round are not independent evidence. A Mann-Whitney test of every sample pooled called one run a
side "p=3.4e-06" (15 samples against 15, fully separated), a certainty the next two processes do not keep. Each
run is therefore reduced to the log of its median, and the sides are compared with
:func:`service.detect.run_stats.log_ratio_test`: Welch's t-test with two runs a side or more, the series' stored
history (:class:`RunNoise`) bounding each side's spread; a first round of one run a side waits for the next, since
one run cannot tell the host's slow runs from a change. Where the history's runs agree about as closely as their
samples allow (a quiet runner), the samples' spread, and the history's spread between runs beyond it, are brought
in as run_stats's note says, from the first round.

The test is repeated after every round and stops at the first decisive one, which would let a false
confirmation through more often than ``alpha`` (measured on nested data: 1.2-1.5 % at alpha 1 % over five
rounds). A change is only confirmed in the direction the history showed, so one look falsely confirms at most
half its two-sided level, and the looks' levels are chosen to sum to ``2 * alpha`` (Bonferroni, which holds
whatever the looks' correlation): the last look, at the cap, with the most runs, is made at ``alpha``; each look
before it at ``alpha / (max_rounds - 1)``. Spending most of the level where the most runs are (as O'Brien and
Fleming's group-sequential bounds do) keeps the power the cap buys: spread evenly, a 2x change under 30 % noise
between runs was confirmed 57 % of the time rather than 77 %.

Bisection: a change between two measured commits with unmeasured commits between them is narrowed by measuring
the middle one; the history detector then moves the change to whichever side the new point belongs to. When no
commit is left between, the culprit is isolated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from service.detect.run_stats import (
    Method,
    QuietSide,
    RunNoise,
    RunTest,
    history_is_quiet,
    log_ratio_test,
    log_values,
    quiet_side,
    within_spread,
)

Verdict = Literal["confirmed", "refuted", "undecided"]
# A side's runs: each run's samples, or each run's median (a number).
Runs = Sequence[Sequence[float] | float]


@dataclass(frozen=True)
class ConfirmParams:
    # The false-confirmation rate of the whole sequence of looks (two-sided level, as for any test here; only the
    # expected direction confirms, so the rate of false confirmations is at most half of it per look).
    alpha: float = 0.01
    min_effect: float = 0.01  # and the ratio must differ from 1 by at least this much, in the expected direction
    # Interleaved rounds (one run of base and one of head each) before an undecided change counts as not
    # confirmed. Three rounds are three runs a side, Welch's df ~4 (~2 when one side's runs scatter more), too few
    # for a t quantile at these levels: measured on nested data with 20 % noise between runs, a 2x change was
    # confirmed 32 % of the time by a cap of three (50 % where history knew the spread). Six rounds give df ~10:
    # 99 % (five: 93-94 %), and 73 % at 30 % noise (five: 58-61 %); the price is twelve runs of one benchmark for
    # a change that is not there, while a large real one stops in the first rounds.
    max_rounds: int = 6

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1 or self.min_effect < 0 or self.max_rounds < 1:
            raise ValueError(f"invalid confirmation parameters {self}")

    def look_alpha(self, rounds: int) -> float:
        """The two-sided level the test after ``rounds`` rounds is made at (see the module's docstring)."""
        if rounds >= self.max_rounds or self.max_rounds == 1:
            return self.alpha
        return self.alpha / (self.max_rounds - 1)


_METHOD_NAMES: dict[Method, str] = {
    "welch": "Welch's t-test on log run medians",
    "pooled": "exact figures, one run a side",
    "quiet": "t-test on log run medians with their samples' spread (runs as quiet as their samples)",
}


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    ratio: float  # head/base: the ratio of the sides' geometric means of run medians (nan: no ratio)
    base_runs: int
    head_runs: int
    p_value: float | None = None  # None: no test could be made (no spread between runs known, or no ratio)
    low: float = math.nan  # the ratio's interval at ``confidence``, from the test's own t distribution
    high: float = math.nan
    confidence: float = math.nan
    method: Method | None = None
    states: bool = False  # untested because the history shows runs in states of their own (RunNoise.states)

    def describe(self) -> str:
        runs = f"runs={self.base_runs}+{self.head_runs}"
        if self.p_value is None:
            why = ("no ratio (a side without a positive measurement)" if not math.isfinite(self.ratio)
                   else "one run a side, and runs of this series land in states of their own" if self.states
                   else "one run a side: one run cannot tell the host's slow runs from a change")
            shown = f"head/base {self.ratio - 1:+.1%}, " if math.isfinite(self.ratio) else ""
            return f"{self.verdict}: {shown}no test ({why}), {runs}"
        assert self.method is not None
        return (f"{self.verdict}: head/base {self.ratio - 1:+.1%} ({self.confidence:.1%} interval "
                f"{self.low - 1:+.1%} to {self.high - 1:+.1%}), {_METHOD_NAMES[self.method]} p={self.p_value:.2g}, "
                f"{runs}")


def run_centres(runs: Runs) -> list[float]:
    """Each run's median: of its samples, or the number given for it (runs without samples are left out)."""
    out = []
    for run in runs:
        if isinstance(run, (int, float, np.floating)):
            out.append(float(run))
        elif len(run):
            out.append(float(np.median(np.asarray(run, dtype=float))))
    return out


def _quiet(runs: Runs) -> QuietSide | None:
    """A side's runs for the quiet test (their samples' spread and trimmed means); None where a run is given as
    its median alone."""
    sampled = [run for run in runs if not isinstance(run, (int, float, np.floating))]
    if len(sampled) != len(runs):
        return None
    return quiet_side([run for run in sampled if len(run)])


def decide(base: Runs, head: Runs, expect_increase: bool, rounds: int, noise: RunNoise | None = None,
           params: ConfirmParams | None = None) -> Decision:
    """Whether interleaved runs of base and head confirm a change of the expected sign, after ``rounds`` rounds
    landed; ``noise``: the series' stored spread between runs of one commit (only a side of one run uses it)."""
    params = params or ConfirmParams()
    at_cap = rounds >= params.max_rounds
    # Not confirmed at the cap is refuted: the history's change did not show when re-measured side by side.
    waiting: Verdict = "refuted" if at_cap else "undecided"
    base_logs, head_logs = log_values(run_centres(base)), log_values(run_centres(head))
    if base_logs is None or head_logs is None:
        nb, nh = len(run_centres(base)), len(run_centres(head))
        return Decision(waiting, math.nan, nb, nh)
    nb, nh = int(base_logs.size), int(head_logs.size)
    quiet = (_quiet(base), _quiet(head)) if history_is_quiet(noise) else None
    test: RunTest | None = log_ratio_test(base_logs, head_logs, noise, quiet=quiet)
    if test is None:
        return Decision(waiting, math.exp(float(head_logs.mean() - base_logs.mean())), nb, nh,
                        states=noise is not None and noise.states)
    level = params.look_alpha(rounds)
    low, high = test.interval(1 - level)
    ratio = math.exp(test.diff)
    # A difference within the spread runs of one commit have shown is not a change a few runs can tell from a
    # side that landed in a slow state (run_stats' note, "Few runs a side"): the next rounds decide.
    significant = (test.p_value < level and not low <= 1 <= high
                   and not within_spread(test, nb, nh, noise))
    right_way = ratio > 1 if expect_increase else ratio < 1
    if significant and right_way and abs(ratio - 1) >= params.min_effect:
        verdict: Verdict = "confirmed"
    elif significant and not right_way:
        verdict = "refuted"  # a real difference, the other way round: the history misled
    else:
        verdict = waiting
    return Decision(verdict, ratio, nb, nh, test.p_value, low, high, 1 - level, test.method)


def next_to_measure(between: Sequence[str]) -> str | None:
    """The commit to measure next among the unmeasured commits strictly between the last commit of the old level
    and the first of the new one (first-parent order, oldest first); None when the culprit is isolated."""
    if not between:
        return None
    return between[(len(between) - 1) // 2]
