"""Change points in series of per-commit values: the engine behind every time and numerics finding.

One pass, for one series or ten thousand:

1. Log scale: performance changes multiply.
2. Hampel damping of isolated outlying commits (a slow machine, a noisy neighbour), judged against the
   window's own noise. A level of fewer than ``min_side`` commits at a window's end, which damping cannot yet
   tell from outliers, is left out of that window before damping (``_settled_span``).
3. Binary segmentation inside a window of commits: E-divisive means places the best split of a segment, a
   Bonferroni-corrected t-test decides it (``edivisive``), and the split must also move the level by at
   least max(min_effect, k_noise x the series' own noise) with ``min_side`` commits on each side; a split that
   ``min_side`` alone placed, next to a shorter level at the segment's end, waits for that level's commits
   (``_short_level_at``). Segments are split again until nothing passes; then every change is re-tested between
   its final neighbours and the weak ones are dropped, as E-divisive's authors advise.
4. Long series are read in overlapping windows anchored at the last accepted change, so the cost is linear in
   the length and a change is always judged against the level just before it, not one from a year ago.

``detect_many`` runs step 3 for all series at once on the first window and keeps on in bulk for as long as a
series shows nothing; only series with a change continue one by one. Its answers equal ``detect_levels`` row by
row (a test checks it).

Commits measured by several runs (benchmark processes): each commit's value is the mean of its runs' log
medians and the split test counts runs, not commits, where a commit's runs behave as independent replicates
(``edivisive``'s docstring says why and when). Placement, damping, the minimum effect and the windows stay per
commit. A series whose commits have one run each is analysed exactly as without runs.

Incremental use: each window is judged on its own values only, so a window read in full never changes its answer;
``analyse(longer, resume=earlier)`` re-reads only from the last window's start and equals a full analysis.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from service.detect.edivisive import bump_test, energy_split, split_test
from service.detect.robust import damp, hampel, robust_noise


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
    # Runs of a commit count as replicates when an F-test of the commits' spread against their runs' spread gives
    # at least this p ("sometimes pool" at the pre-test level Paull and Bancroft advise; see ``edivisive``).
    pool_runs_p: float = 0.25
    # A level that came and went (a regression reverted some commits later) is tested as one (``_bump``), where the
    # one-split test found nothing, at this corrected p: at ``alpha`` it raised the false points of heavy-tailed
    # noise (Student-t(3)) from 0.055 to 0.240 per 1,000 series-commits, at a hundredth of it they stay as without
    # it (bench/detect_quality.py; bench/README.md). A revert comes after a change large enough to be noticed.
    bump_alpha: float = 0.00005

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
    runs: np.ndarray | None = None  # (B, n) runs behind each value; None: one each
    within: np.ndarray | None = None  # (B, n) squared deviations of each commit's log run medians, summed


def _prepare(values: np.ndarray, runs: np.ndarray | None = None, within: np.ndarray | None = None) -> _Prepared:
    values = np.atleast_2d(np.asarray(values, dtype=float))
    ok = np.all(np.isfinite(values) & (values > 0), axis=1)
    y = np.log(np.where(ok[:, None], values, 1.0))
    if runs is None:
        return _Prepared(y, ok)
    runs = np.atleast_2d(np.asarray(runs, dtype=float))
    within = np.zeros_like(runs) if within is None else np.atleast_2d(np.asarray(within, dtype=float))
    if runs.shape != values.shape or within.shape != values.shape:
        raise ValueError(f"runs {runs.shape} and within {within.shape} must be shaped as the values {values.shape}")
    ok &= np.all(np.isfinite(runs) & (runs >= 1) & np.isfinite(within) & (within >= 0), axis=1)
    if np.all(runs[ok] == 1):  # one run a commit: the commit test, exactly (and at its cost)
        return _Prepared(y, ok)
    return _Prepared(y, ok, np.where(ok[:, None], runs, 1.0), np.where(ok[:, None], within, 0.0))


@dataclass(frozen=True)
class CommitRuns:
    """Per commit, what the engine reads of its runs: the level (geometric mean of the runs' medians), how many
    runs, and the squared deviations of their log medians around its log, summed."""

    levels: np.ndarray
    runs: np.ndarray
    within: np.ndarray


def commit_runs(run_medians: Sequence[Sequence[float]]) -> CommitRuns:
    """``CommitRuns`` of commits given as their runs' medians. Each run is one vote: a pooled median of every
    sample would be the median of whichever run happened to take the most samples, a process like any other.
    A commit with a run median that is not finite and > 0 gets the level nan (the series is then not analysed,
    as one with such a value is)."""
    levels, runs, within = [], [], []
    for medians in run_medians:
        values = np.asarray(medians, dtype=float)
        if values.size == 0:
            raise ValueError("a commit needs at least one run")
        if np.all(np.isfinite(values) & (values > 0)):
            logs = np.log(values)
            centre = float(logs.mean())
            levels.append(math.exp(centre) if values.size > 1 else float(values[0]))  # one run: its median, exactly
            within.append(float(((logs - centre) ** 2).sum()))
        else:
            levels.append(math.nan)
            within.append(0.0)
        runs.append(float(values.size))
    return CommitRuns(np.array(levels), np.array(runs), np.array(within))


def _damped_window(y: np.ndarray, params: ChangePointParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of one window, damped; their noise; and which rows had a commit damped within ``min_side`` of an
    end (``_settled_span`` looks at those again). All depend on the window's own values only, so a window read
    in full gives the same answer however many commits come after it."""
    sigma = robust_noise(y, params.noise_floor)
    damped, replaced = damp(y, params.hampel_half_window, params.hampel_k, sigma)
    reach = max(0, min(params.min_side - 1, y.shape[1]))
    near_end = np.asarray(replaced[:, :reach].any(axis=1) | replaced[:, y.shape[1] - reach:].any(axis=1))
    return damped, sigma, near_end


def _min_shift(sigma: float, params: ChangePointParams) -> float:
    return max(math.log1p(params.min_effect), params.k_noise * sigma)


def _test_split(y: np.ndarray, k: int, sigma: float, candidates: int, params: ChangePointParams,
                runs: np.ndarray | None = None, within: np.ndarray | None = None) -> float | None:
    """p-value of splitting ``y`` at ``k`` if the split is big and significant enough, else None."""
    delta, p = split_test(y[None, :], np.array([k]), np.array([sigma]), np.array([float(candidates)]),
                          *_rows(runs, within), params.pool_runs_p)
    if abs(float(delta[0])) >= _min_shift(sigma, params) and float(p[0]) <= params.alpha:
        return float(p[0])
    return None


def _candidates(length: int, min_side: int) -> int:
    return max(1, length - 2 * min_side + 1)


def _rows(runs: np.ndarray | None, within: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """One segment's runs and spreads as the one-row arrays ``split_test`` takes (None stays None)."""
    if runs is None or within is None:
        return None, None
    return runs[None, :], within[None, :]


def _segment_window(y: np.ndarray, raw: np.ndarray, sigma: float, params: ChangePointParams,
                    first: int | None = None, runs: np.ndarray | None = None,
                    within: np.ndarray | None = None) -> list[int]:
    """Change indices in one window ``y`` (damped; ``raw``: before damping) by binary segmentation, then pruning
    between final neighbours.

    ``first``: the split of the whole window, when the caller has already placed it, seen it pass and seen that
    ``_short_level_at`` has nothing to set aside (the bulk path tests every series' first split at once).
    ``runs``, ``within``: the window's, or None."""
    side = params.min_side

    def test(lo: int, k: int, hi: int) -> float | None:
        segment_runs = None if runs is None else runs[lo:hi]
        segment_within = None if within is None else within[lo:hi]
        return _test_split(y[lo:hi], k - lo, sigma, _candidates(hi - lo, side), params, segment_runs,
                           segment_within)

    found: list[int] = []
    edges = [0, y.size]  # the window less any short level set aside at either end
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
        if test(lo, split, hi) is None:
            bump = _bump(y[lo:hi], sigma, params)
            if bump is not None:  # a level that came and went: both its ends, each tested again when pruning
                first_end, second_end = lo + bump[0], lo + bump[1]
                found += [first_end, second_end]
                stack += [(lo, first_end), (first_end, second_end), (second_end, hi)]
            continue
        short = _short_level_at(raw[lo:hi], split - lo, side)
        if short is None:
            found.append(split)
            stack += [(lo, split), (split, hi)]
            continue
        settled = (lo, lo + short) if short > split - lo else (lo + short, hi)
        edges = [settled[0] if lo == edges[0] else edges[0], settled[1] if hi == edges[1] else edges[1]]
        stack.append(settled)
    found.sort()
    while True:  # drop the weakest change that no longer stands between its neighbours, until all stand
        bounds = [edges[0], *found, edges[1]]
        weak = [(i, c) for i, c in enumerate(found) if test(bounds[i], c, bounds[i + 2]) is None]
        if not weak:
            return found
        found.remove(weak[0][1])


def _bump(y: np.ndarray, sigma: float, params: ChangePointParams) -> tuple[int, int] | None:
    """The two ends of a level that came and went inside the segment ``y`` (``edivisive.bump_test``), where it
    is big and significant enough; None otherwise. Commits, not runs: the ends are each tested again between
    their final neighbours (with runs, where they pool) before anything is reported."""
    first, second, delta, p = bump_test(y[None, :], np.array([sigma]), params.min_side)
    if abs(float(delta[0])) >= _min_shift(sigma, params) and float(p[0]) <= params.bump_alpha:
        return int(first[0]), int(second[0])
    return None


def _free_split(raw: np.ndarray) -> int:
    """The best split of a segment's values as measured (not damped), with no minimum side."""
    return int(energy_split(raw[None, :], 1)[0][0])


def _short_level_at(raw: np.ndarray, k: int, side: int) -> int | None:
    """Where a segment (its values as measured) ends or begins with a level too short to report, whose nearness
    alone placed the split ``k``: the first index after (or of) that level; None where the split is where the
    statistic puts it. A step two commits before the end, with a minimum side of three, is allowed no split
    nearer the end than three commits, one commit before the change, to be moved when the third came; such a
    level waits for its commits."""
    length = raw.size
    if side < k < length - side:
        return None
    free = _free_split(raw)
    if (k == length - side and free > k) or (k == side and free < k):
        return free
    return None


def _settled_span(raw: np.ndarray, params: ChangePointParams) -> tuple[int, int, np.ndarray, np.ndarray]:
    """One window's span [a, b) to search, less a level of fewer than ``min_side`` commits at either end that
    damping reached, with that span's damped values and noise.

    Hampel damping cannot tell two slow newest commits from the start of a new level (a step keeps going, but
    these have had no time to), so it turns them into copies of their neighbourhood's median, often the commit
    before them, and then that commit and its copies make a plateau of three near-identical values: a "level"
    that passes any test and names the wrong commit. Such a level is left out, and the rest damped without it;
    it is read again when more commits make it a level (or an outlier inside the window)."""
    a, b = 0, raw.size
    damped, sigma, near_end = _damped_window(raw[None, :], params)
    for _ in range(2):  # once for each end
        if not near_end[0] or b - a < 2 * params.min_side:
            break
        free = _free_split(raw[a:b])
        if params.min_side <= free <= b - a - params.min_side:
            break
        a, b = (a, a + free) if free > b - a - params.min_side else (a + free, b)
        damped, sigma, near_end = _damped_window(raw[None, a:b], params)
    return a, b, damped[0], sigma


def _window_changes(raw: np.ndarray, params: ChangePointParams, runs: np.ndarray | None,
                    within: np.ndarray | None) -> list[int]:
    """The change indices of one window (its log values as measured), alone."""
    a, b, damped, sigma = _settled_span(raw, params)
    return [a + c for c in _segment_window(damped, raw[a:b], float(sigma[0]), params, None,
                                           None if runs is None else runs[a:b],
                                           None if within is None else within[a:b])]


def _window_end(start: int, n: int, params: ChangePointParams) -> int:
    return min(n, start + params.window)


def _next_start(start: int, end: int, accepted: list[int], params: ChangePointParams) -> int:
    # Re-read from the last change (so the next one is judged against the level after it), or else half a window
    # back, so that a change near this window's end has plenty of commits before it in the next.
    return accepted[-1] if accepted else max(start + 1, end - 2 * params.margin)


def _walk_row(y: np.ndarray, start: int, params: ChangePointParams, runs: np.ndarray | None = None,
              within: np.ndarray | None = None) -> tuple[list[int], int]:
    """All change indices of one series of log values at or after ``start``, reading windows from ``start`` on;
    and where the last window started (the changes before it are final)."""
    n = y.size
    found: list[int] = []
    while True:
        end = _window_end(start, n, params)
        window_runs = None if runs is None else runs[start:end]
        window_within = None if within is None else within[start:end]
        changes = [start + c for c in _window_changes(y[start:end], params, window_runs, window_within)]
        if end == n:
            return found + changes, start
        accepted = [c for c in changes if c <= end - params.margin]
        found += accepted
        start = _next_start(start, end, accepted, params)


def _describe(y: np.ndarray, indices: list[int], params: ChangePointParams, runs: np.ndarray | None = None,
              within: np.ndarray | None = None) -> list[Change]:
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
                          np.array([float(_candidates(hi - lo, params.min_side))]),
                          *_rows(None if runs is None else runs[lo:hi], None if within is None else within[lo:hi]),
                          params.pool_runs_p)
        before = math.exp(float(np.median(raw[lo:c])))
        after = math.exp(float(np.median(raw[c:hi])))
        out.append(Change(index=c, before=before, after=after, magnitude=after / before - 1,
                          p_value=float(p[0]), noise_units=abs(math.log(after / before)) / sigma))
    return out


@dataclass(frozen=True)
class Analysis:
    changes: list[Change]
    resume_at: int  # changes up to this index are final; a longer series need only be re-read from here


def _row(array: np.ndarray | None, row: int) -> np.ndarray | None:
    return None if array is None else array[row]


def analyse(levels: Sequence[float] | np.ndarray, params: ChangePointParams | None = None,
            resume: Analysis | None = None, *, runs: Sequence[float] | np.ndarray | None = None,
            within: Sequence[float] | np.ndarray | None = None) -> Analysis:
    """The changes of one series of per-commit values (all > 0), in order.

    ``resume``: the analysis of an earlier, shorter prefix of the same series. Only its tail is read again and the
    answer is the same as a full analysis: every window read before ``resume.resume_at`` was read in full.
    ``runs``, ``within``: per commit, how many runs its value is the geometric mean of, and their log medians'
    squared deviations around its log, summed (``commit_runs``); absent, every value is one run.
    """
    params = params or ChangePointParams()
    values = np.asarray(levels, dtype=float)
    if values.ndim != 1:
        raise ValueError("analyse takes one series; use detect_many for several")
    prepared = _prepare(values, None if runs is None else np.asarray(runs, dtype=float),
                        None if within is None else np.asarray(within, dtype=float))
    if values.size < 2 * params.min_side or not prepared.ok[0]:
        return Analysis([], 0)
    y, row_runs, row_within = prepared.y[0], _row(prepared.runs, 0), _row(prepared.within, 0)
    start = resume.resume_at if resume is not None else 0
    kept = [c.index for c in resume.changes if c.index <= start] if resume is not None else []
    indices, resume_at = _walk_row(y, start, params, row_runs, row_within)
    return Analysis(_describe(y, kept + indices, params, row_runs, row_within), resume_at)


def detect_levels(levels: Sequence[float] | np.ndarray, params: ChangePointParams | None = None, *,
                  runs: Sequence[float] | np.ndarray | None = None,
                  within: Sequence[float] | np.ndarray | None = None) -> list[Change]:
    """The changes of one series of per-commit values (all > 0), in order (``runs``, ``within``: see ``analyse``)."""
    return analyse(levels, params, runs=runs, within=within).changes


def detect_many(matrix: np.ndarray, params: ChangePointParams | None = None, *, runs: np.ndarray | None = None,
                within: np.ndarray | None = None) -> list[list[Change]]:
    """``detect_levels`` for every row of ``matrix`` (n_series, n_commits), vectorised where series are quiet;
    ``runs`` and ``within``, if given, of the same shape."""
    params = params or ChangePointParams()
    values = np.atleast_2d(np.asarray(matrix, dtype=float))
    out: list[list[Change]] = [[] for _ in range(values.shape[0])]
    if values.shape[1] < 2 * params.min_side:
        return out
    if runs is not None:
        runs = np.atleast_2d(np.asarray(runs, dtype=float))
        within = np.zeros_like(runs) if within is None else np.atleast_2d(np.asarray(within, dtype=float))
    for first in range(0, values.shape[0], params.chunk):
        block = slice(first, first + params.chunk)
        prepared = _prepare(values[block], None if runs is None else runs[block],
                            None if within is None else within[block])
        for row, indices in _bulk_walk(prepared, params).items():
            out[first + row] = _describe(prepared.y[row], indices, params, _row(prepared.runs, row),
                                         _row(prepared.within, row))
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
            cells = (np.array(rows)[:, None], begin[:, None] + np.arange(length))
            window, sigma, near_end = _damped_window(y[cells], params)
            runs = None if prepared.runs is None else prepared.runs[cells]
            within = None if prepared.within is None else prepared.within[cells]
            k, _ = energy_split(window, side)
            delta, p = split_test(window, k, sigma, np.full(len(rows), float(_candidates(length, side))), runs,
                                  within, params.pool_runs_p)
            shift = np.maximum(math.log1p(params.min_effect), params.k_noise * sigma)
            passed = (np.abs(delta) >= shift) & (p <= params.alpha) & (length >= 2 * side)
            # Where the one split fails, a level that came and went (``_bump``) sends the row on alone too.
            failed = np.flatnonzero(~passed)
            bumped = np.zeros(len(rows), dtype=bool)
            if failed.size and length >= 3 * side:
                _, _, bump_delta, bump_p = bump_test(window[failed], sigma[failed], side)
                bumped[failed] = (np.abs(bump_delta) >= shift[failed]) & (bump_p <= params.bump_alpha)
            # Where damping reached an end and the values as measured are best split there, ``_settled_span``
            # searches less of the window: those rows go alone.
            short_end = np.zeros(len(rows), dtype=bool)
            if near_end.any() and length >= 2 * side:
                free = energy_split(y[cells][near_end], 1)[0]
                short_end[near_end] = (free < side) | (free > length - side)
            for i, row in enumerate(rows):
                start, end = starts[row], starts[row] + length
                raw = y[row, start:end]
                if short_end[i]:
                    changes = [start + c for c in _window_changes(raw, params, _row(runs, i), _row(within, i))]
                elif passed[i] or bumped[i]:
                    first_split = (int(k[i]) if passed[i] and _short_level_at(raw, int(k[i]), side) is None
                                   else None)
                    changes = [start + c for c in _segment_window(window[i], raw, float(sigma[i]), params,
                                                                  first_split, _row(runs, i), _row(within, i))]
                else:
                    changes = []
                if end == n:
                    found[row] += changes
                    continue
                accepted = [c for c in changes if c <= end - params.margin]
                found[row] += accepted
                following[row] = _next_start(start, end, accepted, params)
        starts = following
    return found
