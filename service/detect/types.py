"""The records a detector reads and writes, and the interface every detector fills."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Direction = Literal["lower_is_better", "higher_is_better"]


@dataclass(frozen=True)
class SeriesPoint:
    """One commit of a series: its first-parent position, an opaque id to map back, and every sample."""

    position: int
    commit_id: int
    samples: Sequence[float]


@dataclass(frozen=True)
class ChangePoint:
    index: int  # index into the points given: the first point of the new level
    commit_id: int
    previous_commit_id: int | None
    before: float  # level before the change (same unit as the samples)
    after: float
    magnitude: float  # after / before - 1
    noise_units: float  # the step in units of the series' own commit-to-commit noise
    kind: Literal["regression", "improvement"]
    p_value: float | None = None  # None where the detector has no test behind its verdict


class Detector(Protocol):
    name: str
    version: int

    def detect(self, points: Sequence[SeriesPoint], direction: Direction) -> list[ChangePoint]: ...
