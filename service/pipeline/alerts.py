"""Alerts: the findings at one commit range grouped into one alert, triaged by people, listed for the faces.

Grouping is idempotent and follows the findings: a finding whose range changed (bisection moved it, re-detection
placed it elsewhere) moves to the alert of its new range. An alert left without findings is deleted when nobody
has written on it; one a person has noted or triaged is kept, with a note saying where its findings went, so that
what people wrote is never lost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import exists, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from kernelwatch.errors import InvalidInput, NotFound
from service.detect.grouping import (
    STATES,
    AlertGroup,
    GroupableFinding,
    RangeKey,
    TriageError,
    alert_kind,
    check_transition,
    group,
    initial_state,
)
from service.report.alert_views import AlertFindingView, AlertNoteView, AlertView
from service.store.models import Alert, AlertNote, Benchmark, Commit, Finding, Repository, Series
from service.store.queries import finding_metric_columns, label_of
from service.store.read_filters import Page, ReadFilters, environment_ids, time_window, utc

SYSTEM_AUTHOR = "kernelwatch"  # the author of the notes grouping writes
EMPTIED = "no findings left: "  # how grouping's note on an emptied alert starts
REFILLED = "findings are back at this range: "
CHUNK = 500  # ids per IN (...) list

T = TypeVar("T")


@dataclass(frozen=True)
class GroupingOutcome:
    created: list[int] = field(default_factory=list)  # alerts made for a new range
    updated: list[int] = field(default_factory=list)  # existing alerts that gained or lost findings
    deleted: list[int] = field(default_factory=list)  # emptied alerts nobody had written on
    emptied: list[int] = field(default_factory=list)  # emptied alerts kept for their notes


def _chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), CHUNK):
        yield items[start:start + CHUNK]


def group_series(session: Session, series_ids: Iterable[int]) -> GroupingOutcome:
    """Group every finding of these series, and tidy the alerts of their repositories that lost findings."""
    ids = sorted(set(series_ids))
    finding_ids: list[int] = []
    repository_ids: set[int] = set()
    for chunk in _chunks(ids):
        finding_ids += session.scalars(select(Finding.id).where(Finding.series_id.in_(chunk)))
        repository_ids.update(session.scalars(select(Series.repository_id).where(Series.id.in_(chunk))))
    return group_findings(session, finding_ids, repository_ids)


def group_findings(session: Session, finding_ids: Iterable[int],
                   repository_ids: Iterable[int] = ()) -> GroupingOutcome:
    """Attach each finding to the alert of its range, creating the alert when missing; running it again on the
    same findings changes nothing. Alerts of the findings' repositories (and of ``repository_ids``) left without
    findings are deleted or, when someone wrote on them, kept with a note."""
    now = datetime.now(UTC)
    ids = sorted(set(finding_ids))
    rows: list[Any] = []
    for chunk in _chunks(ids):
        rows += session.execute(
            select(Finding.id, Series.repository_id, Finding.commit_id, Finding.previous_commit_id,
                   Finding.direction, Finding.alert_id)
            .join(Series, Series.id == Finding.series_id)
            .where(Finding.id.in_(chunk))
        ).all()
    current = {r.id: r.alert_id for r in rows}
    groups = group(GroupableFinding(id=r.id, repository_id=r.repository_id, commit_id=r.commit_id,
                                    previous_commit_id=r.previous_commit_id, direction=r.direction) for r in rows)
    existing = _alerts_by_range(session, groups)

    created: list[int] = []
    gained: set[int] = set()
    moved_to: dict[int, set[int]] = defaultdict(set)  # alert that lost findings -> where they went
    for g in groups:
        alert = existing.get(g.key)
        if alert is None:
            alert, made = _create_alert(session, g, now)
            if made:
                created.append(alert.id)
        moving = [fid for fid in g.finding_ids if current[fid] != alert.id]
        if not moving:
            continue
        if alert.id not in created and _finding_count(session, alert.id) == 0 and _has_notes(session, alert.id):
            session.add(AlertNote(alert_id=alert.id, author=SYSTEM_AUTHOR, state_from=alert.state, state_to=None,
                                  text=f"{REFILLED}{len(moving)} finding(s) attached again", created_at=now))
        for fid in moving:
            source = current[fid]
            if source is not None:
                moved_to[source].add(alert.id)
        for chunk in _chunks(moving):
            # Synchronised: Finding objects a caller holds in this session see their new alert.
            session.execute(update(Finding).where(Finding.id.in_(chunk)).values(alert_id=alert.id))
        gained.add(alert.id)

    updated: set[int] = set()
    for alert_id in sorted(gained | set(moved_to)):
        if _refresh(session, alert_id, now) and alert_id not in created:
            updated.add(alert_id)
    repos = {r.repository_id for r in rows} | set(repository_ids)
    deleted, emptied = _sweep_empty(session, repos, moved_to, now)
    session.flush()
    return GroupingOutcome(created=sorted(created), updated=sorted(updated - set(deleted)), deleted=deleted,
                           emptied=emptied)


def _alerts_by_range(session: Session, groups: Sequence[AlertGroup]) -> dict[RangeKey, Alert]:
    found: dict[RangeKey, Alert] = {}
    by_repo: dict[int, set[int]] = defaultdict(set)
    for g in groups:
        by_repo[g.repository_id].add(g.commit_id)
    for repo, commits in by_repo.items():
        ordered = sorted(commits)
        for chunk in _chunks(ordered):
            for alert in session.scalars(select(Alert).where(Alert.repository_id == repo,
                                                             Alert.commit_id.in_(chunk))):
                found[(alert.repository_id, alert.previous_commit_id, alert.commit_id)] = alert
    return found


def _create_alert(session: Session, g: AlertGroup, now: datetime) -> tuple[Alert, bool]:
    """The alert of a range not seen yet, and whether this call made it."""
    alert = Alert(repository_id=g.repository_id, commit_id=g.commit_id, previous_commit_id=g.previous_commit_id,
                  state=g.initial_state, kind=g.kind, created_at=now, updated_at=now)
    try:
        with session.begin_nested():
            session.add(alert)
    except IntegrityError:
        # Another worker grouped the same range first and committed: its alert is the one.
        prev = (Alert.previous_commit_id.is_(None) if g.previous_commit_id is None
                else Alert.previous_commit_id == g.previous_commit_id)
        return session.scalars(select(Alert).where(Alert.repository_id == g.repository_id,
                                                   Alert.commit_id == g.commit_id, prev)).one(), False
    return alert, True


def _finding_count(session: Session, alert_id: int) -> int:
    return session.scalar(select(func.count(Finding.id)).where(Finding.alert_id == alert_id)) or 0


def _has_notes(session: Session, alert_id: int) -> bool:
    return bool(session.scalar(select(exists().where(AlertNote.alert_id == alert_id))))


def _state_set_by_person(session: Session, alert_id: int) -> bool:
    return bool(session.scalar(select(exists().where(AlertNote.alert_id == alert_id,
                                                     AlertNote.state_to.is_not(None)))))


def _refresh(session: Session, alert_id: int, now: datetime) -> bool:
    """Bring an alert's kind (and, while nobody has triaged it, its state) in line with its findings."""
    alert = session.get(Alert, alert_id)
    directions = list(session.scalars(select(Finding.direction).where(Finding.alert_id == alert_id)))
    if alert is None or not directions:
        return False  # an empty alert is the sweep's
    kind = alert_kind(directions)
    if alert.kind != kind:
        alert.kind = kind
    if not _state_set_by_person(session, alert_id):
        alert.state = initial_state(kind)
    alert.updated_at = now  # its findings changed, whether or not its kind did
    return True


