"""GitHub webhook deliveries after they are stored: attempts, retries, the dead letter, and the read view.

A delivery is ``received`` (stored, not handed to the queue), ``queued`` (handed out; a handler may be on it),
``done`` (handled: its ``outcome`` says how) or ``failed`` (its handling failed ``DELIVERY_ATTEMPTS`` times:
dead-lettered, until someone retries it with `kernelwatch deliveries --retry ID` or
``POST /api/v1/github/deliveries/<id>/retry``). Before issue 18 a delivery whose handler kept failing stayed
``queued`` for ever, and GitHub's redelivery of it was answered "duplicate": nothing ever handled it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import Conflict, NotFound
from kernelwatch.vocabulary import DeliveryState
from service.store.db import unit_of_work
from service.store.models import WebhookDelivery
from service.store.times import utc

# Tries before the dead letter. Celery spaces them 5, 10, 20, 40, 80 s apart (service/tasks.py _github_countdown),
# the embedded queue likewise (service/pipeline/background.py): about two and a half minutes of GitHub or the
# database being away is ridden out; longer needs a person, who can see it.
DELIVERY_ATTEMPTS = 6
# A queued delivery untouched this long lost its handler (a worker killed mid-task, a server stopped with work
# pending): the sweep hands it out again. Longer than the slowest retry spacing, so a delivery waiting for its
# retry is never handed out twice.
STALE_AFTER = timedelta(minutes=15)
STATES: tuple[DeliveryState, ...] = tuple(DeliveryState)
MAX_ERROR_CHARS = 2000


def begin_attempt(sessions: sessionmaker[Session], delivery_id: int) -> tuple[str, dict[str, Any]] | None:
    """Count one attempt at a queued delivery; its (event, payload), or None when there is nothing to do (gone,
    done, or dead-lettered since it was queued)."""
    with unit_of_work(sessions) as session:
        delivery = session.get(WebhookDelivery, delivery_id, with_for_update=True)
        if delivery is None or delivery.state in ("done", "failed"):
            return None
        delivery.attempts += 1
        delivery.attempted_at = datetime.now(UTC)
        return delivery.event, dict(delivery.payload)


def finish(sessions: sessionmaker[Session], delivery_id: int, outcome: str) -> None:
    with unit_of_work(sessions) as session:
        delivery = session.get(WebhookDelivery, delivery_id)
        if delivery is not None:
            delivery.state, delivery.outcome, delivery.processed_at = DeliveryState.DONE, outcome, datetime.now(UTC)


def attempt_failed(sessions: sessionmaker[Session], delivery_id: int, error: str) -> bool:
    """Record a failed attempt: True when the delivery should be tried again, False when this was its last
    attempt and it is now dead-lettered (``failed``)."""
    with unit_of_work(sessions) as session:
        delivery = session.get(WebhookDelivery, delivery_id, with_for_update=True)
        if delivery is None or delivery.state in ("done", "failed"):
            return False
        delivery.last_error = error[:MAX_ERROR_CHARS]
        if delivery.attempts < DELIVERY_ATTEMPTS:
            return True
        delivery.state, delivery.processed_at = DeliveryState.FAILED, datetime.now(UTC)
        delivery.outcome = f"dead-lettered after {delivery.attempts} attempts: {error[:MAX_ERROR_CHARS]}"
        return False


def requeue(sessions: sessionmaker[Session], delivery_id: int) -> None:
    """Mark a failed (or never queued) delivery queued again with a fresh count of attempts; NotFound or
    Conflict (with why) when there is none or it is handled or queued already."""
    with unit_of_work(sessions) as session:
        delivery = session.get(WebhookDelivery, delivery_id, with_for_update=True)
        if delivery is None:
            raise NotFound(f"no webhook delivery {delivery_id}")
        if delivery.state == "done":
            raise Conflict(f"delivery {delivery_id} was handled ({delivery.outcome or 'done'}): nothing to retry")
        if delivery.state == "queued":
            raise Conflict(f"delivery {delivery_id} is queued already")
        delivery.state, delivery.attempts, delivery.outcome, delivery.processed_at = DeliveryState.QUEUED, 0, None, None


def stale(sessions: sessionmaker[Session], older_than: timedelta = STALE_AFTER, now: datetime | None = None,
          limit: int = 100) -> list[int]:
    """Queued deliveries nobody has touched for ``older_than``: their handler is gone (a worker killed, a
    server stopped with work pending, a handler that crashed). Those to hand out again; their clock restarts
    here, so that two sweeps do not hand one out twice. One whose handler stopped ``DELIVERY_ATTEMPTS`` times
    is dead-lettered instead: a crash that repeats is not cured by another try."""
    moment = now or datetime.now(UTC)
    cutoff = moment - older_than
    with unit_of_work(sessions) as session:
        found = list(session.scalars(
            select(WebhookDelivery).where(
                WebhookDelivery.state == "queued",
                or_(WebhookDelivery.attempted_at < cutoff,
                    WebhookDelivery.attempted_at.is_(None) & (WebhookDelivery.received_at < cutoff)))
            .order_by(WebhookDelivery.id).limit(limit).with_for_update(skip_locked=True)))
        again: list[int] = []
        for delivery in found:
            if delivery.attempts >= DELIVERY_ATTEMPTS:
                delivery.state, delivery.processed_at = DeliveryState.FAILED, moment
                delivery.outcome = (f"dead-lettered: its handler stopped {delivery.attempts} times without "
                                    f"finishing ({delivery.last_error or 'no error recorded'})")
            else:
                delivery.attempted_at = moment
                again.append(delivery.id)
        return again


def locked_by_uid(session: Session, delivery_uid: str) -> WebhookDelivery | None:
    """The delivery GitHub gave this id, its row taken for the transaction."""
    return session.scalars(select(WebhookDelivery).filter_by(delivery_uid=delivery_uid).with_for_update()).first()


def locked_by_body(session: Session, body_sha256: str) -> WebhookDelivery | None:
    """The delivery whose body had this SHA-256 (under whatever id), its row taken for the transaction."""
    return session.scalars(select(WebhookDelivery).filter_by(body_sha256=body_sha256).with_for_update()).first()


def add_new(session: Session, delivery: WebhookDelivery) -> bool:
    """Store a new delivery, in a savepoint; False when a concurrent delivery of the same id stored it first."""
    try:
        with session.begin_nested():
            session.add(delivery)
    except IntegrityError:
        return False
    return True


def deliveries_view(session: Session, states: Sequence[str] = (), limit: int = 50) -> list[dict[str, Any]]:
    """The newest deliveries (optionally of some states), for people: never the payload, which is GitHub's."""
    query = select(WebhookDelivery).order_by(WebhookDelivery.id.desc()).limit(limit)
    if states:
        query = query.where(WebhookDelivery.state.in_(list(states)))
    return [_view(d) for d in session.scalars(query)]


def delivery_view(session: Session, delivery_id: int) -> dict[str, Any] | None:
    delivery = session.get(WebhookDelivery, delivery_id)
    return None if delivery is None else _view(delivery)


def _view(d: WebhookDelivery) -> dict[str, Any]:
    return {"id": d.id, "delivery": d.delivery_uid, "event": d.event, "state": d.state, "attempts": d.attempts,
            "received_at": _iso(d.received_at), "attempted_at": _iso(d.attempted_at),
            "processed_at": _iso(d.processed_at), "outcome": d.outcome, "last_error": d.last_error}


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else utc(moment).isoformat()
