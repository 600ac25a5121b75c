"""The detector the service runs on every series: per-commit medians through the change-point engine."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from service.detect.changepoints import ChangePointParams, detect_levels
from service.detect.types import ChangePoint, Direction, SeriesPoint


class EDivisiveDetector:
    """E-divisive means with a t-test on Hampel-damped log medians (see ``changepoints``)."""

    name = "edivisive"
    version = 1

    def __init__(self, params: ChangePointParams | None = None) -> None:
        self.params = params or ChangePointParams()

    def detect(self, points: Sequence[SeriesPoint], direction: Direction) -> list[ChangePoint]:
        usable = [p for p in sorted(points, key=lambda p: p.position) if len(p.samples) > 0]
        medians = np.array([float(np.median(np.asarray(p.samples, dtype=float))) for p in usable])
        changes = []
        for change in detect_levels(medians, self.params):
            worse = change.after > change.before if direction == "lower_is_better" else change.after < change.before
            changes.append(ChangePoint(
                index=change.index,
                commit_id=usable[change.index].commit_id,
                previous_commit_id=usable[change.index - 1].commit_id,
                before=change.before,
                after=change.after,
                magnitude=change.magnitude,
                noise_units=change.noise_units,
                kind="regression" if worse else "improvement",
                p_value=change.p_value,
            ))
        return changes
