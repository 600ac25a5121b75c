"""Alerts: the findings at one commit range grouped into one alert, triaged by people, listed for the faces.

Grouping is idempotent and follows the findings: a finding whose range changed (bisection moved it, re-detection
placed it elsewhere) moves to the alert of its new range. An alert left without findings is deleted when nobody
has written on it and no chat message announced it; one a person has noted or triaged, or a message announced, is
kept, with a note saying where its findings went (so that what people wrote is never lost, and the message's thread
says why it is withdrawn), closed as invalid unless a person chose its state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from kernelwatch.errors import InvalidInput, NotFound
from kernelwatch.vocabulary import AlertState
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
from service.report.alert_views import AlertView
from service.store import alerts as stored
from service.store.models import Alert, AlertNote
from service.store.read_filters import Page, ReadFilters, environment_ids

SYSTEM_AUTHOR = "kernelwatch"  # the author of the notes grouping writes
EMPTIED = "no findings left: "  # how grouping's note on an emptied alert starts
REFILLED = "findings are back at this range: "


@dataclass(frozen=True)
class GroupingOutcome:
    created: list[int] = field(default_factory=list)  # alerts made for a new range
    updated: list[int] = field(default_factory=list)  # existing alerts that gained or lost findings
    deleted: list[int] = field(default_factory=list)  # emptied alerts nobody had written on nor announced
    emptied: list[int] = field(default_factory=list)  # emptied alerts kept for their notes


def group_series(session: Session, series_ids: Iterable[int]) -> GroupingOutcome:
    """Group every finding of these series, and tidy the alerts of their repositories that lost findings."""
    finding_ids, repository_ids = stored.findings_and_repositories_of_series(session, sorted(set(series_ids)))
    return group_findings(session, finding_ids, repository_ids)


def group_findings(session: Session, finding_ids: Iterable[int],
                   repository_ids: Iterable[int] = ()) -> GroupingOutcome:
    """Attach each finding to the alert of its range, creating the alert when missing; running it again on the
    same findings changes nothing. Alerts of the findings' repositories (and of ``repository_ids``) left without
    findings are deleted or, when someone wrote on them, kept with a note."""
    now = datetime.now(UTC)
    rows = stored.placed_findings(session, sorted(set(finding_ids)))
    current = {r.id: r.alert_id for r in rows}
    groups = group(GroupableFinding(id=r.id, repository_id=r.repository_id, commit_id=r.commit_id,
                                    previous_commit_id=r.previous_commit_id, direction=r.direction, code=r.code)
                   for r in rows)
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
        if (alert.id not in created and stored.finding_count(session, alert.id) == 0
                and stored.has_notes(session, alert.id)):
            session.add(AlertNote(alert_id=alert.id, author=SYSTEM_AUTHOR, state_from=alert.state, state_to=None,
                                  text=f"{REFILLED}{len(moving)} finding(s) attached again", created_at=now))
        for fid in moving:
            source = current[fid]
            if source is not None:
                moved_to[source].add(alert.id)
        stored.move_findings(session, moving, alert.id)  # Finding objects a caller holds see their new alert
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
        for alert in stored.alerts_at_commits(session, repo, sorted(commits)):
            found[(alert.repository_id, alert.previous_commit_id, alert.commit_id)] = alert
    return found


def _create_alert(session: Session, g: AlertGroup, now: datetime) -> tuple[Alert, bool]:
    """The alert of a range not seen yet, and whether this call made it (when another worker grouped the same
    range first and committed, its alert is the one)."""
    alert = Alert(repository_id=g.repository_id, commit_id=g.commit_id, previous_commit_id=g.previous_commit_id,
                  state=g.initial_state, kind=g.kind, created_at=now, updated_at=now)
    return stored.add_alert(session, alert)


def _refresh(session: Session, alert_id: int, now: datetime) -> bool:
    """Bring an alert's kind (and, while nobody has triaged it, its state) in line with its findings."""
    alert = session.get(Alert, alert_id)
    directions, code_directions = stored.finding_directions(session, alert_id)
    if alert is None or not (directions or code_directions):
        return False  # an empty alert is the sweep's
    kind = alert_kind(directions, code_directions)
    if alert.kind != kind:
        alert.kind = kind
    if not stored.state_set_by_person(session, alert_id, SYSTEM_AUTHOR):
        alert.state = initial_state(kind)
    alert.updated_at = now  # its findings changed, whether or not its kind did
    return True


