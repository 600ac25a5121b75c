"""Re-examine series after new results arrive, and store what the detector says as findings.

Reads the series' default-branch history, runs the pure detector, and replaces this detector's findings on
the series with the new set in one transaction: running it twice on the same data changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from runners.artifacts import ArtifactStore
from service.detect.types import Detector, SeriesPoint
from service.model.result_roofline import EFFICIENCY_METRIC
from service.pipeline.alerts import GroupingOutcome, group_series
from service.pipeline.attribution import attribute_findings, findings_of_series
from service.pipeline.static_detection import STATIC_DETECTOR, detect_static
from service.store.locks import lock_series
from service.store.models import Commit, Finding, Repository, Result, Run, Series

# Metrics that measure speed; any other metric a benchmark reports (rel_error, recall...) measures its numerics,
# which regress too: a low-precision kernel that loses accuracy is flagged even when it got faster.
SPEED_METRICS = frozenset({"wall_time", "device_time", "execution_time", "algbw"})
# Efficiency (the roofline_fraction series ingest derives from wall time) is a kind of its own rather than "time":
# it moves with time at fixed counts, but also when the counts or a host's calibrated roof move, and a bisection
# (which re-measures time, service/pipeline/bisect.py) is owed to time findings only.
STATISTICAL_KINDS = ("time", "numerics", "efficiency")


def finding_kind(metric: str) -> str:
    if metric == EFFICIENCY_METRIC:
        return "efficiency"
    return "time" if metric in SPEED_METRICS else "numerics"


def default_branch_points(session: Session, series: Series) -> list[SeriesPoint]:
    """Per commit on the repository's default branch, every ok sample of the series, pooled across runs."""
    rows = session.execute(
        select(Commit.id, Commit.position, Result.samples)
        .join(Run, Run.id == Result.run_id)
        .join(Commit, Commit.id == Run.commit_id)
        .join(Repository, Repository.id == Commit.repository_id)
        .where(Result.series_id == series.id, Result.status == "ok", Run.branch == Repository.default_branch)
    ).all()
    pooled: dict[tuple[int, int], list[float]] = defaultdict(list)
    for commit_id, position, samples in rows:
        pooled[(position, commit_id)].extend(samples)
    return [SeriesPoint(position=pos, commit_id=cid, samples=s) for (pos, cid), s in sorted(pooled.items())]


def detect_series(session: Session, series_id: int, detector: Detector) -> list[int]:
    """Run ``detector`` on one series and make its stored findings match; returns the finding ids."""
    series = session.get(Series, series_id)
    if series is None:
        return []
    points = default_branch_points(session, series)
    changes = detector.detect(points, series.direction)  # type: ignore[arg-type]

    # Findings of a detector this service no longer runs (an older engine) would otherwise stay forever.
    session.execute(delete(Finding).where(Finding.series_id == series_id, Finding.kind.in_(STATISTICAL_KINDS),
                                          Finding.detector != detector.name))
    existing = {
        f.commit_id: f
        for f in session.scalars(select(Finding).filter_by(series_id=series_id, detector=detector.name))
    }
    kind = finding_kind(series.metric)
    keep: set[int] = set()
    now = datetime.now(UTC)
    for change in changes:
        finding = existing.get(change.commit_id)
        if finding is None:
            finding = Finding(series_id=series_id, commit_id=change.commit_id, detector=detector.name,
                              kind=kind, created_at=now, attribution={})
            session.add(finding)
        finding.previous_commit_id = change.previous_commit_id
        finding.detector_version = detector.version
        finding.direction = change.kind
        finding.magnitude = change.magnitude
        finding.confidence = change.noise_units
        finding.p_value = change.p_value
        finding.value_before = change.before
        finding.value_after = change.after
        keep.add(change.commit_id)
    stale = [cid for cid in existing if cid not in keep]
    if stale:
        session.execute(delete(Finding).where(Finding.series_id == series_id, Finding.detector == detector.name,
                                              Finding.commit_id.in_(stale)))
    session.flush()
    return [f.id for f in session.scalars(select(Finding).filter_by(series_id=series_id, detector=detector.name))]


def detect_many(session: Session, series_ids: Sequence[int], detector: Detector,
                artifacts: ArtifactStore | None = None,
                on_grouped: Callable[[Session, GroupingOutcome], object] | None = None) -> int:
    """Detect, attribute and group, in the caller's transaction. ``on_grouped`` sees what grouping changed, in
    that same transaction: notification marks the alerts it owes a message there, so they commit together."""
    lock_series(session, series_ids)
    found = sum(len(detect_series(session, sid, detector)) for sid in series_ids)
    # Static findings (exact code diffs) and every finding's attribution, before grouping so that static
    # findings join their commit range's alert. Both idempotent, both cheap when nothing changed; with
    # ``artifacts`` the attribution also diffs the changed kernels' disassembly.
    detect_static(session, series_ids, artifacts)
    attribute_findings(session, findings_of_series(session, series_ids, exclude_detector=STATIC_DETECTOR), artifacts)
    outcome = group_series(session, series_ids)  # findings at one commit range become one alert, in this transaction
    if on_grouped is not None:
        on_grouped(session, outcome)
    return found
