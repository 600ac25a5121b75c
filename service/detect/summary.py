"""Summary statistics of one result's samples, computed once at ingest and stored beside the samples."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Summary:
    count: int
    median: float | None
    mean: float | None
    stddev: float | None
    minimum: float | None
    maximum: float | None


def summarize(samples: Sequence[float]) -> Summary:
    if not samples:
        return Summary(0, None, None, None, None, None)
    x = np.asarray(samples, dtype=float)
    return Summary(
        count=int(x.size),
        median=float(np.median(x)),
        mean=float(x.mean()),
        stddev=float(x.std(ddof=1)) if x.size > 1 else 0.0,
        minimum=float(x.min()),
        maximum=float(x.max()),
    )


def summarize_many(sample_lists: Sequence[Sequence[float]]) -> list[Summary]:
    """``summarize`` of each list, computed over all the lists of one length at once: a run of thousands of
    results spent half its ingest time summarising them one by one."""
    out: list[Summary | None] = [None] * len(sample_lists)
    by_length: dict[int, list[int]] = {}
    for index, samples in enumerate(sample_lists):
        by_length.setdefault(len(samples), []).append(index)
    for n, indices in by_length.items():
        if n == 0:
            for index in indices:
                out[index] = Summary(0, None, None, None, None, None)
            continue
        x = np.array([sample_lists[i] for i in indices], dtype=np.float64)
        columns = (np.median(x, axis=1).tolist(), x.mean(axis=1).tolist(),
                   (x.std(axis=1, ddof=1) if n > 1 else np.zeros(len(indices))).tolist(),
                   x.min(axis=1).tolist(), x.max(axis=1).tolist())
        for row, index in enumerate(indices):
            out[index] = Summary(n, *(float(column[row]) for column in columns))
    return [s for s in out if s is not None]