def _sweep_empty(session: Session, repository_ids: set[int], moved_to: dict[int, set[int]],
                 now: datetime) -> tuple[list[int], list[int]]:
    if not repository_ids:
        return [], []
    deleted: list[int] = []
    emptied: list[int] = []
    for alert in stored.empty_alerts(session, sorted(repository_ids)):
        # An alert a chat message announced is kept, emptied, like one a person wrote on: deleted, its message
        # stood in the channel for good, a false alarm never withdrawn, a link to an alert that is not there.
        if not stored.has_notes(session, alert.id) and not stored.announced(session, alert.id, now):
            session.delete(alert)  # nothing refers to it: no findings, no notes, no message
            deleted.append(alert.id)
            continue
        last = stored.last_note(session, alert.id)
        if last is not None and last.author == SYSTEM_AUTHOR and last.text.startswith(EMPTIED):
            continue  # already said
        targets = sorted(moved_to.get(alert.id, set()))
        why = (f"they moved to alert {', '.join(str(t) for t in targets)}" if targets
               else "detection no longer finds a change at this range")
        # Nothing left to look at: out of the untriaged inbox, unless a person chose its state (refilled, it
        # follows its findings again: grouping's own state changes are not a person's).
        closed = None if stored.state_set_by_person(session, alert.id, SYSTEM_AUTHOR) else AlertState.INVALID
        session.add(AlertNote(alert_id=alert.id, author=SYSTEM_AUTHOR, text=EMPTIED + why, state_from=alert.state,
                              state_to=closed if closed != alert.state else None, created_at=now))
        if closed is not None:
            alert.state = closed
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
    if "\x00" in note:  # PostgreSQL's text holds none (a 500 from the page's form, which the API had refused)
        raise InvalidInput("a note cannot hold a NUL character")
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
    return get_alert(session, alert_id)


def list_alerts(session: Session, repository: str | None = None, state: str | None = None) -> list[AlertView]:
    """Every alert, newest first, each with all its findings (largest change first) and notes (oldest first):
    what `kernelwatch alerts list` prints. The API pages through ``alerts_page`` instead."""
    return alerts_page(session, ReadFilters(repository=repository), state=state).items


def alerts_found_since(session: Session, since: datetime, repository: str | None = None) -> list[AlertView]:
    """The alerts a finding made at or after ``since`` raised or joined (of ``repository`` where given), newest
    first: what `kernelwatch run` and `ingest` print of what detection found in the runs they stored."""
    repo_id = stored.repository_id(session, repository) if repository is not None else None
    if repository is not None and repo_id is None:
        return []  # nothing stored under that name: nothing found in it
    views = [stored.alert_view(session, alert_id) for alert_id in sorted(
        stored.alerts_found_since(session, since, repo_id), reverse=True)]  # newest (highest id) first
    return [view for view in views if view is not None]


def alerts_page(session: Session, filters: ReadFilters, state: str | None = None, limit: int | None = None,
                after: int | None = None, findings_limit: int | None = None) -> Page[AlertView, int]:
    """Alerts newest first, ``limit`` at a time (None: all), after the alert id ``after``; each with at most
    ``findings_limit`` findings (the largest relative changes; None: all) and the count of all of them.

    ``filters.since``/``until`` bound when the alert was raised; ``filters.hardware`` keeps the alerts with a
    finding on that hardware and lists (and counts) only those findings. An unknown repository is NotFound,
    as it always was here; ``total`` counts every alert the filters match (alerts are few: one per range),
    except under a hardware filter (None).
    """
    if state is not None and state not in STATES:
        raise InvalidInput(f"unknown alert state {state!r}; one of: {', '.join(STATES)}")
    repo_id = None
    if filters.repository is not None:
        repo_id = stored.repository_id(session, filters.repository)
        if repo_id is None:
            raise NotFound(f"no repository named {filters.repository!r}")
    envs = environment_ids(session, filters.hardware)
    selection = stored.AlertSelection(state=state, repository_id=repo_id, environment_ids=envs,
                                      since=filters.since, until=filters.until)
    # Counting is cheap on the alert table alone (ix_alert_state); with a hardware filter it would probe the
    # findings of every alert, so there is no total then.
    total = None if envs is not None else stored.count_alerts(session, selection)
    if after is not None:
        selection = replace(selection, before_id=after)
    views = stored.alert_views(session, selection, limit=None if limit is None else limit + 1,
                               findings_limit=findings_limit)
    more = limit is not None and len(views) > limit
    items = views[:limit] if limit is not None else views
    return Page(items=items, next=items[-1].id if more else None, total=total)


def get_alert(session: Session, alert_id: int, findings_limit: int | None = None) -> AlertView:
    """One alert as ``alerts_page`` lists it (at most ``findings_limit`` findings, the largest changes; None:
    all), or NotFound."""
    view = stored.alert_view(session, alert_id, findings_limit=findings_limit)
    if view is None:
        raise NotFound(f"no alert {alert_id}")
    return view
