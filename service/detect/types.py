"""The records a detector reads and writes, and the interface every detector fills."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kernelwatch.vocabulary import ChangeKind, Polarity
from service.detect.run_stats import run_medians


@dataclass(frozen=True)
class SeriesPoint:
    """One commit of a series: its first-parent position, an opaque id to map back, and every sample.

    ``run_sizes``: how many of the samples, in order, each run (benchmark process) that measured the commit holds;
    empty: all of them are one run. A detector that knows the runs treats each as one observation (on a shared
    host processes disagree far more than the samples of one process do).
    """

    position: int
    commit_id: int
    samples: Sequence[float]
    run_sizes: Sequence[int] = ()

    def run_medians(self) -> list[float]:
        """The median of each run's samples (one value when the runs are not known)."""
        return run_medians(self.samples, self.run_sizes)


@dataclass(frozen=True)
class ChangePoint:
    index: int  # index into the points given: the first point of the new level
    commit_id: int
    previous_commit_id: int | None
    before: float  # level before the change (same unit as the samples)
    after: float
    magnitude: float  # after / before - 1
    noise_units: float  # the step in units of the series' own commit-to-commit noise
    kind: ChangeKind  # worse or better, for the series' polarity
    p_value: float | None = None  # None where the detector has no test behind its verdict


class Detector(Protocol):
    name: str
    version: int

    def detect(self, points: Sequence[SeriesPoint], polarity: Polarity) -> list[ChangePoint]: ...
