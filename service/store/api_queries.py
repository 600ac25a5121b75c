"""Read-side queries of the HTTP API that the pages do not share, returning plain dataclasses."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from runners.host_health import heavy
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


@dataclass(frozen=True)
class RepositoryView:
    id: int
    name: str
    url: str
    default_branch: str
    commits: int
    runs: int
    first_commits: list[str]  # the root commits of its stored histories (what tells two projects of one name apart)


@dataclass(frozen=True)
class RunView:
    run_id: str
    repository: str
    commit_sha: str
    commit_subject: str
    commit_position: int
    branch: str | None
    trigger: str
    pr_number: int | None
    status: str
    started_at: datetime
    finished_at: datetime
    environment: dict[str, Any]
    results: int
    # How healthy the host was while the run measured, as its manifest reported it (steal_fraction,
    # busy_fraction, load_1m, cores, gpus); None for runners that could not read it. heavy_steal: whether the
    # steal reached runners.host_health.HEAVY_STEAL_FRACTION.
    host_health: dict[str, Any] | None = None
    heavy_steal: bool = False


@dataclass(frozen=True)
class ArtifactView:
    kind: str
    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class ResultView:
    series_id: int
    suite: str
    name: str
    params: dict[str, Any]
    metric: str
    unit: str
    direction: str
    status: str
    message: str | None
    samples: list[float]
    sample_count: int
    median: float | None
    mean: float | None
    stddev: float | None
    minimum: float | None
    maximum: float | None
    compile_time_s: float | None
    flops: float | None
    bytes_accessed: float | None
    max_abs_error: float | None
    cost: dict[str, float]
    artifacts: list[ArtifactView]


def repositories(session: Session) -> list[RepositoryView]:
    commits = (select(Commit.repository_id, func.count(Commit.id).label("n"))
               .group_by(Commit.repository_id).subquery())
    runs = (select(Commit.repository_id, func.count(Run.id).label("n")).join(Run, Run.commit_id == Commit.id)
            .group_by(Commit.repository_id).subquery())
    rows = session.execute(
        select(Repository, commits.c.n, runs.c.n)
        .outerjoin(commits, commits.c.repository_id == Repository.id)
        .outerjoin(runs, runs.c.repository_id == Repository.id)
        .order_by(Repository.name)
    ).all()
    return [RepositoryView(id=r.id, name=r.name, url=r.url, default_branch=r.default_branch, commits=nc or 0,
                           runs=nr or 0, first_commits=list(r.first_commits)) for r, nc, nr in rows]


def run_view(session: Session, run_uid: str) -> RunView | None:
    row = session.execute(
        select(Run, Commit, Repository.name, Environment)
        .join(Commit, Commit.id == Run.commit_id)
        .join(Repository, Repository.id == Commit.repository_id)
        .join(Environment, Environment.id == Run.environment_id)
        .where(Run.run_uid == run_uid)
    ).first()
    if row is None:
        return None
    run, commit, repo, env = row
    count = session.scalar(select(func.count(Result.id)).where(Result.run_id == run.id)) or 0
    return RunView(run_id=run.run_uid, repository=repo, commit_sha=commit.sha, commit_subject=commit.subject,
                   commit_position=commit.position, branch=run.branch, trigger=run.trigger, pr_number=run.pr_number,
                   status=run.status, started_at=run.started_at, finished_at=run.finished_at,
                   environment={"fingerprint": env.fingerprint, **env.details}, results=count,
                   host_health=run.host_health, heavy_steal=heavy(run.host_health))


def run_results(session: Session, run_uid: str) -> list[ResultView] | None:
    """Every result of a run with its samples and artifacts; None when there is no such run."""
    run_id = session.scalar(select(Run.id).where(Run.run_uid == run_uid))
    if run_id is None:
        return None
    rows = session.execute(
        select(Result, Series.metric, Series.unit, Series.direction, Benchmark)
        .join(Series, Series.id == Result.series_id)
        .join(Benchmark, Benchmark.id == Series.benchmark_id)
        .where(Result.run_id == run_id)
        .order_by(Benchmark.suite, Benchmark.name, Benchmark.params_key, Series.metric)
    ).all()
    artifacts: dict[int, list[ArtifactView]] = defaultdict(list)
    for result_id, name, a in session.execute(
        select(ResultArtifact.result_id, ResultArtifact.name, Artifact)
        .join(Artifact, Artifact.id == ResultArtifact.artifact_id)
        .join(Result, Result.id == ResultArtifact.result_id)
        .where(Result.run_id == run_id)
        .order_by(ResultArtifact.name)
    ).all():
        artifacts[result_id].append(ArtifactView(kind=a.kind, name=name, sha256=a.sha256, size=a.size))
    return [
        ResultView(series_id=r.series_id, suite=b.suite, name=b.name, params=dict(b.params), metric=metric, unit=unit,
                   direction=direction, status=r.status, message=r.message, samples=list(r.samples),
                   sample_count=r.sample_count, median=r.median, mean=r.mean, stddev=r.stddev, minimum=r.minimum,
                   maximum=r.maximum, compile_time_s=r.compile_time_s, flops=r.flops,
                   bytes_accessed=r.bytes_accessed, max_abs_error=r.max_abs_error, cost=dict(r.cost or {}),
                   artifacts=artifacts.get(r.id, []))
        for r, metric, unit, direction, b in rows
    ]

