"""Slack announcements of alerts, recorded in ``alert_notification`` so that an outage delays them, never loses them.

Two halves, apart in time:

- **Marking**, inside the transaction that wrote the event: a new alert gets a pending row; a triage, a note,
  a change of its findings or the end of a bisection make an existing row pending again. The mark commits with the
  event or not at all, so no event is ever written without its announcement owed.
- **Delivery**, after commit (a ``notify`` task, or in-process in the embedded default): brings Slack up to date
  with the alert. The first delivery posts the top-level message and stores its channel id and ts; later ones
  reply in its thread (each note, each verdict once) and edit the message in place when what it shows changed.
  Each Slack call is followed by its own small commit, so a failure half way resends nothing already sent.
  A transient failure leaves the row pending with a backoff (the task retries, and ``sweep`` finds it after a
  lost task); Slack refusing the call (bad token, unknown channel) marks it failed with the error, for people.

A new alert whose change is being bisected is held back until the bisection ends (or ``MAX_HOLD_S``): each step
of a bisection narrows the range, which replaces the alert with a new one, and announcing each would post one
message per step.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import NotFound
from service.integrations.slack import Posted, SlackRejected, SlackTransient
from service.pipeline.alerts import GroupingOutcome, get_alert
from service.report.alert_views import AlertNoteView
from service.report.slack_blocks import (
    FINDINGS_LISTED,
    SlackMessage,
    SlackVerdict,
    alert_message,
    note_reply,
    slack_alert,
    verdict_reply,
)
from service.store import alerts as stored_alerts
from service.store import notifications as stored
from service.store.bisect_jobs import jobs_of_alert
from service.store.db import unit_of_work
from service.store.models import Alert, AlertNotification
from service.store.notifications import FAILED, PENDING, SENT
from service.store.queries import label_of
from service.store.times import utc

log = logging.getLogger(__name__)

FINISHED_JOB_STATES = ("done", "failed")  # a cancelled job (the change moved) is no news
LEASE_S = 300  # one delivery at a time per alert; longer than a delivery's worst case of retried calls
MAX_ATTEMPTS = 8  # transient failures in a row before a row is given up as failed (about 2 hours of backoff)
BACKOFF_BASE_S = 30
BACKOFF_MAX_S = 3600
HOLD_RECHECK_S = 600
MAX_HOLD_S = 6 * 3600  # a bisection whose runs never come back must not silence its alert for ever
PASSES = 3  # deliveries in a row when events keep arriving during one
EMBEDDED_SWEEP = 20  # due retries an in-process send takes along: a backlog drains over a few sends, not one


class Sender(Protocol):
    def post(self, channel: str, text: str, blocks: Sequence[dict[str, Any]],
             thread_ts: str | None = None) -> Posted: ...

    def update(self, channel_id: str, ts: str, text: str, blocks: Sequence[dict[str, Any]]) -> None: ...


@dataclass(frozen=True)
class DeliveryOutcome:
    alert_id: int
    state: str  # sent | pending (retry after retry_in_s) | failed | held | busy (another delivery runs) | gone
    retry_in_s: float | None = None
    error: str | None = None
    posted: int = 0  # messages posted by this delivery (top-level and replies)
    updated: int = 0


@dataclass(frozen=True)
class NotificationStatus:
    """What the dashboard shows beside an alert: whether Slack has heard of it, and if not, why."""

    channel: str
    state: str
    attempts: int
    last_error: str | None
    next_attempt_at: datetime | None
    sent_at: datetime | None
    posted: bool  # the top-level message exists (a later event may still be pending)


def backoff_s(attempts: int) -> float:
    return float(min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** max(0, attempts - 1)))


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else utc(value)


def alert_url(public_url: str | None, alert_id: int) -> str | None:
    """The alert on the dashboard. There is no page per alert yet: the inbox, paged from just above this alert
    (its ``after`` cursor lists ids below it, newest first), opened at the alert's anchor."""
    if not public_url:
        return None
    return f"{public_url}/?after={alert_id + 1}#alert-{alert_id}"


# --- marking: inside the caller's transaction ---------------------------------------------------------------------

def mark(session: Session, alert_ids: Iterable[int], channel: str, create: bool, now: datetime | None = None
         ) -> list[int]:
    """Make the rows of these alerts pending, due now; with ``create``, give the alerts without one a row.
    Returns the alerts marked."""
    now = now or datetime.now(UTC)
    ids = sorted(set(alert_ids))
    if not ids:
        return []
    existing = stored.notified(session, ids, channel)
    if existing:
        stored.make_pending(session, sorted(existing), channel, now)
    marked = set(existing)
    if create:
        for alert_id in ids:
            if alert_id in existing:
                continue
            # When another transaction made it first, it is pending: all this wanted.
            stored.add_if_absent(session, AlertNotification(
                alert_id=alert_id, channel=channel, state=PENDING, attempts=0, next_attempt_at=now, revision=1,
                note_cursor=0, replied_jobs=[], created_at=now, updated_at=now))
            marked.add(alert_id)
    session.flush()
    return sorted(marked)


