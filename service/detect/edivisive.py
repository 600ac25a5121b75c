"""E-divisive means for one split, on many segments at once, and the test that decides whether a split is real.

The energy statistic (Matteson and James, 2014) with exponent 1 compares the mean distance across a split with the
mean distances inside each side. It sees any change of distribution, is not pulled by one far value as a squared
distance would be, and locates a step well; it is what Apache Otava and Chromium's dashboard use to place a
change. Where a split is placed and whether it counts are separate questions here: the statistic places it, a
t-test on the (damped) values of the two sides, Bonferroni-corrected for the number of places looked at,
decides it. The t-test's p-value is a number a person can read; the permutation test Otava once used gives a
similar answer at a hundred times the cost.

Everything works on rows of a 2-D array (one segment per row, all of one length), because the engine examines
thousands of series in one pass.

Commits measured by several runs (benchmark processes). On a shared host the same code's median moves 20-100 % from
one process to the next while the samples inside one process agree, so the process is the unit of replication: a
commit's value is the mean of its runs' log medians, and each run is one observation. A commit of three runs then
weighs three times one of one run, and the spread between the runs of one commit is evidence about the noise that no
step can inflate. With ``runs`` given, ``split_test`` is the same t-test on runs (each commit's value weighted by
its run count, its runs' own spread added to the residuals), whose degrees of freedom are the runs', not the
commits': at 4 + 4 commits of ~2 runs the 0.17 % two-sided quantile (alpha 0.005 over 3 splits) is t = 3.9 (14 df)
rather than 5.4 (6 df), so the step needed shrinks by a quarter, and again by about sqrt(runs) since each side's
mean is one of more runs. This holds only if the runs of one commit are independent draws of the process noise;
where commits differ by more than their runs predict (a commit-level effect: code layout, runs of one commit made in
one state of the host) treating runs as replicates overstates the evidence (simulated, flat series of 8-16 commits
of 3 runs that agree within 5 % while commits vary by 20 %: 9-13 % false alarms if always pooled, 1.0-1.1 % with the
pre-test, 1.2 % for the pooled medians of before). So the runs are pooled only when an F-test of the commits' spread
around their side's mean against their runs' spread does not reject (p >= ``pool_p``: "sometimes pool", with the
pre-test at 0.25 as Paull (1950) and Bancroft advise for pooling error terms); otherwise every commit is one
observation of its mean, as with one run each.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

VARIANCE_FLOOR = 0.5


@lru_cache(maxsize=64)
def _strictly_lower(length: int) -> np.ndarray:
    return np.tril(np.ones((length, length)), -1)


def energy_split(y: np.ndarray, min_side: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``y`` (B, L): the split k (first index of the second side, min_side <= k <= L - min_side) that
    maximises the scaled energy statistic, and that statistic.

    All splits of a row come from one pairwise distance matrix and running sums over it, O(L^2) per row.
    """
    batch, length = y.shape
    distance = np.abs(y[:, :, None] - y[:, None, :])
    row_sums = distance.sum(axis=2)
    below = np.einsum("bij,ij->bi", distance, _strictly_lower(length))  # sum over j < i of |y_i - y_j|
    total = row_sums.sum(axis=1, keepdims=True)
    k = np.arange(1, length)  # split after the first k values
    within_first = 2 * np.cumsum(below, axis=1)[:, :-1]  # ordered pairs inside y[:k]
    cross = np.cumsum(row_sums, axis=1)[:, :-1] - within_first
    within_second = total - within_first - 2 * cross
    n, m = k.astype(float), (length - k).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        energy = (2 * cross / (n * m) - within_first / (n * np.maximum(n - 1, 1))
                  - within_second / (m * np.maximum(m - 1, 1)))
    scaled = energy * (n * m / (n + m))
    allowed = (k >= min_side) & (length - k >= min_side)
    scaled = np.where(allowed, scaled, -np.inf)
    best = np.argmax(scaled, axis=1)
    return best + 1, scaled[np.arange(batch), best]


