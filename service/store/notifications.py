"""The ``alert_notification`` rows in the store: marking them pending, finding the due ones, the lease a delivery
takes, and what a delivery records as it goes. service/pipeline/notify.py decides when; these read and write."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from kernelwatch.vocabulary import NotificationState
from service.store.models import Alert, AlertNotification, BisectJob, Finding

PENDING, SENT, FAILED = NotificationState.PENDING, NotificationState.SENT, NotificationState.FAILED


def notified(session: Session, alert_ids: Sequence[int], channel: str) -> set[int]:
    """The alerts among these that have a row for the channel."""
    return set(session.scalars(select(AlertNotification.alert_id).where(
        AlertNotification.alert_id.in_(alert_ids), AlertNotification.channel == channel)))


def make_pending(session: Session, alert_ids: Sequence[int], channel: str, now: datetime) -> None:
    """Make the rows of these alerts pending, due now, a revision later (a delivery that read an older one goes
    again)."""
    session.execute(
        update(AlertNotification)
        .where(AlertNotification.alert_id.in_(alert_ids), AlertNotification.channel == channel)
        .values(state=PENDING, next_attempt_at=now, updated_at=now, revision=AlertNotification.revision + 1))


def add_if_absent(session: Session, row: AlertNotification) -> None:
    """Store a new row, in a savepoint: when another transaction made the alert's row first, that one stands (it
    is pending, which is all a new one wanted)."""
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:
        pass


def ended_jobs(session: Session, series_ids: Sequence[int], channel: str,
               states: Sequence[str]) -> list[tuple[int | None, int, list[int] | None]]:
    """(alert, job, the jobs its row replied to) of the jobs on these series in ``states``, for the alerts with a
    row for the channel."""
    rows = session.execute(
        select(Finding.alert_id, BisectJob.id, AlertNotification.replied_jobs)
        .select_from(BisectJob)
        .join(Finding, Finding.id == BisectJob.finding_id)
        .join(AlertNotification, (AlertNotification.alert_id == Finding.alert_id)
              & (AlertNotification.channel == channel))
        .where(BisectJob.series_id.in_(sorted(set(series_ids))), BisectJob.state.in_(states))
    ).all()
    return [(alert_id, job_id, replied) for alert_id, job_id, replied in rows]


def due(session: Session, channel: str, now: datetime, limit: int) -> list[int]:
    """Alerts whose announcement is due: pending (a new event, or a retry whose backoff is over), or sent but
    behind its alert; not leased by a delivery running now. Those waiting longest first."""
    return list(session.scalars(
        select(AlertNotification.alert_id)
        .join(Alert, Alert.id == AlertNotification.alert_id)
        .where(AlertNotification.channel == channel,
               or_(and_(AlertNotification.state == PENDING,
                        or_(AlertNotification.next_attempt_at.is_(None), AlertNotification.next_attempt_at <= now)),
                   and_(AlertNotification.state == SENT, Alert.updated_at > AlertNotification.sent_at)),
               or_(AlertNotification.claimed_until.is_(None), AlertNotification.claimed_until < now))
        .order_by(AlertNotification.next_attempt_at, AlertNotification.id).limit(limit)))


def failed(session: Session, channel: str) -> list[int]:
    """The alerts whose row for the channel was given up."""
    return list(session.scalars(select(AlertNotification.alert_id).where(
        AlertNotification.channel == channel, AlertNotification.state == FAILED)))


def rows_of(session: Session, alert_ids: Sequence[int]) -> list[AlertNotification]:
    """Every channel's row of these alerts, by id."""
    return list(session.scalars(select(AlertNotification).where(
        AlertNotification.alert_id.in_(sorted(set(alert_ids)))).order_by(AlertNotification.id)))


def claim(session: Session, alert_id: int, channel: str, now: datetime, until: datetime) -> tuple[int, int] | None:
    """Take the lease of the alert's row until ``until``: (row id, revision seen); (-1, -1) when another delivery
    holds it; None when there is no row."""
    row = session.scalars(select(AlertNotification).where(AlertNotification.alert_id == alert_id,
                                                          AlertNotification.channel == channel)).first()
    if row is None:
        return None
    # A conditional update, not a read-then-write: of two deliveries racing, exactly one matches.
    taken = session.execute(
        update(AlertNotification)
        .where(AlertNotification.id == row.id,
               or_(AlertNotification.claimed_until.is_(None), AlertNotification.claimed_until < now))
        .values(claimed_until=until)
        .execution_options(synchronize_session=False))
    if taken.rowcount == 0:  # type: ignore[attr-defined]
        return -1, -1
    return row.id, row.revision


def release(session: Session, row_id: int) -> None:
    session.execute(update(AlertNotification).where(AlertNotification.id == row_id).values(claimed_until=None))


def finish(session: Session, row_id: int, revision: int, now: datetime, synced_at: datetime) -> bool:
    """Sent (as of ``synced_at``), unless the row's revision moved on meanwhile: then only its lease is released,
    and False."""
    done = session.execute(
        update(AlertNotification).where(AlertNotification.id == row_id, AlertNotification.revision == revision)
        .values(state=SENT, attempts=0, last_error=None, next_attempt_at=None, claimed_until=None,
                sent_at=synced_at, updated_at=now).execution_options(synchronize_session=False))
    if done.rowcount:  # type: ignore[attr-defined]
        return True
    session.execute(update(AlertNotification).where(AlertNotification.id == row_id)
                    .values(claimed_until=None, updated_at=now))
    return False


def record(session: Session, row_id: int, **values: Any) -> None:
    """Write these columns of one row."""
    session.execute(update(AlertNotification).where(AlertNotification.id == row_id).values(**values)
                    .execution_options(synchronize_session=False))


def counts(session: Session, channel: str) -> dict[str, int]:
    """Rows of this channel per state."""
    return {state: n for state, n in session.execute(
        select(AlertNotification.state, func.count(AlertNotification.id))
        .where(AlertNotification.channel == channel).group_by(AlertNotification.state))}