def mark_grouped(session: Session, outcome: GroupingOutcome, channel: str) -> list[int]:
    """After grouping: new alerts are owed a message; announced ones whose findings changed, an edit (or, when
    emptied, the grouping's note as a reply). Alerts announced before Slack was configured stay quiet."""
    created = mark(session, outcome.created, channel, create=True)
    changed = mark(session, [*outcome.updated, *outcome.emptied], channel, create=False)
    return sorted({*created, *changed})


def mark_verdicts(session: Session, series_ids: Sequence[int], channel: str) -> list[int]:
    """After follow-ups advanced: announced alerts with a bisection or confirmation that ended and was not replied
    yet."""
    if not series_ids:
        return []
    rows = stored.ended_jobs(session, series_ids, channel, FINISHED_JOB_STATES)
    owed = {alert_id for alert_id, job_id, replied in rows if alert_id is not None and job_id not in (replied or [])}
    return mark(session, owed, channel, create=False)


def due(session: Session, channel: str, now: datetime | None = None, limit: int = 100) -> list[int]:
    """Alerts whose announcement is due: pending (a new event, or a retry whose backoff is over), or sent but
    behind its alert (triaged by a face that marks nothing, e.g. the dashboard's form: caught here instead)."""
    return stored.due(session, channel, now or datetime.now(UTC), limit)


def retry_failed(session: Session, channel: str, now: datetime | None = None) -> list[int]:
    """Put the given-up rows back to pending (after the token or channel was fixed); the alerts concerned."""
    now = now or datetime.now(UTC)
    return mark(session, stored.failed(session, channel), channel, create=False, now=now)


def notification_status(session: Session, alert_ids: Sequence[int]) -> dict[int, list[NotificationStatus]]:
    """Per alert, its announcements (one per channel; none when Slack is off or the alert predates it)."""
    found: dict[int, list[NotificationStatus]] = {}
    if not alert_ids:
        return found
    for row in stored.rows_of(session, alert_ids):
        found.setdefault(row.alert_id, []).append(NotificationStatus(
            channel=row.channel, state=row.state, attempts=row.attempts, last_error=row.last_error,
            next_attempt_at=_utc_or_none(row.next_attempt_at), sent_at=_utc_or_none(row.sent_at),
            posted=row.message_ts is not None))
    return found


# --- delivery: after commit, one alert at a time ------------------------------------------------------------------

@dataclass
class _Progress:
    posted: int = 0
    updated: int = 0


@dataclass(frozen=True)
class _Snapshot:
    """What Slack should show for an alert, read in one session."""

    message: SlackMessage
    notes: list[tuple[int, AlertNoteView]]  # (note id, note) not replied yet, oldest first
    verdicts: list[SlackVerdict]  # every ended job of the alert
    bisecting: bool  # a bisection of one of its findings is still running
    created_at: datetime
    finding_count: int


def deliver(sessions: sessionmaker[Session], sender: Sender, alert_id: int, channel: str,
            public_url: str | None = None, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
            ) -> DeliveryOutcome:
    """Bring Slack up to date with one alert; never raises for Slack's failures (they are recorded on the row)."""
    progress = _Progress()
    for _ in range(PASSES):
        claimed_at = clock()
        claim = _claim(sessions, alert_id, channel, claimed_at)
        if claim is None:
            return DeliveryOutcome(alert_id, "gone", posted=progress.posted, updated=progress.updated)
        row_id, revision = claim
        if row_id < 0:
            return DeliveryOutcome(alert_id, "busy", posted=progress.posted, updated=progress.updated)
        try:
            state = _sync(sessions, sender, row_id, alert_id, public_url, clock, progress)
        except SlackTransient as exc:
            return _record_failure(sessions, row_id, alert_id, str(exc), clock(), exc.retry_after_s, False, progress)
        except SlackRejected as exc:
            return _record_failure(sessions, row_id, alert_id, str(exc), clock(), None, True, progress)
        except BaseException:
            _release(sessions, row_id)
            raise
        if state == "held" or state == "gone":
            return DeliveryOutcome(alert_id, state, retry_in_s=HOLD_RECHECK_S if state == "held" else None,
                                   posted=progress.posted, updated=progress.updated)
        if _finish(sessions, row_id, revision, clock(), synced_at=claimed_at):
            return DeliveryOutcome(alert_id, SENT, posted=progress.posted, updated=progress.updated)
    # Events kept arriving: the row stays pending and due; the next task or sweep carries on.
    return DeliveryOutcome(alert_id, PENDING, retry_in_s=0.0, posted=progress.posted, updated=progress.updated)


