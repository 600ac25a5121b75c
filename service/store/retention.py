"""What retention reads and marks (service/pipeline/prune.py has the rules): when each artifact was last used,
the artifacts open alerts and each series' newest run need, and the ``pruned_at`` mark."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select, union, update
from sqlalchemy.orm import Session

from service.store.chunks import chunks
from service.store.models import Alert, Artifact, Finding, Result, ResultArtifact, Run, Series


def old_artifacts(session: Session, cutoff: datetime) -> list[tuple[int, str, str, int, datetime | None]]:
    """(id, sha256, kind, size, pruned_at) of the artifacts every run referencing them finished before
    ``cutoff``, and of those no result references that were stored before it; by id."""
    last_use = (select(ResultArtifact.artifact_id.label("artifact_id"), func.max(Run.finished_at).label("last_used"))
                .join(Result, Result.id == ResultArtifact.result_id).join(Run, Run.id == Result.run_id)
                .group_by(ResultArtifact.artifact_id).subquery())
    rows = session.execute(
        select(Artifact.id, Artifact.sha256, Artifact.kind, Artifact.size, Artifact.pruned_at)
        .outerjoin(last_use, last_use.c.artifact_id == Artifact.id)
        .where(or_(last_use.c.last_used < cutoff,
                   and_(last_use.c.last_used.is_(None), Artifact.created_at < cutoff)))
        .order_by(Artifact.id))
    return [(id_, sha, kind, size, pruned_at) for id_, sha, kind, size, pruned_at in rows]


def _open_finding(open_states: Sequence[str]) -> Any:
    """A finding of an open alert, or of none yet."""
    return or_(Finding.alert_id.is_(None), Finding.alert_id.in_(select(Alert.id).where(Alert.state.in_(open_states))))


def artifacts_at_open_commits(session: Session, open_states: Sequence[str]) -> set[int]:
    """The artifacts of every run at a commit an open alert, or a finding of one (or of none yet), names: its
    commit or the commit before."""
    open_alert = Alert.state.in_(open_states)
    open_finding = _open_finding(open_states)
    commits = union(select(Alert.commit_id).where(open_alert),
                    select(Alert.previous_commit_id).where(open_alert),
                    select(Finding.commit_id).where(open_finding),
                    select(Finding.previous_commit_id).where(open_finding)).subquery()
    return set(session.scalars(
        select(ResultArtifact.artifact_id).join(Result, Result.id == ResultArtifact.result_id)
        .join(Run, Run.id == Result.run_id).where(Run.commit_id.in_(select(commits.c[0])))))


def open_finding_attributions(session: Session, open_states: Sequence[str]) -> Sequence[dict[str, Any] | None]:
    """The stored attribution of every finding of an open alert (or of none yet)."""
    return session.scalars(select(Finding.attribution).where(_open_finding(open_states))).all()


def artifacts_of_results(session: Session, result_ids: Sequence[int]) -> set[int]:
    found: set[int] = set()
    for chunk in chunks(result_ids):
        found.update(session.scalars(select(ResultArtifact.artifact_id).where(ResultArtifact.result_id.in_(chunk))))
    return found


def artifacts_of_newest_runs(session: Session) -> set[int]:
    """The artifacts behind each series' newest ok result: those captured in its run for its benchmark and
    environment (a run's other metrics show the records of the result that captured them)."""
    ranked = (select(Result.run_id, Series.benchmark_id, Series.environment_id,
                     func.row_number().over(partition_by=Result.series_id,
                                            order_by=(Run.finished_at.desc(), Run.id.desc())).label("rank"))
              .join(Run, Run.id == Result.run_id).join(Series, Series.id == Result.series_id)
              .where(Result.status == "ok").subquery())
    newest = (select(ranked.c.run_id, ranked.c.benchmark_id, ranked.c.environment_id)
              .where(ranked.c.rank == 1).distinct().subquery())
    return set(session.scalars(
        select(ResultArtifact.artifact_id).join(Result, Result.id == ResultArtifact.result_id)
        .join(Series, Series.id == Result.series_id)
        .join(newest, and_(newest.c.run_id == Result.run_id, newest.c.benchmark_id == Series.benchmark_id,
                           newest.c.environment_id == Series.environment_id))))


def mark_pruned(session: Session, artifact_ids: Sequence[int], stamp: datetime) -> int:
    """Mark these artifacts pruned at ``stamp`` where they are not yet; how many were marked."""
    marked = 0
    for chunk in chunks(artifact_ids):
        result = session.execute(update(Artifact).where(Artifact.id.in_(chunk), Artifact.pruned_at.is_(None))
                                 .values(pruned_at=stamp).execution_options(synchronize_session=False))
        marked += int(getattr(result, "rowcount", 0) or 0)
    return marked