def split_test(y: np.ndarray, k: np.ndarray, sigma: np.ndarray, candidates: np.ndarray,
               runs: np.ndarray | None = None, within: np.ndarray | None = None, pool_p: float = 0.25
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (difference of the two sides' means, Bonferroni-corrected two-sided p-value of a t-test).

    A step changes the level, not the noise, so the two sides share one variance: the pooled sample variance,
    floored at the series' own noise ``sigma`` squared. The floor matters: a few commits that happen to be quiet
    are weak evidence that the series is quiet, and a side of identical values would otherwise make any
    difference infinitely significant. Pooling also keeps the degrees of freedom of the whole segment, so five
    commits of a new level are judged with all the commits before them (Welch's test would judge them with five).
    ``candidates`` is how many splits were looked at to pick k.

    ``runs`` (same shape as ``y``): how many runs each commit's value is the mean of; ``within``: the sum of
    squared deviations of that commit's log run medians around its value. Without them every commit is one run.
    With them the test is on runs where the runs of a commit are consistent with independent replicates (see the
    module's docstring), on commits otherwise; ``sigma`` is then the noise of one commit's value, as without.
    """
    length = y.shape[1]
    first = np.arange(length)[None, :] < k[:, None]
    n1, n2 = k.astype(float), (length - k).astype(float)
    mean1 = np.where(first, y, 0.0).sum(axis=1) / n1
    mean2 = np.where(first, 0.0, y).sum(axis=1) / n2
    centred = y - np.where(first, mean1[:, None], mean2[:, None])
    dof = np.maximum(n1 + n2 - 2, 1)
    variance = np.maximum((centred**2).sum(axis=1) / dof, (sigma * VARIANCE_FLOOR) ** 2)
    delta = mean2 - mean1
    t = np.abs(delta) / np.sqrt(variance * (1 / n1 + 1 / n2))
    from scipy import special  # here: a CLI command that never detects need not pay for importing it

    if runs is not None and within is not None:
        delta, t, dof = _pooled_runs(y, first, runs, within, sigma, pool_p, delta, t, dof)
    p = 2 * special.stdtr(dof, -t)  # the t distribution's tail, as a ufunc: stats.t.sf costs 10x in overhead
    return delta, np.minimum(1.0, p * candidates)


def _pooled_runs(y: np.ndarray, first: np.ndarray, runs: np.ndarray, within: np.ndarray, sigma: np.ndarray,
                 pool_p: float, delta: np.ndarray, t: np.ndarray, dof: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The split test on runs, row by row where the F pre-test lets the runs be pooled; the commit test's
    (delta, t, dof) elsewhere."""
    from scipy import special

    length = y.shape[1]
    w1, w2 = np.where(first, runs, 0.0), np.where(first, 0.0, runs)
    r1, r2 = w1.sum(axis=1), w2.sum(axis=1)
    mean1, mean2 = (w1 * y).sum(axis=1) / r1, (w2 * y).sum(axis=1) / r2
    between = (runs * (y - np.where(first, mean1[:, None], mean2[:, None])) ** 2).sum(axis=1)
    spread = within.sum(axis=1)
    total = r1 + r2
    run_dof = np.maximum(total - 2, 1)
    # The floor, in units of one run: under independent runs a commit's value has variance sigma_run^2 / runs,
    # so sigma (one commit's, averaged over the segment's commits) is sigma_run * sqrt(mean(1 / runs)).
    sigma_run = sigma / np.sqrt((1.0 / runs).mean(axis=1))
    variance = np.maximum((between + spread) / run_dof, (sigma_run * VARIANCE_FLOOR) ** 2)
    run_t = np.abs(mean2 - mean1) / np.sqrt(variance * (1 / r1 + 1 / r2))
    # The pre-test: commits' spread around their side's mean (length - 2 df) against their runs' spread
    # (total - length df). Runs that agree exactly (spread 0) are no evidence of independence: not pooled.
    between_dof, within_dof = length - 2, total - length
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (between / np.maximum(between_dof, 1)) / (spread / np.maximum(within_dof, 1))
        consistent = special.fdtrc(np.maximum(between_dof, 1), np.maximum(within_dof, 1), ratio) >= pool_p
    pool = consistent & (between_dof >= 1) & (within_dof >= 1) & (spread > 0)
    return (np.where(pool, mean2 - mean1, delta), np.where(pool, run_t, t), np.where(pool, run_dof, dof))


@lru_cache(maxsize=64)
def _bump_pairs(length: int, min_side: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (start, end) of a middle segment with at least ``min_side`` values in it and before and after it."""
    start, end = np.triu_indices(length + 1, 1)
    keep = (start >= min_side) & (length - end >= min_side) & (end - start >= min_side)
    return start[keep], end[keep]


def bump_test(y: np.ndarray, sigma: np.ndarray, min_side: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``y`` (B, L): the middle segment [k1, k2) whose mean differs most from the values around it
    (the "epidemic" alternative: a level that came and went inside the segment), the difference of the two
    means, and the Bonferroni-corrected two-sided p-value of a t-test of it over all the (k1, k2) looked at.

    Binary segmentation tests one split of a segment first, and a bump (a regression reverted some commits later)
    has no good single split: either side of any one mixes both levels, the test fails, and neither change is
    found ("low 8, 4x high 8, low 8" found nothing). This is the test of the two splits together, made where the
    single split failed. Variance pooled as in ``split_test`` (the middle against the outside, both outer parts
    sharing one mean), floored at ``sigma``. Rows shorter than 3 x ``min_side``: no pair, p = 1."""
    batch, length = y.shape
    start, end = _bump_pairs(length, min_side)
    if start.size == 0:
        zeros = np.zeros(batch, dtype=int)
        return zeros, zeros, np.zeros(batch), np.ones(batch)
    sums = np.concatenate([np.zeros((batch, 1)), np.cumsum(y, axis=1)], axis=1)
    total = sums[:, -1:]
    middle = sums[:, end] - sums[:, start]
    n_mid = (end - start).astype(float)
    n_out = length - n_mid
    delta = middle / n_mid - (total - middle) / n_out
    between = n_mid * n_out / length * delta**2
    squares = (y**2).sum(axis=1, keepdims=True) - total**2 / length
    dof = max(length - 2, 1)
    variance = np.maximum((squares - between) / dof, (sigma[:, None] * VARIANCE_FLOOR) ** 2)
    t = np.abs(delta) / np.sqrt(variance * (1 / n_mid + 1 / n_out))
    best = np.argmax(t, axis=1)
    rows = np.arange(batch)
    from scipy import special

    p = 2 * special.stdtr(dof, -t[rows, best])
    return start[best], end[best], delta[rows, best], np.minimum(1.0, p * start.size)
