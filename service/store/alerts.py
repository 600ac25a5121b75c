"""Alerts in the store: what grouping reads and writes (findings placed at their ranges, the alert of a range,
the emptied ones), and the alerts read view (each alert with its findings, largest change first, and its notes).

service/pipeline/alerts.py decides (grouping, triage, the inbox's filters); these answer and write its questions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, exists, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from kernelwatch.vocabulary import FindingKind
from service.report.alert_views import AlertFindingView, AlertNoteView, AlertView
from service.store.chunks import chunks
from service.store.models import (
    Alert,
    AlertNote,
    AlertNotification,
    Benchmark,
    Commit,
    Environment,
    Finding,
    Repository,
    Series,
)
from service.store.queries import finding_metric_columns, label_of
from service.store.read_filters import ReadFilters, time_window
from service.store.times import utc

# --- grouping ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlacedFinding:
    """Where a finding is: its range (repository, previous commit, commit), and the alert it is in now."""

    id: int
    repository_id: int
    commit_id: int
    previous_commit_id: int | None
    direction: str
    alert_id: int | None
    code: bool = False  # a static finding


def findings_and_repositories_of_series(session: Session, series_ids: Sequence[int]) -> tuple[list[int], set[int]]:
    """The ids of every finding on these series, and the repositories the series belong to."""
    finding_ids: list[int] = []
    repository_ids: set[int] = set()
    for chunk in chunks(series_ids):
        finding_ids += session.scalars(select(Finding.id).where(Finding.series_id.in_(chunk)))
        repository_ids.update(session.scalars(select(Series.repository_id).where(Series.id.in_(chunk))))
    return finding_ids, repository_ids


def placed_findings(session: Session, finding_ids: Sequence[int]) -> list[PlacedFinding]:
    rows: list[Any] = []
    for chunk in chunks(finding_ids):
        rows += session.execute(
            select(Finding.id, Series.repository_id, Finding.commit_id, Finding.previous_commit_id,
                   Finding.direction, Finding.alert_id, Finding.kind)
            .join(Series, Series.id == Finding.series_id)
            .where(Finding.id.in_(chunk))
        ).all()
    return [PlacedFinding(id=r.id, repository_id=r.repository_id, commit_id=r.commit_id,
                          previous_commit_id=r.previous_commit_id, direction=r.direction, alert_id=r.alert_id,
                          code=r.kind == FindingKind.STATIC)
            for r in rows]


def alerts_at_commits(session: Session, repository_id: int, commit_ids: Sequence[int]) -> list[Alert]:
    """The alerts of a repository whose range ends at one of these commits."""
    found: list[Alert] = []
    for chunk in chunks(commit_ids):
        found += session.scalars(select(Alert).where(Alert.repository_id == repository_id,
                                                     Alert.commit_id.in_(chunk)))
    return found


def add_alert(session: Session, alert: Alert) -> tuple[Alert, bool]:
    """Store a new alert of a range (in a savepoint); when another worker stored that range's alert first and
    committed, that one instead. The alert, and whether it is the one given."""
    try:
        with session.begin_nested():
            session.add(alert)
    except IntegrityError:
        prev = (Alert.previous_commit_id.is_(None) if alert.previous_commit_id is None
                else Alert.previous_commit_id == alert.previous_commit_id)
        return session.scalars(select(Alert).where(Alert.repository_id == alert.repository_id,
                                                   Alert.commit_id == alert.commit_id, prev)).one(), False
    return alert, True


def move_findings(session: Session, finding_ids: Sequence[int], alert_id: int) -> None:
    for chunk in chunks(finding_ids):
        # Synchronised: Finding objects a caller holds in this session see their new alert.
        session.execute(update(Finding).where(Finding.id.in_(chunk)).values(alert_id=alert_id))


def finding_count(session: Session, alert_id: int) -> int:
    return session.scalar(select(func.count(Finding.id)).where(Finding.alert_id == alert_id)) or 0


def finding_directions(session: Session, alert_id: int) -> tuple[list[str], list[str]]:
    """The directions of the alert's findings, the static (code) findings' apart, as alert_kind takes them."""
    rows = session.execute(select(Finding.direction, Finding.kind).where(Finding.alert_id == alert_id)).all()
    return ([d for d, kind in rows if kind != FindingKind.STATIC],
            [d for d, kind in rows if kind == FindingKind.STATIC])


def has_notes(session: Session, alert_id: int) -> bool:
    return bool(session.scalar(select(exists().where(AlertNote.alert_id == alert_id))))


def announced(session: Session, alert_id: int, now: datetime) -> bool:
    """Whether a chat message announces the alert (a notification posted: it has the message's ts), or may be
    posting it now (a delivery holds its row: the ts is stored after the post, in a transaction of its own)."""
    return bool(session.scalar(select(exists().where(
        AlertNotification.alert_id == alert_id,
        or_(AlertNotification.message_ts.is_not(None), AlertNotification.claimed_until > now)))))


def state_set_by_person(session: Session, alert_id: int, system_author: str) -> bool:
    """Whether a note other than ``system_author``'s (grouping's own) set the alert's state."""
    return bool(session.scalar(select(exists().where(AlertNote.alert_id == alert_id, AlertNote.state_to.is_not(None),
                                                     AlertNote.author != system_author))))


