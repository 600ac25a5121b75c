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
_PAIR_SEARCH_LIMIT = 64


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


def _sides_agree(levels: np.ndarray, lo: int, k: int, hi: int, share: float = 0.75) -> bool:
    """Most commits of each side sit nearer their own level than the other's, the two at the edge included.

    This keeps a split from being off by one, and keeps one outlying commit in a short segment (whose median
    it drags halfway) from passing for a new level.
    """
    before, after = float(np.median(levels[lo:k])), float(np.median(levels[k:hi]))
    near_before = np.abs(levels - before) <= np.abs(levels - after)
    if not near_before[k - 1] or near_before[k]:
        return False
    return bool(near_before[lo:k].mean() >= share and (~near_before[k:hi]).mean() >= share)


def _best_pair(levels: np.ndarray, lo: int, hi: int, min_side: int) -> tuple[int, int] | None:
    """The two splits (i, j) that best cut levels[lo:hi] into three levels, for a step that later steps back.

    Quadratic in the segment's length, so only short segments are searched; the full engine replaces this.
    """
    # A level that comes and goes must last twice as long as a lasting step needs on a side: shorter
    # excursions are what a few outlying commits look like.
    middle = 2 * min_side
    if hi - lo > _PAIR_SEARCH_LIMIT or hi - lo < 2 * min_side + middle:
        return None
    best: tuple[float, int, int] | None = None
    for i in range(lo + min_side, hi - min_side - middle + 1):
        head = _l1_cost(levels[lo:i])
        for j in range(i + middle, hi - min_side + 1):
            cost = head + _l1_cost(levels[i:j]) + _l1_cost(levels[j:hi])
            if best is None or cost < best[0]:
                best = (cost, i, j)
    return None if best is None else (best[1], best[2])


def _passes(levels: np.ndarray, lo: int, k: int, hi: int, sigma: float, params: StepParams) -> bool:
    delta = float(np.median(levels[k:hi]) - np.median(levels[lo:k]))
    standard_error = _MEDIAN_SE * sigma * math.sqrt(1 / (k - lo) + 1 / (hi - k))
    big_enough = abs(math.expm1(delta)) >= params.min_effect and abs(delta) >= params.k_noise * sigma
    return big_enough and abs(delta) / standard_error >= params.z_min and _sides_agree(levels, lo, k, hi)


def find_steps(levels: Sequence[float], params: StepParams) -> list[tuple[int, float]]:
    """(index where a new level starts, noise sigma it was judged against), by recursive splitting.

    Each segment is judged against its own noise (or the series', if larger): a quiet stretch after a change
    must not make the noisy stretch before it look full of steps.
    """
    y = np.asarray(levels, dtype=float)
    overall = robust_noise(y, params.noise_floor)
    found: list[tuple[int, float]] = []
    stack = [(0, y.size)]
    while stack:
        lo, hi = stack.pop()
        # Never below the whole series' noise: a few quiet commits are weak evidence of a quiet stretch.
        sigma = max(overall, robust_noise(y[lo:hi], params.noise_floor))
        split = next((k for k, _ in _candidate_splits(y, lo, hi, params.min_side)
                      if _passes(y, lo, k, hi, sigma, params)), None)
        if split is None:
            # No single split explains the segment; a step that steps back again needs two.
            pair = _best_pair(y, lo, hi, params.min_side)
            if pair is not None and _passes(y, lo, pair[0], pair[1], sigma, params):
                split = pair[0]
        if split is not None:
            found.append((split, sigma))
            stack.append((lo, split))
            stack.append((split, hi))
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
        found = find_steps(levels, self.params)
        bounds = [0, *(k for k, _ in found), len(usable)]
        changes = []
        for i, (k, sigma) in enumerate(found):
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
