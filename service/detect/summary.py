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