def empty_alerts(session: Session, repository_ids: Sequence[int]) -> Sequence[Alert]:
    """The alerts of these repositories without a finding, by id."""
    return session.scalars(
        select(Alert).where(Alert.repository_id.in_(sorted(repository_ids)),
                            ~exists().where(Finding.alert_id == Alert.id)).order_by(Alert.id)
    ).all()


def last_note(session: Session, alert_id: int) -> AlertNote | None:
    return session.scalars(select(AlertNote).where(AlertNote.alert_id == alert_id)
                           .order_by(AlertNote.created_at.desc(), AlertNote.id.desc()).limit(1)).first()


def notes_after(session: Session, alert_id: int, note_id: int) -> list[AlertNote]:
    """The alert's notes after the note ``note_id`` (0: all), oldest first."""
    return list(session.scalars(select(AlertNote).where(AlertNote.alert_id == alert_id, AlertNote.id > note_id)
                                .order_by(AlertNote.id)))


def device_kinds_of_series(session: Session, series_ids: Sequence[int]) -> dict[int, str]:
    """Per series, the device kind of its environment."""
    return {series_id: kind for series_id, kind in session.execute(
        select(Series.id, Environment.device_kind).join(Environment, Environment.id == Series.environment_id)
        .where(Series.id.in_(sorted(set(series_ids)) or [-1])))}


def device_kinds_of_alert(session: Session, alert_id: int) -> list[str]:
    """Every device kind the alert's findings were measured on, sorted."""
    return sorted(session.scalars(
        select(Environment.device_kind).distinct().join(Series, Series.environment_id == Environment.id)
        .join(Finding, Finding.series_id == Series.id).where(Finding.alert_id == alert_id)))


# --- the read view ----------------------------------------------------------------------------------------------

def repository_id(session: Session, name: str) -> int | None:
    return session.scalar(select(Repository.id).where(Repository.name == name))


@dataclass(frozen=True)
class AlertSelection:
    """Which alerts a read lists. ``environment_ids`` (None: any) keeps the alerts with a finding in one of those
    environments and lists (and counts) only those findings; ``since``/``until`` bound when the alert was raised;
    ``before_id``: only alerts of a smaller id (the page after the alert just above it)."""

    alert_id: int | None = None
    state: str | None = None
    repository_id: int | None = None
    environment_ids: Sequence[int] | None = None
    since: datetime | None = None
    until: datetime | None = None
    before_id: int | None = None


def _finding_conditions(selection: AlertSelection) -> list[ColumnElement[bool]]:
    if selection.environment_ids is None:
        return []
    return [Finding.series_id.in_(select(Series.id).where(Series.environment_id.in_(selection.environment_ids)))]


def _conditions(selection: AlertSelection) -> list[Any]:
    conditions: list[Any] = []
    if selection.alert_id is not None:
        conditions.append(Alert.id == selection.alert_id)
    if selection.state is not None:
        conditions.append(Alert.state == selection.state)
    if selection.repository_id is not None:
        conditions.append(Alert.repository_id == selection.repository_id)
    on_hardware = _finding_conditions(selection)
    if on_hardware:
        # OFFSET 0 keeps PostgreSQL from turning EXISTS into a semi-join, which hashes every finding on that
        # hardware (a million at scale); probed per alert through ix_finding_alert, it stops at the first one.
        conditions.append(select(Finding.id).where(Finding.alert_id == Alert.id, *on_hardware).offset(0).exists())
    conditions += time_window(Alert.created_at, ReadFilters(since=selection.since, until=selection.until))
    if selection.before_id is not None:
        conditions.append(Alert.id < selection.before_id)
    return conditions


def count_alerts(session: Session, selection: AlertSelection) -> int:
    """How many alerts the selection matches: cheap on the alert table alone (ix_alert_state), without a hardware
    filter; with one it probes the findings of every alert."""
    return session.scalar(select(func.count(Alert.id)).where(*_conditions(selection))) or 0


def alert_view(session: Session, alert_id: int, findings_limit: int | None = None) -> AlertView | None:
    """One alert, as ``alert_views`` lists it; None when there is no such alert."""
    views = alert_views(session, AlertSelection(alert_id=alert_id), findings_limit=findings_limit)
    return views[0] if views else None


