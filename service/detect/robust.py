"""Robust helpers for a series of per-commit values: outlier damping and the series' own noise.

Both work on many series at once (rows of a 2-D array), because the engine examines thousands of series per pass.
Values are expected on a log scale: performance changes multiply, so one slow commit is the same size of outlier at
1 ms and at 1 s.
"""

from __future__ import annotations

import math

import numpy as np

MAD_TO_SIGMA = 1.4826  # the MAD of a normal sample times this is its standard deviation


def median_last_axis(x: np.ndarray) -> np.ndarray:
    """np.median over the last axis, by one partition: the engine takes millions of medians of a few values,
    where np.median's generality (NaN checks, any axis) costs more than the work."""
    n = x.shape[-1]
    half = n // 2
    if n % 2:
        return np.partition(x, half, axis=-1)[..., half]
    part = np.partition(x, (half - 1, half), axis=-1)
    return 0.5 * (part[..., half - 1] + part[..., half])


def robust_noise(y: np.ndarray, floor: float) -> np.ndarray:
    """Per row: the sigma of one commit's value, from the median absolute commit-to-commit difference.

    Differences of neighbours cancel any level, so a real step barely moves this (it adds one large difference
    among many); the median ignores the outliers that Hampel damping has not caught.
    """
    y = np.atleast_2d(y)
    if y.shape[1] < 3:
        return np.full(y.shape[0], floor)
    diffs = np.abs(np.diff(y, axis=1))
    # A difference of two independent values has sqrt(2) times the spread of one.
    return np.maximum(floor, MAD_TO_SIGMA * median_last_axis(diffs) / math.sqrt(2))


def hampel(y: np.ndarray, half_window: int, k: float, sigma: np.ndarray) -> np.ndarray:
    """``damp``'s values."""
    return damp(y, half_window, k, sigma)[0]


def damp(y: np.ndarray, half_window: int, k: float, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Damp isolated outliers: a value farther than ``k`` sigmas from the median of its neighbourhood
    (``half_window`` commits each side, clipped at the ends) is replaced by that median. Returns the values and
    which of them were replaced.

    ``sigma`` is per row and is the series' own commit noise, not the local MAD of a handful of points: with
    seven points the local MAD is too noisy a yardstick, and is zero whenever four of them agree.
    A step in the level is not damped: on either side of it the neighbourhood median sits on the point's own
    level, because a step keeps going while an outlier does not.
    """
    y = np.atleast_2d(np.asarray(y, dtype=float))
    n = y.shape[1]
    if n < 3 or half_window < 1:
        return y.copy(), np.zeros(y.shape, dtype=bool)
    # Mirror the values next to each end, so a window there still has 2*h+1 values. Mirroring, not repeating the
    # end value: a repeated slow newest commit would outvote its neighbours and never be damped.
    half_window = min(half_window, n - 1)
    h = half_window  # np.pad(mode="reflect"), without its generality's cost on millions of short rows
    padded = np.concatenate([y[:, h:0:-1], y, y[:, -2 : -h - 2 : -1]], axis=1)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half_window + 1, axis=1)
    medians = median_last_axis(windows)
    outlier = np.abs(y - medians) > k * sigma[:, None]
    return np.where(outlier, medians, y), outlier