def _claim(sessions: sessionmaker[Session], alert_id: int, channel: str, now: datetime) -> tuple[int, int] | None:
    """(row id, revision seen) with the lease taken; (-1, -1) when another delivery holds it; None: no row."""
    with unit_of_work(sessions) as session:
        return stored.claim(session, alert_id, channel, now, until=now + timedelta(seconds=LEASE_S))


def _release(sessions: sessionmaker[Session], row_id: int) -> None:
    with unit_of_work(sessions) as session:
        stored.release(session, row_id)


def _finish(sessions: sessionmaker[Session], row_id: int, revision: int, now: datetime, synced_at: datetime) -> bool:
    """Sent, unless an event was marked while this delivery ran (then: still pending, go again). ``sent_at`` is
    when the delivery read the alert, not when it ended: an alert changed in between is later than it, so
    ``due`` finds it behind."""
    with unit_of_work(sessions) as session:
        return stored.finish(session, row_id, revision, now, synced_at)


def _record_failure(sessions: sessionmaker[Session], row_id: int, alert_id: int, error: str, now: datetime,
                    retry_after_s: float | None, rejected: bool, progress: _Progress) -> DeliveryOutcome:
    with unit_of_work(sessions) as session:
        row = session.get(AlertNotification, row_id)
        if row is None:
            return DeliveryOutcome(alert_id, "gone", error=error)
        row.attempts += 1
        row.last_error = error[:2000]
        row.claimed_until = None
        row.updated_at = now
        if rejected or row.attempts >= MAX_ATTEMPTS:
            row.state, row.next_attempt_at = FAILED, None
            delay = None
        else:
            delay = max(backoff_s(row.attempts), retry_after_s or 0.0)
            row.state, row.next_attempt_at = PENDING, now + timedelta(seconds=delay)
        state = row.state
    log.warning("Slack delivery of alert %s %s: %s", alert_id, "gave up" if state == FAILED else "will retry", error)
    return DeliveryOutcome(alert_id, state, retry_in_s=delay, error=error, posted=progress.posted,
                           updated=progress.updated)


def _sync(sessions: sessionmaker[Session], sender: Sender, row_id: int, alert_id: int, public_url: str | None,
          clock: Callable[[], datetime], progress: _Progress) -> str:
    with sessions() as session:
        row = session.get(AlertNotification, row_id)
        if row is None:
            return "gone"  # the alert was deleted (its row with it)
        channel, channel_id, ts, rendered = row.channel, row.channel_id, row.message_ts, row.rendered
        replied = set(row.replied_jobs or [])
        try:
            snapshot = _snapshot(session, alert_id, row.note_cursor, public_url)
        except NotFound:
            return "gone"
    now = clock()
    if ts is None and snapshot.finding_count == 0:
        return SENT  # emptied before it was ever announced: nothing to say (a refill marks it again)
    if ts is None:
        held_since = utc(snapshot.created_at)
        if snapshot.bisecting and now - held_since < timedelta(seconds=MAX_HOLD_S):
            _record(sessions, row_id, state=PENDING, next_attempt_at=now + timedelta(seconds=HOLD_RECHECK_S),
                    claimed_until=None, last_error=None, updated_at=now)
            return "held"
        posted = sender.post(channel, snapshot.message.text, snapshot.message.blocks)
        progress.posted += 1
        channel_id, ts, rendered = posted.channel_id, posted.ts, _digest(snapshot.message)
        # Stored before anything else is tried: whatever fails next, this message is never posted again.
        _record(sessions, row_id, channel_id=channel_id, message_ts=ts, rendered=rendered, updated_at=now)
    assert channel_id is not None and ts is not None
    for note_id, note in snapshot.notes:
        reply = note_reply(note)
        sender.post(channel_id, reply.text, reply.blocks, thread_ts=ts)
        progress.posted += 1
        _record(sessions, row_id, note_cursor=note_id, updated_at=clock())
    for verdict in snapshot.verdicts:
        if verdict.job_id in replied:
            continue
        reply = verdict_reply(verdict)
        sender.post(channel_id, reply.text, reply.blocks, thread_ts=ts)
        progress.posted += 1
        replied.add(verdict.job_id)
        _record(sessions, row_id, replied_jobs=sorted(replied), updated_at=clock())
    digest = _digest(snapshot.message)
    if digest != rendered:
        sender.update(channel_id, ts, snapshot.message.text, snapshot.message.blocks)
        progress.updated += 1
        _record(sessions, row_id, rendered=digest, updated_at=clock())
    return SENT


