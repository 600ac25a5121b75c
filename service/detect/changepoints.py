"""Change points in series of per-commit values: the engine behind every time and numerics finding.

One pass, for one series or ten thousand:

1. Log scale: performance changes multiply.
2. Hampel damping of isolated outlying commits (a slow machine, a noisy neighbour), judged against the
   window's own noise.
3. Binary segmentation inside a window of commits: E-divisive means places the best split of a segment, a
   Bonferroni-corrected t-test decides it (``edivisive``), and the split must also move the level by at
   least max(min_effect, k_noise x the series' own noise) with ``min_side`` commits on each side. Segments are
   split again until nothing passes; then every change is re-tested between its final neighbours and the weak
   ones are dropped, as E-divisive's authors advise.
4. Long series are read in overlapping windows anchored at the last accepted change, so the cost is linear in
   the length and a change is always judged against the level just before it, not one from a year ago.

``detect_many`` runs step 3 for all series at once on the first window and keeps on in bulk for as long as a
series shows nothing; only series with a change continue one by one. Its answers equal ``detect_levels`` row by
row (a test checks it).

Incremental use: each window is judged on its own values only, so a window read in full never changes its answer;
``analyse(longer, resume=earlier)`` re-reads only from the last window's start and equals a full analysis.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from service.detect.edivisive import energy_split, split_test
from service.detect.robust import hampel, robust_noise


@dataclass(frozen=True)
class ChangePointParams:
    alpha: float = 0.005  # the largest Bonferroni-corrected p-value a change may have
    min_effect: float = 0.01  # relative change below which nothing is flagged, however quiet the series
    k_noise: float = 1.5  # ...and the level must move by this many sigmas of the series' commit noise
    min_side: int = 3  # commits on each side of a change before it is reported
    window: int = 100  # commits examined together; longer series are read in overlapping windows
    hampel_half_window: int = 3
    hampel_k: float = 3.5
    noise_floor: float = 0.001  # log-scale noise is never assumed below 0.1 %: timers and caches are not exact
    chunk: int = 512  # series per vectorised block (memory: chunk x window^2 floats)

    @property
    def margin(self) -> int:
        """Commits at the end of a full window whose changes wait for the next window, which sees past them."""
        return self.window // 4


@dataclass(frozen=True)
class Change:
    index: int  # first commit of the new level
    before: float  # level (median, in the values' unit) between the previous change and this one
    after: float  # level from this change to the next
    magnitude: float  # after / before - 1
    p_value: float  # Bonferroni-corrected t-test between the neighbouring segments
    noise_units: float  # |log(after / before)| in sigmas of the series' commit noise


@dataclass(frozen=True)
class _Prepared:
    y: np.ndarray  # log values, (B, n)
    ok: np.ndarray  # rows usable at all (every value finite and > 0)


def _prepare(values: np.ndarray) -> _Prepared:
    values = np.atleast_2d(np.asarray(values, dtype=float))
    ok = np.all(np.isfinite(values) & (values > 0), axis=1)
    return _Prepared(np.log(np.where(ok[:, None], values, 1.0)), ok)


def _damped_window(y: np.ndarray, params: ChangePointParams) -> tuple[np.ndarray, np.ndarray]:
    """Rows of one window, damped, and their noise. Both depend on the window's own values only, so a window
    read in full gives the same answer however many commits come after it."""
    sigma = robust_noise(y, params.noise_floor)
    return hampel(y, params.hampel_half_window, params.hampel_k, sigma), sigma


def _min_shift(sigma: float, params: ChangePointParams) -> float:
    return max(math.log1p(params.min_effect), params.k_noise * sigma)


def _test_split(y: np.ndarray, k: int, sigma: float, candidates: int, params: ChangePointParams) -> float | None:
    """p-value of splitting ``y`` at ``k`` if the split is big and significant enough, else None."""
    delta, p = split_test(y[None, :], np.array([k]), np.array([sigma]), np.array([float(candidates)]))
    if abs(float(delta[0])) >= _min_shift(sigma, params) and float(p[0]) <= params.alpha:
        return float(p[0])
    return None


def _candidates(length: int, min_side: int) -> int:
    return max(1, length - 2 * min_side + 1)


def _segment_window(y: np.ndarray, sigma: float, params: ChangePointParams, first: int | None = None) -> list[int]:
    """Change indices in one window ``y`` by binary segmentation, then pruning between final neighbours.

    ``first``: the split of the whole window, when the caller has already placed it and seen it pass (the bulk
    path tests every series' first split at once)."""
    side = params.min_side
    found: list[int] = []
    stack = [(0, y.size)]
    while stack:
        lo, hi = stack.pop()
        if hi - lo < 2 * side:
            continue
        if first is not None and (lo, hi) == (0, y.size):
            found.append(first)
            stack += [(lo, first), (first, hi)]
            continue
        k, _ = energy_split(y[None, lo:hi], side)
        split = lo + int(k[0])
        if _test_split(y[lo:hi], split - lo, sigma, _candidates(hi - lo, side), params) is not None:
            found.append(split)
            stack += [(lo, split), (split, hi)]
    found.sort()
    while True:  # drop the weakest change that no longer stands between its neighbours, until all stand
        bounds = [0, *found, y.size]
        weak = [(i, c) for i, c in enumerate(found)
                if _test_split(y[bounds[i] : bounds[i + 2]], c - bounds[i], sigma,
                               _candidates(bounds[i + 2] - bounds[i], side), params) is None]
        if not weak:
            return found
        found.remove(weak[0][1])


def _window_end(start: int, n: int, params: ChangePointParams) -> int:
    return min(n, start + params.window)


def _next_start(start: int, end: int, accepted: list[int], params: ChangePointParams) -> int:
    # Re-read from the last change (so the next one is judged against the level after it), or else half a window
    # back, so that a change near this window's end has plenty of commits before it in the next.
    return accepted[-1] if accepted else max(start + 1, end - 2 * params.margin)


def _walk_row(y: np.ndarray, start: int, params: ChangePointParams) -> tuple[list[int], int]:
    """All change indices of one series of log values at or after ``start``, reading windows from ``start`` on;
    and where the last window started (the changes before it are final)."""
    n = y.size
    found: list[int] = []
    while True:
        end = _window_end(start, n, params)
        damped, sigma = _damped_window(y[None, start:end], params)
        changes = [start + c for c in _segment_window(damped[0], float(sigma[0]), params)]
        if end == n:
            return found + changes, start
        accepted = [c for c in changes if c <= end - params.margin]
        found += accepted
        start = _next_start(start, end, accepted, params)


def _describe(y: np.ndarray, indices: list[int], params: ChangePointParams) -> list[Change]:
    """Levels, magnitudes and p-values of the final changes, each against its neighbouring segments (which may
    span windows: these figures describe a change, they did not decide it)."""
    raw = y
    y = hampel(y[None, :], params.hampel_half_window, params.hampel_k, robust_noise(y, params.noise_floor))[0]
    bounds = [0, *indices, y.size]
    out = []
    for i, c in enumerate(indices):
        lo, hi = bounds[i], bounds[i + 2]
        window_lo = max(lo, c - params.window)
        sigma = float(robust_noise(y[None, window_lo : min(hi, c + params.window)], params.noise_floor)[0])
        _, p = split_test(y[None, lo:hi], np.array([c - lo]), np.array([sigma]),
                          np.array([float(_candidates(hi - lo, params.min_side))]))
        before = math.exp(float(np.median(raw[lo:c])))
        after = math.exp(float(np.median(raw[c:hi])))
        out.append(Change(index=c, before=before, after=after, magnitude=after / before - 1,
                          p_value=float(p[0]), noise_units=abs(math.log(after / before)) / sigma))
    return out


@dataclass(frozen=True)
class Analysis:
    changes: list[Change]
    resume_at: int  # changes up to this index are final; a longer series need only be re-read from here


def analyse(levels: Sequence[float] | np.ndarray, params: ChangePointParams | None = None,
            resume: Analysis | None = None) -> Analysis:
    """The changes of one series of per-commit values (all > 0), in order.

    ``resume``: the analysis of an earlier, shorter prefix of the same series. Only its tail is read again and the
    answer is the same as a full analysis: every window read before ``resume.resume_at`` was read in full.
    """
    params = params or ChangePointParams()
    values = np.asarray(levels, dtype=float)
    if values.ndim != 1:
        raise ValueError("analyse takes one series; use detect_many for several")
    prepared = _prepare(values)
    if values.size < 2 * params.min_side or not prepared.ok[0]:
        return Analysis([], 0)
    y = prepared.y[0]
    start = resume.resume_at if resume is not None else 0
    kept = [c.index for c in resume.changes if c.index <= start] if resume is not None else []
    indices, resume_at = _walk_row(y, start, params)
    return Analysis(_describe(y, kept + indices, params), resume_at)


def detect_levels(levels: Sequence[float] | np.ndarray, params: ChangePointParams | None = None) -> list[Change]:
    """The changes of one series of per-commit values (all > 0), in order."""
    return analyse(levels, params).changes


def detect_many(matrix: np.ndarray, params: ChangePointParams | None = None) -> list[list[Change]]:
    """``detect_levels`` for every row of ``matrix`` (n_series, n_commits), vectorised where series are quiet."""
    params = params or ChangePointParams()
    values = np.atleast_2d(np.asarray(matrix, dtype=float))
    out: list[list[Change]] = [[] for _ in range(values.shape[0])]
    if values.shape[1] < 2 * params.min_side:
        return out
    for first in range(0, values.shape[0], params.chunk):
        block = values[first : first + params.chunk]
        prepared = _prepare(block)
        for row, indices in _bulk_walk(prepared, params).items():
            out[first + row] = _describe(prepared.y[row], indices, params)
    return out


def _bulk_walk(prepared: _Prepared, params: ChangePointParams) -> dict[int, list[int]]:
    """Change indices per usable row, all rows read window by window together.

    Each row has its own window start (windows re-anchor at a row's changes); the windows of one length, from
    whatever start, are one batch for the first split and its test. Only a window whose first split passes is
    segmented further, alone. The steps are those of ``_walk_row``, so the answers are the same.
    """
    y, n, side = prepared.y, prepared.y.shape[1], params.min_side
    starts = {int(r): 0 for r in np.flatnonzero(prepared.ok)}
    found: dict[int, list[int]] = {r: [] for r in starts}
    while starts:
        by_length: dict[int, list[int]] = defaultdict(list)
        for row, start in starts.items():
            by_length[_window_end(start, n, params) - start].append(row)
        following: dict[int, int] = {}
        for length, rows in by_length.items():
            begin = np.array([starts[r] for r in rows])
            window, sigma = _damped_window(y[np.array(rows)[:, None], begin[:, None] + np.arange(length)], params)
            k, _ = energy_split(window, side)
            delta, p = split_test(window, k, sigma, np.full(len(rows), float(_candidates(length, side))))
            shift = np.maximum(math.log1p(params.min_effect), params.k_noise * sigma)
            passed = (np.abs(delta) >= shift) & (p <= params.alpha) & (length >= 2 * side)
            for i, row in enumerate(rows):
                start, end = starts[row], starts[row] + length
                changes = [start + c for c in _segment_window(window[i], float(sigma[i]), params, int(k[i]))
                           ] if passed[i] else []
                if end == n:
                    found[row] += changes
                    continue
                accepted = [c for c in changes if c <= end - params.margin]
                found[row] += accepted
                following[row] = _next_start(start, end, accepted, params)
        starts = following
    return found
