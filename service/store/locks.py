"""Row locks that serialise work on one series, one result or one commit's comparison, across workers
(PostgreSQL; SQLite lets one writing transaction in at a time anyway). Always in id order, so that two batches never
wait on each other in a cycle."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.store.models import Commit, Result, Series


def lock_series(session: Session, series_ids: Sequence[int]) -> None:
    """Take the series' rows for this transaction: two workers detecting one series at once would both read its
    findings, both insert the same one, and the second would fail on the unique constraint."""
    if series_ids and session.get_bind().dialect.name == "postgresql":
        session.execute(select(Series.id).where(Series.id.in_(sorted(set(series_ids)))).order_by(Series.id)
                        .with_for_update())


def lock_results(session: Session, result_ids: Sequence[int]) -> None:
    """Take the results' rows for this transaction: two parses of one result at once (a resubmitted run's
    follow-ups, a redelivered task) would both delete its records and both insert them again."""
    if result_ids and session.get_bind().dialect.name == "postgresql":
        session.execute(select(Result.id).where(Result.id.in_(sorted(set(result_ids)))).order_by(Result.id)
                        .with_for_update())


def lock_commit(session: Session, commit_id: int) -> None:
    """Take a commit's row for this transaction while its comparison with its parent is stored: the runs of one
    commit land as several uploads (a run per round), each compared on write in a worker of its own, and two that
    found no stored comparison of the same runs both inserted it; the second failed on its unique key (the soak's
    worker log, 2026-12-07)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(Commit.id).where(Commit.id == commit_id).with_for_update())
