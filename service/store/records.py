"""The records parsed from a result's artifacts (op stats, HLO modules, kernel code), as attribution and static
detection read them back (service/pipeline/result_records.py): by benchmark and environment, per result."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.store.chunks import chunks
from service.store.models import Artifact, Commit, KernelCode, Repository, Result, ResultArtifact, Run, Series


@dataclass(frozen=True)
class ResultAt:
    """A result of a benchmark, and the commit its run measured."""

    id: int
    sample_count: int
    commit_id: int
    position: int


def benchmark_results(session: Session, benchmark_id: int, environment_id: int,
                      commit_ids: Sequence[int] | None = None, default_branch_only: bool = False) -> list[ResultAt]:
    """Every result of the benchmark's series in the environment (at these commits, if given; in runs on the
    repository's default branch, with ``default_branch_only``), by id."""
    query = (select(Result.id, Result.sample_count, Run.commit_id, Commit.position)
             .join(Run, Run.id == Result.run_id).join(Series, Series.id == Result.series_id)
             .join(Commit, Commit.id == Run.commit_id)
             .where(Series.benchmark_id == benchmark_id, Series.environment_id == environment_id))
    if commit_ids is not None:
        query = query.where(Run.commit_id.in_(list(commit_ids)))
    if default_branch_only:
        query = (query.join(Repository, Repository.id == Commit.repository_id)
                 .where(Run.branch == Repository.default_branch))
    return [ResultAt(id=r.id, sample_count=r.sample_count, commit_id=r.commit_id, position=r.position)
            for r in session.execute(query.order_by(Result.id))]


def artifact_states(session: Session, result_ids: Sequence[int]) -> list[tuple[int, str, int | None, str | None]]:
    """(result id, artifact kind, the parser version that read it for the result, its parse error) of every
    artifact of these results."""
    found: list[tuple[int, str, int | None, str | None]] = []
    for chunk in chunks(result_ids):
        found += [(result_id, kind, parsed, error) for result_id, kind, parsed, error in session.execute(
            select(ResultArtifact.result_id, Artifact.kind, ResultArtifact.parsed_version, Artifact.parse_error)
            .join(Artifact, Artifact.id == ResultArtifact.artifact_id).where(ResultArtifact.result_id.in_(chunk)))]
    return found


def records_by_result(session: Session, table: Any, result_ids: Sequence[int]) -> dict[int, list[Any]]:
    """The rows of a records table (OpStat, HloModuleRecord, KernelCode) of these results, per result, by id."""
    out: dict[int, list[Any]] = defaultdict(list)
    for chunk in chunks(result_ids):
        for row in session.scalars(select(table).where(table.result_id.in_(chunk)).order_by(table.id)):
            out[row.result_id].append(row)
    return out


@dataclass(frozen=True)
class KernelSource:
    """The artifact a kernel's record was parsed from, and the name the result gave it."""

    artifact_id: int
    kind: str
    sha256: str
    name: str
    symbol: str  # the kernel's name in that artifact (a GPU kernel's record bears its fusion's name)


def kernel_source(session: Session, result_id: int, isa: str, name: str) -> KernelSource | None:
    row = session.execute(
        select(KernelCode.artifact_id, Artifact.kind, Artifact.sha256, ResultArtifact.name, KernelCode.details)
        .join(Artifact, Artifact.id == KernelCode.artifact_id)
        .join(ResultArtifact, (ResultArtifact.artifact_id == Artifact.id)
              & (ResultArtifact.result_id == KernelCode.result_id))
        .where(KernelCode.result_id == result_id, KernelCode.isa == isa, KernelCode.name == name)
    ).first()
    if row is None:
        return None
    symbol = (row.details or {}).get("symbol")
    return KernelSource(artifact_id=row.artifact_id, kind=row.kind, sha256=row.sha256, name=row.name,
                        symbol=symbol if isinstance(symbol, str) else name)
