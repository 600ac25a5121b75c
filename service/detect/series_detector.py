"""The detector the service runs on every series: per-commit levels of run medians through the change-point
engine."""

from __future__ import annotations

from collections.abc import Sequence

from kernelwatch.vocabulary import ChangeKind, Polarity
from service.detect.changepoints import ChangePointParams, commit_runs, detect_levels
from service.detect.types import ChangePoint, SeriesPoint


class EDivisiveDetector:
    """E-divisive means with a t-test on Hampel-damped log levels (see ``changepoints``). A commit's level is
    the geometric mean of its runs' medians, and the test counts runs (``edivisive``): a pooled median of every
    sample would let whichever run took the most samples speak for the commit."""

    name = "edivisive"
    # 1: the median of every sample of a commit, pooled across runs; the test counted commits. 2: a level of fewer
    # than min_side commits at a window's end could place a change a commit before the real one.
    version = 3

    def __init__(self, params: ChangePointParams | None = None) -> None:
        self.params = params or ChangePointParams()

    def detect(self, points: Sequence[SeriesPoint], polarity: Polarity) -> list[ChangePoint]:
        usable = [p for p in sorted(points, key=lambda p: p.position) if len(p.samples) > 0]
        if not usable:
            return []
        runs = commit_runs([p.run_medians() for p in usable])
        changes = []
        for change in detect_levels(runs.levels, self.params, runs=runs.runs, within=runs.within):
            worse = (change.after > change.before if polarity == Polarity.LOWER_IS_BETTER
                     else change.after < change.before)
            changes.append(ChangePoint(
                index=change.index,
                commit_id=usable[change.index].commit_id,
                previous_commit_id=usable[change.index - 1].commit_id,
                before=change.before,
                after=change.after,
                magnitude=change.magnitude,
                noise_units=change.noise_units,
                kind=ChangeKind.REGRESSION if worse else ChangeKind.IMPROVEMENT,
                p_value=change.p_value,
            ))
        return changes
