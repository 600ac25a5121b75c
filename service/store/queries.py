"""Read-side queries for the faces, returning plain dataclasses (no ORM objects leak out of a session)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.store.models import Benchmark, BisectJob, Commit, Environment, Finding, Repository, Result, Run, Series


@dataclass(frozen=True)
class FindingView:
    id: int
    series_id: int
    series_label: str
    metric: str
    commit_sha: str
    commit_subject: str
    previous_sha: str | None
    direction: str
    magnitude: float
    confidence: float
    value_before: float
    value_after: float
    unit: str
    detector: str
    detector_version: int
    kind: str = "time"  # time | numerics | static
    p_value: float | None = None
    confirmation: str | None = None  # confirmed | refuted, once base and head were re-run interleaved

    @property
    def confidence_label(self) -> str:
        return {"confirmed": "confirmed", "refuted": "refuted by re-run"}.get(self.confirmation or "", "")

    @property
    def flags_commit(self) -> bool:
        """A regression a person should look at: measured (time or numerics, not a code diff, which explains
        rather than flags) and not refuted by re-running base and head."""
        return self.direction == "regression" and self.kind != "static" and self.confirmation != "refuted"


@dataclass(frozen=True)
class CommitView:
    repository: str
    sha: str
    subject: str
    author: str
    authored_at: datetime
    position: int
    runs: int
    findings: list[FindingView] = field(default_factory=list)


@dataclass(frozen=True)
class SeriesPointView:
    sha: str
    subject: str
    position: int
    samples: list[float]
    median: float


@dataclass(frozen=True)
class SeriesView:
    id: int
    label: str
    repository: str
    metric: str
    unit: str
    direction: str
    environment: str
    points: list[SeriesPointView]
    findings: list[FindingView]


def series_label(benchmark: Benchmark) -> str:
    return label_of(benchmark.suite, benchmark.name, benchmark.params)


def label_of(suite: str, name: str, params: dict[str, object]) -> str:
    text = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
    return f"{suite}/{name}[{text}]" if text else f"{suite}/{name}"


def _finding_views(session: Session, *conditions: object) -> list[FindingView]:
    prev = Commit.__table__.alias("prev")
    # The series' columns, not the Series entity: its eagerly joined repository, benchmark and environment
    # would cost three joins and three objects per finding.
    rows = session.execute(
        select(Finding, Series.metric, Series.unit, Benchmark.suite, Benchmark.name, Benchmark.params, Commit.sha,
               Commit.subject, prev.c.sha)
        .join(Series, Series.id == Finding.series_id)
        .join(Benchmark, Benchmark.id == Series.benchmark_id)
        .join(Commit, Commit.id == Finding.commit_id)
        .outerjoin(prev, prev.c.id == Finding.previous_commit_id)
        .where(*conditions)  # type: ignore[arg-type]
        .order_by(Finding.magnitude.desc())
    ).all()
    verdicts = _confirmations(session, {f.series_id for f, *_ in rows})
    return [
        FindingView(
            id=f.id, series_id=f.series_id, series_label=label_of(suite, name, params), metric=metric,
            commit_sha=sha, commit_subject=subject,
            previous_sha=prev_sha, direction=f.direction, magnitude=f.magnitude, confidence=f.confidence,
            value_before=f.value_before, value_after=f.value_after, unit=unit, detector=f.detector,
            detector_version=f.detector_version, kind=f.kind, p_value=f.p_value,
            confirmation=verdicts.get((f.series_id, prev_sha, sha)),
        )
        for f, metric, unit, suite, name, params, sha, subject, prev_sha in rows
    ]


def _confirmations(session: Session, series_ids: set[int]) -> dict[tuple[int, str, str], str]:
    """What re-running base and head said, per (series, base sha, head sha), where a confirmation finished."""
    if not series_ids:
        return {}
    jobs = session.scalars(select(BisectJob).where(BisectJob.series_id.in_(series_ids),
                                                   BisectJob.purpose == "confirm", BisectJob.state == "done"))
    return {(j.series_id, j.good_commit_sha, j.bad_commit_sha): "confirmed" if j.culprit_sha else "refuted"
            for j in jobs}


def all_findings(session: Session) -> list[FindingView]:
    return _finding_views(session)


def recent_commits(session: Session, limit: int = 100, repository: str | None = None) -> list[CommitView]:
    """Measured commits, newest first, each with its findings; ``repository`` (a name) narrows them to one."""
    where = [] if repository is None else [Repository.name == repository]
    rows = session.execute(
        select(Commit, Repository.name, func.count(Run.id))
        .join(Repository, Repository.id == Commit.repository_id)
        .join(Run, Run.commit_id == Commit.id)
        .where(*where)
        .group_by(Commit.id, Repository.name)
        .order_by(Commit.authored_at.desc(), Commit.position.desc())
        .limit(limit)
    ).all()
    ids = [c.id for c, _, _ in rows]
    by_commit: dict[str, list[FindingView]] = defaultdict(list)
    if ids:
        # Findings that flag the commit first (a person opens those), then code diffs and improvements.
        views = _finding_views(session, Finding.commit_id.in_(ids))
        for f in sorted(views, key=lambda f: not f.flags_commit):
            by_commit[f.commit_sha].append(f)
    return [
        CommitView(repository=repo, sha=c.sha, subject=c.subject, author=c.author, authored_at=c.authored_at,
                   position=c.position, runs=n, findings=by_commit.get(c.sha, []))
        for c, repo, n in rows
    ]


def series_view(session: Session, series_id: int) -> SeriesView | None:
    series = session.get(Series, series_id)
    if series is None:
        return None
    rows = session.execute(
        select(Commit.sha, Commit.subject, Commit.position, Result.samples)
        .join(Run, Run.id == Result.run_id)
        .join(Commit, Commit.id == Run.commit_id)
        .join(Repository, Repository.id == Commit.repository_id)
        .where(Result.series_id == series_id, Result.status == "ok", Run.branch == Repository.default_branch)
        .order_by(Commit.position)
    ).all()
    pooled: dict[str, tuple[str, int, list[float]]] = {}
    for sha, subject, position, samples in rows:
        pooled.setdefault(sha, (subject, position, []))[2].extend(samples)
    points = []
    for sha, (subject, position, samples) in sorted(pooled.items(), key=lambda kv: kv[1][1]):
        points.append(SeriesPointView(sha=sha, subject=subject, position=position, samples=samples,
                                      median=statistics.median(samples)))
    env: Environment = series.environment
    return SeriesView(
        id=series.id, label=series_label(series.benchmark), repository=series.repository.name,
        metric=series.metric, unit=series.unit, direction=series.direction,
        environment=f"{env.backend} · {env.device_kind} ×{env.device_count}",
        points=points, findings=_finding_views(session, Finding.series_id == series_id),
    )