def alert_views(session: Session, selection: AlertSelection, limit: int | None = None,
                findings_limit: int | None = None) -> list[AlertView]:
    """The selected alerts newest first, at most ``limit`` (None: all); each with at most ``findings_limit``
    findings (the largest relative changes; None: all) and the count of all of them, and its notes, oldest
    first."""
    finding_conditions = _finding_conditions(selection)
    prev = Commit.__table__.alias("prev")
    stmt = (
        select(Alert, Repository.name, Commit.sha, Commit.subject, prev.c.sha, prev.c.subject)
        .join(Repository, Repository.id == Alert.repository_id)
        .join(Commit, Commit.id == Alert.commit_id)
        .outerjoin(prev, prev.c.id == Alert.previous_commit_id)
        .where(*_conditions(selection))
        .order_by(Alert.id.desc())
    )
    rows = session.execute(stmt if limit is None else stmt.limit(limit)).all()
    ids = [alert.id for alert, *_ in rows]
    findings: dict[int | None, list[AlertFindingView]] = defaultdict(list)
    counts: dict[int | None, int] = {}
    notes: dict[int, list[AlertNoteView]] = defaultdict(list)
    for chunk in chunks(ids):
        of_chunk = [Finding.alert_id.in_(chunk), *finding_conditions]
        counts.update((aid, n) for aid, n in session.execute(
            select(Finding.alert_id, func.count(Finding.id)).where(*of_chunk).group_by(Finding.alert_id)))
        if findings_limit is None:
            _add_findings(session, findings, of_chunk)
        else:
            # Ranked in SQL (a window), so an alert where a thousand series moved costs findings_limit rows;
            # the ids first, then their rows: given the window as a subquery, PostgreSQL misjudges how few ids
            # it yields and scans every finding to join them.
            rank = func.row_number().over(partition_by=Finding.alert_id,
                                          order_by=(func.abs(Finding.magnitude).desc(), Finding.id)).label("rank")
            ranked = select(Finding.id, rank).where(*of_chunk).subquery()
            worst = list(session.scalars(select(ranked.c.id).where(ranked.c.rank <= findings_limit)))
            for ids_chunk in chunks(worst):
                _add_findings(session, findings, [Finding.id.in_(ids_chunk)])
        for n in session.scalars(select(AlertNote).where(AlertNote.alert_id.in_(chunk))
                                 .order_by(AlertNote.created_at, AlertNote.id)):
            notes[n.alert_id].append(AlertNoteView(author=n.author, text=n.text, state_from=n.state_from,
                                                   state_to=n.state_to, created_at=utc(n.created_at)))
    for listed in findings.values():  # chunks arrive in order, but each chunk is ordered on its own
        listed.sort(key=lambda f: (-abs(f.magnitude), f.id))
    return [
        AlertView(id=a.id, repository=repo, commit_sha=sha, commit_subject=subject, previous_sha=prev_sha,
                  previous_subject=prev_subject, state=a.state, kind=a.kind, created_at=utc(a.created_at),
                  updated_at=utc(a.updated_at), findings=findings.get(a.id, []), notes=notes.get(a.id, []),
                  finding_count=counts.get(a.id, 0))
        for a, repo, sha, subject, prev_sha, prev_subject in rows
    ]


def _add_findings(session: Session, findings: dict[int | None, list[AlertFindingView]],
                  conditions: Sequence[Any]) -> None:
    # Columns, not entities: a Series entity brings its repository, benchmark and environment along.
    for f in session.execute(
        select(Finding.id, Finding.series_id, Finding.alert_id, Finding.direction, Finding.magnitude,
               Finding.confidence, Finding.p_value, Finding.detector, *finding_metric_columns(),
               Benchmark.suite, Benchmark.name, Benchmark.params)
        .join(Series, Series.id == Finding.series_id)
        .join(Benchmark, Benchmark.id == Series.benchmark_id)
        .where(*conditions)
        .order_by(func.abs(Finding.magnitude).desc(), Finding.id)
    ).all():
        findings[f.alert_id].append(AlertFindingView(
            id=f.id, series_id=f.series_id, benchmark=label_of(f.suite, f.name, f.params), metric=f.metric,
            unit=f.unit, direction=f.direction, magnitude=f.magnitude, confidence=f.confidence,
            p_value=f.p_value, detector=f.detector))


def alerts_found_since(session: Session, since: datetime, repository_id: int | None = None) -> set[int]:
    """The alerts holding a finding made at or after ``since`` (of one repository's series where given): a new
    alert, or an old one a new finding joined, which what a command raised is."""
    query = select(Finding.alert_id).where(Finding.created_at >= utc(since), Finding.alert_id.is_not(None))
    if repository_id is not None:
        query = query.join(Series, Series.id == Finding.series_id).where(Series.repository_id == repository_id)
    return {alert_id for alert_id in session.scalars(query.distinct()) if alert_id is not None}
