"""A result's artifacts in the store, as parsing reads and replaces what they yielded: the links of a result, the
records parsed from them, and the results whose parse is owed (service/pipeline/parse_artifacts.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, exists, select
from sqlalchemy.orm import Session

from service.store.models import Artifact, HloModuleRecord, KernelCode, OpStat, Result, ResultArtifact, Run


def links_of(session: Session, result_id: int) -> list[tuple[ResultArtifact, Artifact]]:
    """The result's artifact links with their artifacts, by the name the result gave each."""
    return [(link, artifact) for link, artifact in session.execute(
        select(ResultArtifact, Artifact).join(Artifact, Artifact.id == ResultArtifact.artifact_id)
        .where(ResultArtifact.result_id == result_id).order_by(ResultArtifact.name))]


def delete_records(session: Session, result_id: int) -> None:
    """Remove every record parsed for the result (op stats, kernel code, HLO modules)."""
    for table in (OpStat, KernelCode, HloModuleRecord):
        session.execute(delete(table).where(table.result_id == result_id))


def parse_states(session: Session) -> list[tuple[int, str, int | None, datetime | None]]:
    """(result id, artifact kind, the parser version that read it for the result, when retention pruned it) of
    every artifact link."""
    return [(result_id, kind, parsed, pruned_at) for result_id, kind, parsed, pruned_at in session.execute(
        select(ResultArtifact.result_id, Artifact.kind, ResultArtifact.parsed_version, Artifact.pruned_at)
        .join(Artifact, Artifact.id == ResultArtifact.artifact_id))]


def unread_results(session: Session, kinds: Sequence[str], finished_before: datetime, limit: int) -> list[int]:
    """Results of runs finished before ``finished_before`` with an artifact of these kinds never parsed for them,
    and none pruned; by id, at most ``limit``."""
    pruned = (select(ResultArtifact.result_id).join(Artifact, Artifact.id == ResultArtifact.artifact_id)
              .where(ResultArtifact.result_id == Result.id, Artifact.pruned_at.is_not(None)))
    return list(session.scalars(
        select(ResultArtifact.result_id).distinct()
        .join(Artifact, Artifact.id == ResultArtifact.artifact_id)
        .join(Result, Result.id == ResultArtifact.result_id).join(Run, Run.id == Result.run_id)
        .where(ResultArtifact.parsed_version.is_(None), Artifact.kind.in_(sorted(kinds)),
               Run.finished_at < finished_before, ~exists(pruned))
        .order_by(ResultArtifact.result_id).limit(limit)))


def unparsed_of(session: Session, result_ids: Sequence[int]) -> set[int]:
    """The results among these with an artifact not parsed for them yet."""
    return set(session.scalars(
        select(ResultArtifact.result_id).join(Artifact, Artifact.id == ResultArtifact.artifact_id)
        .where(ResultArtifact.result_id.in_(list(result_ids)), ResultArtifact.parsed_version.is_(None))))
