"""Row locks that serialise work on one series across workers."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.store.models import Series


def lock_series(session: Session, series_ids: Sequence[int]) -> None:
    """Take the series' rows for this transaction (PostgreSQL; SQLite writes one transaction at a time anyway):
    two workers detecting one series at once would both read its findings, both insert the same one, and the
    second would fail on the unique constraint. In id order, so that two batches never wait on each other in a
    cycle."""
    if series_ids and session.get_bind().dialect.name == "postgresql":
        session.execute(select(Series.id).where(Series.id.in_(sorted(set(series_ids)))).order_by(Series.id)
                        .with_for_update())