def _record(sessions: sessionmaker[Session], row_id: int, **values: Any) -> None:
    with unit_of_work(sessions) as session:
        stored.record(session, row_id, **values)


def _digest(message: SlackMessage) -> str:
    return hashlib.sha256(json.dumps(message.as_json(), sort_keys=True).encode()).hexdigest()


def _snapshot(session: Session, alert_id: int, note_cursor: int, public_url: str | None) -> _Snapshot:
    # The worst findings only, ranked in SQL, and the count of all: an alert where a thousand series moved
    # costs a page of rows. NotFound when the alert is gone.
    view = get_alert(session, alert_id, findings_limit=FINDINGS_LISTED)
    alert = session.get(Alert, alert_id)
    assert alert is not None
    hardware = stored_alerts.device_kinds_of_series(session, [f.series_id for f in view.findings])
    every_kind = stored_alerts.device_kinds_of_alert(session, alert_id)
    jobs = jobs_of_alert(session, alert_id)
    verdicts = [SlackVerdict(job_id=job.id, purpose=job.purpose, state=job.state,
                             benchmark=label_of(suite, name, params), culprit_sha=job.culprit_sha,
                             message=job.message or "")
                for job, suite, name, params in jobs if job.state in FINISHED_JOB_STATES]
    bisecting = any(job.purpose == "bisect" and job.state in ("pending", "running") for job, *_ in jobs)
    notes = [(n.id, AlertNoteView(author=n.author, text=n.text, state_from=n.state_from, state_to=n.state_to,
                                  created_at=utc(n.created_at)))
             for n in stored_alerts.notes_after(session, alert_id, note_cursor)]
    message = alert_message(slack_alert(view, hardware, verdicts, alert_url(public_url, alert_id),
                                        hardware=every_kind))
    return _Snapshot(message=message, notes=notes, verdicts=verdicts, bisecting=bisecting,
                     created_at=alert.created_at, finding_count=view.finding_count)


# --- the wiring the faces hold ------------------------------------------------------------------------------------

@dataclass
class SlackNotifier:
    """Slack notification for one process: marks events in the caller's transaction, and starts deliveries after
    commit through ``dispatch`` (a Celery task in the distributed form; by default, right here)."""

    sessions: sessionmaker[Session]
    sender: Sender
    channel: str
    public_url: str | None = None
    dispatch: Callable[[int], None] | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    def mark_grouped(self, session: Session, outcome: GroupingOutcome) -> list[int]:
        return mark_grouped(session, outcome, self.channel)

    def mark_alerts(self, session: Session, alert_ids: Iterable[int]) -> list[int]:
        return mark(session, alert_ids, self.channel, create=False, now=self.clock())

    def mark_verdicts(self, session: Session, series_ids: Sequence[int]) -> list[int]:
        return mark_verdicts(session, series_ids, self.channel)

    def deliver(self, alert_id: int) -> DeliveryOutcome:
        return deliver(self.sessions, self.sender, alert_id, self.channel, self.public_url, self.clock)

    def send(self, alert_ids: Iterable[int]) -> None:
        """Start the deliveries of these alerts. Called after commit: a failure to start one (the broker is down)
        is logged and left to the sweep, since the alert's row is pending already and the event is stored.

        In-process (the embedded default has no beat to run ``sweep``), the retries that are due go along."""
        ids = sorted(set(alert_ids))
        for alert_id in ids:
            self._start(alert_id)
        if self.dispatch is None:
            with self.sessions() as session:
                retries = [a for a in due(session, self.channel, self.clock(), limit=EMBEDDED_SWEEP) if a not in ids]
            for alert_id in retries:
                outcome = self._start(alert_id)
                if outcome is not None and outcome.error is not None:
                    break  # Slack still failing: the next send tries again, without waiting on it here

    def _start(self, alert_id: int) -> DeliveryOutcome | None:
        try:
            if self.dispatch is None:
                return self.deliver(alert_id)
            self.dispatch(alert_id)
        except Exception as exc:  # noqa: BLE001 - the row is pending; the sweep delivers it later
            log.warning("could not start the Slack delivery of alert %s: %s", alert_id, exc)
        return None

    def sweep(self, limit: int = 100) -> list[int]:
        """Start the deliveries that are due: retries whose backoff is over, and any whose task was lost."""
        with self.sessions() as session:
            ids = due(session, self.channel, self.clock(), limit)
        for alert_id in ids:
            self._start(alert_id)
        return ids

    def retry_failed(self) -> list[int]:
        with unit_of_work(self.sessions) as session:
            ids = retry_failed(session, self.channel, self.clock())
        self.send(ids)
        return ids

    def counts(self) -> dict[str, int]:
        """Rows of this channel per state (pending, sent, failed)."""
        with self.sessions() as session:
            return stored.counts(session, self.channel)