def _sweep_empty(session: Session, repository_ids: set[int], moved_to: dict[int, set[int]],
                 now: datetime) -> tuple[list[int], list[int]]:
    if not repository_ids:
        return [], []
    deleted: list[int] = []
    emptied: list[int] = []
    empty = session.scalars(
        select(Alert).where(Alert.repository_id.in_(sorted(repository_ids)),
                            ~exists().where(Finding.alert_id == Alert.id)).order_by(Alert.id)
    ).all()
    for alert in empty:
        if not _has_notes(session, alert.id):
            session.delete(alert)  # nothing refers to it: no findings, no notes
            deleted.append(alert.id)
            continue
        last = session.scalars(select(AlertNote).where(AlertNote.alert_id == alert.id)
                               .order_by(AlertNote.created_at.desc(), AlertNote.id.desc()).limit(1)).first()
        if last is not None and last.author == SYSTEM_AUTHOR and last.text.startswith(EMPTIED):
            continue  # already said
        targets = sorted(moved_to.get(alert.id, set()))
        why = (f"they moved to alert {', '.join(str(t) for t in targets)}" if targets
               else "detection no longer finds a change at this range")
        session.add(AlertNote(alert_id=alert.id, author=SYSTEM_AUTHOR, text=EMPTIED + why, state_from=alert.state,
                              state_to=None, created_at=now))
        alert.updated_at = now
        emptied.append(alert.id)
    return deleted, emptied


