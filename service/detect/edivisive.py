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


def split_test(y: np.ndarray, k: np.ndarray, sigma: np.ndarray, candidates: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (difference of the two sides' means, Bonferroni-corrected two-sided p-value of a t-test).

    A step changes the level, not the noise, so the two sides share one variance: the pooled sample variance,
    floored at the series' own noise ``sigma`` squared. The floor matters: a few commits that happen to be quiet
    are weak evidence that the series is quiet, and a side of identical values would otherwise make any
    difference infinitely significant. Pooling also keeps the degrees of freedom of the whole segment, so five
    commits of a new level are judged with all the commits before them (Welch's test would judge them with five).
    ``candidates`` is how many splits were looked at to pick k.
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

    p = 2 * special.stdtr(dof, -t)  # the t distribution's tail, as a ufunc: stats.t.sf costs 10x in overhead
    return delta, np.minimum(1.0, p * candidates)
