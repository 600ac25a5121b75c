"""Manifest → database, in one transaction, idempotently.

Submitting the same run (same ``run_id``, same content) again changes nothing and says so; the same
``run_id`` with different content is a Conflict. Rows shared between runs (repository, commit, environment,
benchmark, series) are created on first sight, tolerating a concurrent ingest that creates them first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.contract import ArtifactInfo, BenchmarkResult, Manifest
from service.detect.summary import summarize
from service.errors import Conflict
from service.pipeline.identity import environment_fingerprint, manifest_digest, series_key
from service.store.models import (
    Artifact,
    Benchmark,
    Commit,
    Environment,
    Repository,
    Result,
    ResultArtifact,
    Run,
    Series,
)

T = TypeVar("T")


@dataclass(frozen=True)
class IngestOutcome:
    run_id: int
    created: bool
    series_ids: list[int] = field(default_factory=list)  # series that received a new ok result
    captured_result_ids: list[int] = field(default_factory=list)  # new results with artifacts to parse


def _get_or_create(session: Session, model: type[T], lookup: dict[str, Any], build: Callable[[], T]) -> T:
    stmt = select(model).filter_by(**lookup)
    found = session.scalars(stmt).first()
    if found is not None:
        return found
    try:
        # A savepoint, so losing a race to a concurrent ingest costs only this insert.
        with session.begin_nested():
            obj = build()
            session.add(obj)
        return obj
    except IntegrityError:
        return session.scalars(stmt).one()


def _benchmark_for(session: Session, r: BenchmarkResult) -> Benchmark:
    params_key = r.params_key()
    return _get_or_create(
        session, Benchmark, {"suite": r.suite, "name": r.name, "params_key": params_key},
        partial(Benchmark, suite=r.suite, name=r.name, params_key=params_key, params=dict(r.params), unit=r.unit,
                direction=r.direction),
    )


def _link_artifacts(session: Session, result: Result, artifacts: list[ArtifactInfo]) -> None:
    now = datetime.now(UTC)
    seen: set[tuple[int, str]] = set()
    for info in artifacts:
        artifact = _get_or_create(
            session, Artifact, {"sha256": info.sha256},
            partial(Artifact, sha256=info.sha256, kind=info.kind, size=info.size, created_at=now),
        )
        if (artifact.id, info.name) not in seen:  # the same bytes under the same name, listed twice
            seen.add((artifact.id, info.name))
            session.add(ResultArtifact(result_id=result.id, artifact_id=artifact.id, name=info.name))


def ingest_manifest(session: Session, manifest: Manifest) -> IngestOutcome:
    """Store one validated manifest; the caller owns the transaction (commit or roll back as a whole)."""
    digest = manifest_digest(manifest.model_dump(mode="json"))
    existing = session.scalars(select(Run).filter_by(run_uid=manifest.run_id)).first()
    if existing is not None:
        if existing.manifest_digest != digest:
            raise Conflict(f"run {manifest.run_id} was already submitted with different content")
        return IngestOutcome(run_id=existing.id, created=False)

    repo_info = manifest.repository
    repository = _get_or_create(
        session, Repository, {"name": repo_info.name},
        lambda: Repository(name=repo_info.name, url=repo_info.url, default_branch=repo_info.default_branch),
    )
    c = manifest.commit
    commit = _get_or_create(
        session, Commit, {"repository_id": repository.id, "sha": c.sha},
        lambda: Commit(repository_id=repository.id, sha=c.sha, parents=list(c.parents), author=c.author,
                       authored_at=c.authored_at, subject=c.subject, position=c.position),
    )
    env = manifest.environment
    fingerprint = environment_fingerprint(env.identity())
    environment = _get_or_create(
        session, Environment, {"fingerprint": fingerprint},
        lambda: Environment(fingerprint=fingerprint, backend=env.backend, device_kind=env.device_kind,
                            device_count=env.device_count, details=env.identity()),
    )
    run = Run(
        run_uid=manifest.run_id, manifest_digest=digest, commit_id=commit.id, environment_id=environment.id,
        branch=manifest.branch, trigger=manifest.trigger, pr_number=manifest.pr_number, status=manifest.status,
        started_at=manifest.started_at, finished_at=manifest.finished_at, host_details=dict(env.extra),
    )
    session.add(run)
    session.flush()

    touched: list[int] = []
    captured: list[int] = []
    for r in manifest.results:
        benchmark = _benchmark_for(session, r)
        key = series_key(repository.name, r.suite, r.name, r.params_key(), r.metric, fingerprint)
        series = _get_or_create(
            session, Series, {"key": key},
            partial(Series, key=key, repository_id=repository.id, benchmark_id=benchmark.id,
                    environment_id=environment.id, metric=r.metric, unit=r.unit, direction=r.direction),
        )
        stats = summarize(r.samples)
        result = Result(
            run_id=run.id, series_id=series.id, status=r.status, message=r.message, samples=list(r.samples),
            sample_count=stats.count, median=stats.median, mean=stats.mean, stddev=stats.stddev,
            minimum=stats.minimum, maximum=stats.maximum, compile_time_s=r.compile_time_s, flops=r.flops,
            bytes_accessed=r.bytes_accessed, max_abs_error=r.max_abs_error, cost=dict(r.cost),
        )
        session.add(result)
        if r.artifacts:
            session.flush()
            _link_artifacts(session, result, r.artifacts)
            captured.append(result.id)
        if r.status == "ok":
            touched.append(series.id)
    session.flush()
    return IngestOutcome(run_id=run.id, created=True, series_ids=sorted(set(touched)), captured_result_ids=captured)
