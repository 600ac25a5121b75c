"""Two writers on the embedded SQLite store, as `kernelwatch serve` has them (a request and the background thread,
service/pipeline/background.py): a unit of work that reads, then writes after the other committed, must wait its
turn, not fail. With deferred transactions it failed at once with "database is locked" (a stale snapshot cannot
be upgraded, and SQLite does not wait then); units of work now begin IMMEDIATE (service/store/db.py)."""

from __future__ import annotations

import threading

from sqlalchemy import func, select

from service.store.db import make_engine, make_session_factory, unit_of_work, upgrade
from service.store.models import Repository


def test_a_reading_writer_waits_for_the_other_writer_instead_of_failing(sqlite_database: str) -> None:
    upgrade(sqlite_database)
    engine = make_engine(sqlite_database)
    sessions = make_session_factory(engine)
    read_done, other_done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def other_writer() -> None:
        read_done.wait(30)
        try:
            with unit_of_work(sessions) as session:  # meets the first writer's transaction, open since its read
                session.add(Repository(name="b", url="file:///b"))
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            other_done.set()

    thread = threading.Thread(target=other_writer)
    thread.start()
    try:
        with unit_of_work(sessions) as session:
            count = session.scalar(select(func.count(Repository.id)))  # the read: this transaction's snapshot
            read_done.set()
            # Before: the other writer committed here, and the write below failed. Now it waits for this one.
            other_done.wait(1.0)
            session.add(Repository(name="a", url="file:///a", default_branch=f"n{count}"))
        thread.join(60)
        assert errors == []
        with sessions() as session:
            assert sorted(session.scalars(select(Repository.name))) == ["a", "b"]
    finally:
        read_done.set()
        thread.join(60)
        engine.dispose()
