"""Two workers detecting one series at once (two Celery pool processes, a redelivered task): the second waits
for the first's transaction and then finds its findings, instead of inserting the same finding and failing on
the unique constraint (which lost that task's attribution, grouping and notification; found by bench/soak.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from service.contract import parse_manifest
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.detection import detect_many
from service.pipeline.ingest import ingest_manifest
from service.store.db import make_engine, make_session_factory, unit_of_work, upgrade
from service.store.models import Finding, Series
from tests import builders


@pytest.fixture
def pg_sessions(pg_database: str) -> Iterator[sessionmaker[Session]]:
    """PostgreSQL only: SQLite lets one writer in at a time, so it has no such race."""
    upgrade(pg_database)
    engine = make_engine(pg_database)
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


def test_a_second_detection_of_a_series_waits_and_then_agrees(pg_sessions: sessionmaker[Session]) -> None:
    sessions = pg_sessions
    with unit_of_work(sessions) as s:
        for doc in builders.step_series_manifests([1e-3] * 15 + [1.2e-3] * 15):
            ingest_manifest(s, parse_manifest(doc))
    with sessions() as s:
        series_id = s.scalars(select(Series.id)).one()
    detector = EDivisiveDetector()

    first = sessions()
    assert detect_many(first, [series_id], detector) >= 1  # flushed, not committed: the series row is held
    errors: list[BaseException] = []
    found: list[int] = []

    def second() -> None:
        try:
            with unit_of_work(sessions) as s:
                found.append(detect_many(s, [series_id], detector))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(1.0)
    assert thread.is_alive(), "the second detection did not wait for the first"
    first.commit()
    first.close()
    thread.join(60)
    assert not thread.is_alive() and errors == [], errors
    with sessions() as s:
        rows = s.execute(select(Finding.commit_id, Finding.detector, func.count()).where(Finding.series_id == series_id)
                         .group_by(Finding.commit_id, Finding.detector)).all()
    assert rows and all(count == 1 for _, _, count in rows), rows
