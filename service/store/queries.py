"""Read-side queries for the faces, returning plain dataclasses (no ORM objects leak out of a session)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, case, exists, func, select
from sqlalchemy.orm import Session

from kernelwatch.hardware import hardware_label
from service.report.alert_views import change_word
from service.store.chunks import chunks
from service.store.models import (
    Alert,
    Benchmark,
    BisectJob,
    Commit,
    Environment,
    Finding,
    Repository,
    Result,
    Run,
    Series,
)
from service.store.read_filters import (
    Page,
    ReadFilters,
    before,
    environment_ids,
    repository_ids,
    time_window,
)
from service.store.runs import of_the_commit
from service.store.times import utc

FindingKey = tuple[datetime, int]  # (created_at, id): where a page of findings ends
CommitKey = tuple[datetime, int, int]  # (authored_at, position, id): where a page of commits ends
FINDING_ORDER = (Finding.created_at, Finding.id)  # newest first: each descending, as ix_finding_created serves
COMMIT_ORDER = (Commit.authored_at, Commit.position, Commit.id)  # as ix_commit_authored serves
ID_CHUNK = 500  # ids per IN (...) list


@dataclass(frozen=True)
class FindingView:
    id: int
    series_id: int
    series_label: str
    metric: str
    commit_sha: str
    commit_subject: str
    previous_sha: str | None
    direction: str  # a ChangeKind: regression | improvement
    magnitude: float
    confidence: float  # noise units, not a confidence level: the stored column's and the API field's name
    value_before: float
    value_after: float
    unit: str
    detector: str
    detector_version: int
    kind: str = "time"  # time | numerics | static | efficiency
    p_value: float | None = None
    confirmation: str | None = None  # confirmed | refuted, once base and head were re-run interleaved
    repository: str = ""
    hardware: str = ""  # the series' environment's device kind
    alert_id: int | None = None  # the alert grouping put it in
    created_at: datetime | None = None  # when detection first found it

    @property
    def confidence_label(self) -> str:
        return {"confirmed": "confirmed", "refuted": "refuted by re-run"}.get(self.confirmation or "", "")

    @property
    def change_word(self) -> str:
        """Its direction as its badge says it: a code (static) finding's says which way the code moved."""
        return change_word(self.direction, self.magnitude, self.kind == "static")

    @property
    def is_regression(self) -> bool:
        """A regression of any kind, a code diff's too, that re-running base and head did not refute."""
        return self.direction == "regression" and self.confirmation != "refuted"

    @property
    def flags_commit(self) -> bool:
        """A regression a person should look at first: measured (time or numerics, not a code diff, which
        explains rather than flags) and not refuted by re-running base and head."""
        return self.is_regression and self.kind != "static"


@dataclass(frozen=True)
class CommitView:
    repository: str
    sha: str
    subject: str
    author: str
    authored_at: datetime
    position: int
    runs: int
    findings: list[FindingView] = field(default_factory=list)  # the first findings_limit, when one was given
    finding_count: int = 0  # all of them

    @property
    def flagged(self) -> bool:
        """A regression that re-running did not refute, as its alert's kind reads it: a code diff's counts only
        where the commit has no measured finding (code that grew beside a speed-up is no regression)."""
        measured = [f for f in self.findings if f.kind != "static"]
        return any(f.is_regression for f in (measured or self.findings))


@dataclass(frozen=True)
class SeriesPointView:
    sha: str
    subject: str
    position: int
    samples: list[float]
    median: float
    result_ids: list[int] = field(default_factory=list)  # the results pooled into the point, oldest first


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


def finding_metric_columns() -> tuple[ColumnElement[str], ColumnElement[str]]:
    """A finding's metric and unit, labelled ``metric`` and ``unit``: its own where it has them (a static finding
    counts instructions or bundles on a time series), else its series'. Every view of findings reads these."""
    return (func.coalesce(Finding.metric, Series.metric).label("metric"),
            func.coalesce(Finding.unit, Series.unit).label("unit"))


