"""First-cut step detector: robust binary segmentation of per-commit medians on a log scale.

Why these choices:
- Log scale, because performance changes are multiplicative: a 2x slowdown is the same step at 1 ms and 1 s.
- Medians everywhere (of samples per commit, of levels per segment), so one slow commit or one noisy sample
  cannot create or hide a step.
- Noise is the series' own: the robust spread of commit-to-commit differences, which a single real step
  barely moves. A step counts only above max(min_effect, k x noise) and with enough commits on each side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from service.detect.types import ChangePoint, Direction, SeriesPoint

_MAD_TO_SIGMA = 1.4826
# The standard error of a median of n normal values is about sqrt(pi/2) * sigma / sqrt(n).
_MEDIAN_SE = math.sqrt(math.pi / 2)


@dataclass(frozen=True)
class StepParams:
    min_effect: float = 0.05  # relative change below which nothing is flagged, however quiet the series
    k_noise: float = 4.0  # the level change must exceed this many commit-to-commit noise sigmas
    z_min: float = 5.0  # and the difference of segment medians this many of its standard errors
    min_side: int = 2  # commits needed on each side of a step before it is reported
    noise_floor: float = 0.005  # log-scale noise never assumed below 0.5 %


def robust_noise(levels: np.ndarray, floor: float) -> float:
    """Sigma of one commit's level, from the median absolute commit-to-commit difference."""
    if levels.size < 3:
        return floor
    diffs = np.abs(np.diff(levels))
    # A difference of two independent values has sqrt(2) times the spread of one.
    return max(floor, _MAD_TO_SIGMA * float(np.median(diffs)) / math.sqrt(2))


def _l1_cost(values: np.ndarray) -> float:
    return float(np.abs(values - np.median(values)).sum()) if values.size else 0.0


def _candidate_splits(levels: np.ndarray, lo: int, hi: int, min_side: int) -> list[tuple[int, float]]:
    """Where levels[lo:hi] most likely changes: (index, delta of segment medians), best first.

    Two candidates: the split that most reduces the absolute deviation from segment medians (locates a single
    step well and is not pulled by one outlying commit), and the split with the largest size-weighted median
    difference (still sees a step that later steps back, where every L1 split of the bump costs the same).
    """
    splits = []
    for k in range(lo + min_side, hi - min_side + 1):
        delta = float(np.median(levels[k:hi]) - np.median(levels[lo:k]))
        cost = _l1_cost(levels[lo:k]) + _l1_cost(levels[k:hi])
        weight = math.sqrt((k - lo) * (hi - k) / (hi - lo))
        splits.append((k, delta, cost, abs(delta) * weight))
    if not splits:
        return []
    by_cost = min(splits, key=lambda s: (s[2], -abs(s[1])))
    by_weighted_delta = max(splits, key=lambda s: s[3])
    candidates = [by_cost] + ([by_weighted_delta] if by_weighted_delta[0] != by_cost[0] else [])
    return [(k, delta) for k, delta, _, _ in candidates]


def _sits_at_edge(levels: np.ndarray, lo: int, k: int, hi: int) -> bool:
    """The commits either side of a split belong to their own sides: the split is not off by one or more."""
    before, after = float(np.median(levels[lo:k])), float(np.median(levels[k:hi]))
    first_after, last_before = levels[k], levels[k - 1]
    return abs(first_after - after) <= abs(first_after - before) and abs(last_before - before) <= abs(
        last_before - after
    )


def find_steps(levels: Sequence[float], params: StepParams) -> list[int]:
    """Indices where a new level starts, by recursive splitting of the log-levels."""
    y = np.asarray(levels, dtype=float)
    sigma = robust_noise(y, params.noise_floor)
    found: list[int] = []
    stack = [(0, y.size)]
    while stack:
        lo, hi = stack.pop()
        for k, delta in _candidate_splits(y, lo, hi, params.min_side):
            standard_error = _MEDIAN_SE * sigma * math.sqrt(1 / (k - lo) + 1 / (hi - k))
            big_enough = abs(math.expm1(delta)) >= params.min_effect and abs(delta) >= params.k_noise * sigma
            if big_enough and abs(delta) / standard_error >= params.z_min and _sits_at_edge(y, lo, k, hi):
                found.append(k)
                stack.append((lo, k))
                stack.append((k, hi))
                break
    return sorted(found)


class StepDetector:
    """Flags the commits where a series' per-commit median steps beyond its own noise."""

    name = "median-steps"
    version = 1

    def __init__(self, params: StepParams | None = None) -> None:
        self.params = params or StepParams()

    def detect(self, points: Sequence[SeriesPoint], direction: Direction) -> list[ChangePoint]:
        usable = [p for p in sorted(points, key=lambda p: p.position) if len(p.samples) > 0]
        medians = [float(np.median(np.asarray(p.samples, dtype=float))) for p in usable]
        if any(m <= 0 for m in medians):
            return []  # a zero time is a broken measurement, not a level: refuse to reason about it
        levels = np.log(np.asarray(medians))
        sigma = robust_noise(levels, self.params.noise_floor)
        steps = find_steps(levels, self.params)
        bounds = [0, *steps, len(usable)]
        changes = []
        for i, k in enumerate(steps):
            before = math.exp(float(np.median(levels[bounds[i] : k])))
            after = math.exp(float(np.median(levels[k : bounds[i + 2]])))
            worse = after > before if direction == "lower_is_better" else after < before
            changes.append(
                ChangePoint(
                    index=k,
                    commit_id=usable[k].commit_id,
                    previous_commit_id=usable[k - 1].commit_id,
                    before=before,
                    after=after,
                    magnitude=after / before - 1,
                    noise_units=abs(math.log(after / before)) / sigma,
                    kind="regression" if worse else "improvement",
                )
            )
        return changes
