"""Confirmation and bisection decisions: pure functions the bisect pipeline asks before each run it schedules.

Confirmation (as Chromium's Pinpoint does it): a change point found on the history is re-measured by running the
base and head commits interleaved on the same machine, then the raw samples of the two sides are tested
(Mann-Whitney U, which needs no normality and does not care about one slow sample). Rounds are added until the
test decides or a cap is reached; an undecided change at the cap is not confirmed.

Bisection: a change between two measured commits with unmeasured commits between them is narrowed by measuring
the middle one; the history detector then moves the change to whichever side the new point belongs to. When no
commit is left between, the culprit is isolated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Verdict = Literal["confirmed", "refuted", "undecided"]


@dataclass(frozen=True)
class ConfirmParams:
    alpha: float = 0.01  # the samples must differ at this level (two-sided Mann-Whitney U)
    min_effect: float = 0.01  # and the medians by at least this much, in the direction the history showed
    max_rounds: int = 3  # interleaved base/head rounds before an undecided change counts as not confirmed
    # With this many samples a side and a p-value above this, more samples would not decide: stop early.
    settle_samples: int = 30
    settle_p: float = 0.5


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    p_value: float
    ratio: float  # median(head) / median(base)
    base_n: int
    head_n: int

    def describe(self) -> str:
        return (f"{self.verdict}: head/base {self.ratio - 1:+.1%}, Mann-Whitney p={self.p_value:.2g}, "
                f"n={self.base_n}+{self.head_n}")


def decide(base: Sequence[float], head: Sequence[float], expect_increase: bool, rounds: int,
           params: ConfirmParams | None = None) -> Decision:
    """Whether interleaved samples of base and head confirm a change of the expected sign, after ``rounds``."""
    params = params or ConfirmParams()
    b, h = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if b.size < 2 or h.size < 2:
        return Decision("undecided" if rounds < params.max_rounds else "refuted", 1.0, float("nan"), b.size, h.size)
    from scipy import stats  # here, not at the top: half a second every process importing the pipeline pays

    p = float(stats.mannwhitneyu(h, b, alternative="two-sided").pvalue)
    ratio = float(np.median(h) / np.median(b))
    right_way = ratio > 1 if expect_increase else ratio < 1
    if p < params.alpha and abs(ratio - 1) >= params.min_effect and right_way:
        verdict: Verdict = "confirmed"
    elif p < params.alpha and not right_way:
        verdict = "refuted"  # a real difference, the other way round: the history misled
    elif rounds >= params.max_rounds or (min(b.size, h.size) >= params.settle_samples and p > params.settle_p):
        verdict = "refuted"
    else:
        verdict = "undecided"
    return Decision(verdict, p, ratio, int(b.size), int(h.size))


def next_to_measure(between: Sequence[str]) -> str | None:
    """The commit to measure next among the unmeasured commits strictly between the last commit of the old level
    and the first of the new one (first-parent order, oldest first); None when the culprit is isolated."""
    if not between:
        return None
    return between[(len(between) - 1) // 2]