def _finding_views(session: Session, *conditions: ColumnElement[bool],
                   order_by: Sequence[ColumnElement[Any]] = (Finding.magnitude.desc(),),
                   limit: int | None = None) -> list[FindingView]:
    prev = Commit.__table__.alias("prev")
    # The series' columns, not the Series entity: its eagerly joined repository, benchmark and environment
    # would cost three joins and three objects per finding.
    stmt = (
        select(Finding, *finding_metric_columns(), Benchmark.suite, Benchmark.name, Benchmark.params, Commit.sha,
               Commit.subject, prev.c.sha, Repository.name, Environment.device_kind)
        .join(Series, Series.id == Finding.series_id)
        .join(Benchmark, Benchmark.id == Series.benchmark_id)
        .join(Repository, Repository.id == Series.repository_id)
        .join(Environment, Environment.id == Series.environment_id)
        .join(Commit, Commit.id == Finding.commit_id)
        .outerjoin(prev, prev.c.id == Finding.previous_commit_id)
        .where(*conditions)
        .order_by(*order_by)
    )
    rows = session.execute(stmt if limit is None else stmt.limit(limit)).all()
    verdicts = _confirmations(session, {f.series_id for f, *_ in rows})
    return [
        FindingView(
            id=f.id, series_id=f.series_id, series_label=label_of(suite, name, params), metric=metric,
            commit_sha=sha, commit_subject=subject,
            previous_sha=prev_sha, direction=f.direction, magnitude=f.magnitude, confidence=f.confidence,
            value_before=f.value_before, value_after=f.value_after, unit=unit, detector=f.detector,
            detector_version=f.detector_version, kind=f.kind, p_value=f.p_value,
            confirmation=verdicts.get((f.series_id, prev_sha, sha)), repository=repo, hardware=device_kind,
            alert_id=f.alert_id, created_at=utc(f.created_at),
        )
        for f, metric, unit, suite, name, params, sha, subject, prev_sha, repo, device_kind in rows
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
    """Every finding, largest change first: for the demo and tests; the API pages through ``findings_page``."""
    return _finding_views(session)


def findings_page(session: Session, filters: ReadFilters, *, kind: str | None = None, direction: str | None = None,
                  state: str | None = None, limit: int = 100,
                  after: FindingKey | None = None) -> Page[FindingView, FindingKey]:
    """Findings newest first (by when detection found them), ``limit`` at a time, every filter a WHERE clause.

    ``state`` is the state of the alert a finding is grouped into (a finding not grouped yet has none);
    ``filters.since``/``until`` bound the finding's ``created_at``. No total: counting a million findings on every
    page is the unbounded read paging is here to avoid.
    """
    conditions: list[ColumnElement[bool]] = []
    if kind is not None:
        conditions.append(Finding.kind == kind)
    if direction is not None:
        conditions.append(Finding.direction == direction)
    if state is not None:
        conditions.append(Finding.alert_id.in_(select(Alert.id).where(Alert.state == state)))
    conditions += _series_conditions(session, filters)
    conditions += time_window(Finding.created_at, filters)
    if after is not None:
        conditions.append(before(FINDING_ORDER, after))
    views = _finding_views(session, *conditions, order_by=[c.desc() for c in FINDING_ORDER], limit=limit + 1)
    last = views[limit - 1] if len(views) > limit else None
    return Page(items=views[:limit], next=None if last is None or last.created_at is None
                else (last.created_at, last.id))


def _series_conditions(session: Session, filters: ReadFilters) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    repos = repository_ids(session, filters.repository)
    if repos is not None:
        conditions.append(Series.repository_id.in_(repos))
    envs = environment_ids(session, filters.hardware)
    if envs is not None:
        conditions.append(Series.environment_id.in_(envs))
    return conditions


def recent_commits(session: Session, limit: int = 100, repository: str | None = None,
                   findings_limit: int | None = None) -> list[CommitView]:
    """Measured commits, newest first, each with its findings (all of them unless ``findings_limit``);
    ``repository`` (a name) narrows them to one."""
    return commits_page(session, ReadFilters(repository=repository), limit=limit,
                        findings_limit=findings_limit).items


def commits_page(session: Session, filters: ReadFilters, limit: int = 100, after: CommitKey | None = None,
                 findings_limit: int | None = None) -> Page[CommitView, CommitKey]:
    """Measured commits newest first (by authored date), ``limit`` at a time.

    ``filters.hardware`` keeps commits measured on that hardware and, of each, its runs and findings there;
    ``since``/``until`` bound the authored date. Each commit lists its findings that flag it first, then the
    rest, largest relative change first, at most ``findings_limit`` of them (None: all), and counts them all.
    """
    envs = environment_ids(session, filters.hardware)
    own_code = of_the_commit(session)  # a working copy's runs stored under a commit's sha are not the commit's
    measured: list[ColumnElement[bool]] = [Run.commit_id == Commit.id, own_code]
    if envs is not None:
        measured.append(Run.environment_id.in_(envs))
    conditions = [exists().where(*measured), *time_window(Commit.authored_at, filters)]
    repos = repository_ids(session, filters.repository)
    if repos is not None:
        conditions.append(Commit.repository_id.in_(repos))
    if after is not None:
        conditions.append(before(COMMIT_ORDER, after))
    rows = session.execute(
        select(Commit, Repository.name)
        .join(Repository, Repository.id == Commit.repository_id)
        .where(*conditions)
        .order_by(*(c.desc() for c in COMMIT_ORDER))
        .limit(limit + 1)
    ).all()
    more = len(rows) > limit
    rows = rows[:limit]
    ids = [c.id for c, _ in rows]
    runs: dict[int, int] = {}
    counts: dict[int, int] = {}
    by_commit: dict[int, list[FindingView]] = defaultdict(list)
    if ids:
        run_filter = [Run.commit_id.in_(ids), own_code] + ([Run.environment_id.in_(envs)] if envs is not None else [])
        runs = {cid: n for cid, n in session.execute(select(Run.commit_id, func.count(Run.id)).where(*run_filter)
                                                     .group_by(Run.commit_id))}
        of_page = [Finding.commit_id.in_(ids)] + ([Series.environment_id.in_(envs)] if envs is not None else [])
        counts = {cid: n for cid, n in session.execute(select(Finding.commit_id, func.count(Finding.id))
                                                       .join(Series, Series.id == Finding.series_id)
                                                       .where(*of_page).group_by(Finding.commit_id))}
        if findings_limit is None:
            views = _finding_views(session, *of_page)
        else:
            # The ranked ids first, then their rows: given the window as a subquery, PostgreSQL misjudges how
            # few ids it yields and scans every finding to join them.
            worst = list(session.scalars(_worst_of_each_commit(of_page, findings_limit)))
            views = [v for chunk in chunks(worst, ID_CHUNK) for v in _finding_views(session, Finding.id.in_(chunk))]
        commit_ids = {c.sha: c.id for c, _ in rows}
        # Findings that flag the commit first (a person opens those), then code diffs and improvements.
        for f in sorted(views, key=_commit_list_order):
            by_commit[commit_ids[f.commit_sha]].append(f)
    items = [
        CommitView(repository=repo, sha=c.sha, subject=c.subject, author=c.author, authored_at=c.authored_at,
                   position=c.position, runs=runs.get(c.id, 0), findings=by_commit.get(c.id, []),
                   finding_count=counts.get(c.id, 0))
        for c, repo in rows
    ]
    last = rows[-1][0] if more else None
    return Page(items=items, next=None if last is None else (utc(last.authored_at), last.position, last.id))


def _commit_list_order(f: FindingView) -> tuple[bool, float, int]:
    return not f.flags_commit, -abs(f.magnitude), f.id


def _worst_of_each_commit(conditions: Sequence[ColumnElement[bool]], n: int) -> Select[tuple[int]]:
    """The ids of each commit's first ``n`` findings in the commit list's order, ranked in SQL (a window), so a
    commit where a thousand series moved costs ``n`` rows, not a thousand."""
    prev = Commit.__table__.alias("prev")
    # A regression re-run interleaved with its base and not reproduced ("refuted") no longer flags the commit.
    refuted = exists().where(BisectJob.series_id == Finding.series_id, BisectJob.purpose == "confirm",
                             BisectJob.state == "done", BisectJob.culprit_sha.is_(None),
                             BisectJob.good_commit_sha == prev.c.sha, BisectJob.bad_commit_sha == Commit.sha)
    flags = case((and_(Finding.direction == "regression", Finding.kind != "static", ~refuted), 0), else_=1)
    rank = func.row_number().over(partition_by=Finding.commit_id,
                                  order_by=(flags, func.abs(Finding.magnitude).desc(), Finding.id)).label("rank")
    ranked = (select(Finding.id, rank)
              .join(Series, Series.id == Finding.series_id)
              .join(Commit, Commit.id == Finding.commit_id)
              .outerjoin(prev, prev.c.id == Finding.previous_commit_id)
              .where(*conditions).subquery())
    return select(ranked.c.id).where(ranked.c.rank <= n)


def series_view(session: Session, series_id: int) -> SeriesView | None:
    series = session.get(Series, series_id)
    if series is None:
        return None
    rows = session.execute(
        select(Commit.sha, Commit.subject, Commit.position, Result.samples, Result.id)
        .join(Run, Run.id == Result.run_id)
        .join(Commit, Commit.id == Run.commit_id)
        .join(Repository, Repository.id == Commit.repository_id)
        .where(Result.series_id == series_id, Result.status == "ok", Run.branch == Repository.default_branch)
        .order_by(Commit.position, Result.id)
    ).all()
    pooled: dict[str, tuple[str, int, list[float], list[int]]] = {}
    for sha, subject, position, samples, result_id in rows:
        point = pooled.setdefault(sha, (subject, position, [], []))
        point[2].extend(samples)
        point[3].append(result_id)
    points = []
    for sha, (subject, position, samples, result_ids) in sorted(pooled.items(), key=lambda kv: kv[1][1]):
        points.append(SeriesPointView(sha=sha, subject=subject, position=position, samples=samples,
                                      median=statistics.median(samples), result_ids=result_ids))
    env: Environment = series.environment
    return SeriesView(
        id=series.id, label=series_label(series.benchmark), repository=series.repository.name,
        metric=series.metric, unit=series.unit, direction=series.direction,
        environment=hardware_label(env.backend, env.device_kind, env.device_count),
        points=points, findings=_finding_views(session, Finding.series_id == series_id),
    )