def triage(session: Session, alert_id: int, state: str, note: str = "", author: str = "") -> AlertView:
    """Record a person's triage: a state change, a note, or both (see ``service.detect.grouping``)."""
    alert = session.get(Alert, alert_id)
    if alert is None:
        raise NotFound(f"no alert {alert_id}")
    author = author.strip()
    if not author or len(author) > 200:
        raise InvalidInput("give the triage an author of 1 to 200 characters")
    try:
        target = check_transition(alert.state, state, bool(note.strip()))
    except TriageError as exc:
        raise InvalidInput(f"alert {alert_id}: {exc}") from None
    now = datetime.now(UTC)
    session.add(AlertNote(alert_id=alert_id, author=author, text=note.strip(), state_from=alert.state,
                          state_to=target, created_at=now))
    if target is not None:
        alert.state = target
    alert.updated_at = now
    session.flush()
    return _views(session, [Alert.id == alert_id])[0]


def list_alerts(session: Session, repository: str | None = None, state: str | None = None) -> list[AlertView]:
    """Every alert, newest first, each with all its findings (largest change first) and notes (oldest first):
    what `kernelwatch alerts list` prints. The API pages through ``alerts_page`` instead."""
    return alerts_page(session, ReadFilters(repository=repository), state=state).items


def alerts_page(session: Session, filters: ReadFilters, state: str | None = None, limit: int | None = None,
                after: int | None = None, findings_limit: int | None = None) -> Page[AlertView, int]:
    """Alerts newest first, ``limit`` at a time (None: all), after the alert id ``after``; each with at most
    ``findings_limit`` findings (the largest relative changes; None: all) and the count of all of them.

    ``filters.since``/``until`` bound when the alert was raised; ``filters.hardware`` keeps the alerts with a
    finding on that hardware and lists (and counts) only those findings. An unknown repository is NotFound,
    as it always was here; ``total`` counts every alert the filters match (alerts are few: one per range),
    except under a hardware filter (None).
    """
    conditions: list[Any] = []
    if state is not None:
        if state not in STATES:
            raise InvalidInput(f"unknown alert state {state!r}; one of: {', '.join(STATES)}")
        conditions.append(Alert.state == state)
    if filters.repository is not None:
        repo_id = session.scalar(select(Repository.id).where(Repository.name == filters.repository))
        if repo_id is None:
            raise NotFound(f"no repository named {filters.repository!r}")
        conditions.append(Alert.repository_id == repo_id)
    envs = environment_ids(session, filters.hardware)
    on_hardware: list[Any] = [] if envs is None else [Finding.series_id.in_(
        select(Series.id).where(Series.environment_id.in_(envs)))]
    if on_hardware:
        # OFFSET 0 keeps PostgreSQL from turning EXISTS into a semi-join, which hashes every finding on that
        # hardware (a million at scale); probed per alert through ix_finding_alert, it stops at the first one.
        conditions.append(select(Finding.id).where(Finding.alert_id == Alert.id, *on_hardware).offset(0).exists())
    conditions += time_window(Alert.created_at, filters)
    # Counting is cheap on the alert table alone (ix_alert_state); with a hardware filter it would probe the
    # findings of every alert, so there is no total then.
    total = None if on_hardware else session.scalar(select(func.count(Alert.id)).where(*conditions)) or 0
    if after is not None:
        conditions.append(Alert.id < after)
    views = _views(session, conditions, limit=None if limit is None else limit + 1, findings_limit=findings_limit,
                   finding_conditions=on_hardware)
    more = limit is not None and len(views) > limit
    items = views[:limit] if limit is not None else views
    return Page(items=items, next=items[-1].id if more else None, total=total)


def get_alert(session: Session, alert_id: int) -> AlertView:
    views = _views(session, [Alert.id == alert_id])
    if not views:
        raise NotFound(f"no alert {alert_id}")
    return views[0]


def _views(session: Session, conditions: list[Any], limit: int | None = None, findings_limit: int | None = None,
           finding_conditions: Sequence[Any] = ()) -> list[AlertView]:
    prev = Commit.__table__.alias("prev")
    stmt = (
        select(Alert, Repository.name, Commit.sha, Commit.subject, prev.c.sha, prev.c.subject)
        .join(Repository, Repository.id == Alert.repository_id)
        .join(Commit, Commit.id == Alert.commit_id)
        .outerjoin(prev, prev.c.id == Alert.previous_commit_id)
        .where(*conditions)
        .order_by(Alert.id.desc())
    )
    rows = session.execute(stmt if limit is None else stmt.limit(limit)).all()
    ids = [alert.id for alert, *_ in rows]
    findings: dict[int | None, list[AlertFindingView]] = defaultdict(list)
    counts: dict[int | None, int] = {}
    notes: dict[int, list[AlertNoteView]] = defaultdict(list)
    for chunk in _chunks(ids):
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
            for ids_chunk in _chunks(worst):
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
