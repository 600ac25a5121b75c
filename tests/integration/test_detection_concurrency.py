"""Two workers on one series or one result at once (two Celery pool processes, a redelivered task, a resubmitted
run's follow-ups): the second waits for the first's transaction and then builds on it, instead of inserting the
same rows and failing on a unique constraint (which lost that task's work; both found by bench/soak.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.contract import parse_manifest
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.detection import detect_many
from service.pipeline.ingest import ingest_manifest
from service.pipeline.parse_artifacts import parse_results
from service.store.db import unit_of_work
from service.store.models import Finding, KernelCode, Result, Series
from tests import builders

SASS = Path(__file__).parents[1] / "fixtures" / "sass" / "synthetic_sm80_sm90a.sass"


# PostgreSQL only: SQLite lets one writer in at a time, so it has no such race.
postgres_only = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


def second_waits_for_first(sessions: sessionmaker[Session], first: Session,
                           work: Callable[[Session], object]) -> None:
    """``work`` in a second transaction on another thread while ``first`` (which did the same work, flushed, not
    committed) holds its rows: it must wait, then finish without an error once ``first`` commits."""
    errors: list[BaseException] = []

    def second() -> None:
        try:
            with unit_of_work(sessions) as s:
                work(s)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(1.0)
    assert thread.is_alive(), "the second transaction did not wait for the first"
    first.commit()
    first.close()
    thread.join(60)
    assert not thread.is_alive() and errors == [], errors


@postgres_only
def test_a_second_detection_of_a_series_waits_and_then_agrees(sessions: sessionmaker[Session]) -> None:
    with unit_of_work(sessions) as s:
        for doc in builders.step_series_manifests([1e-3] * 15 + [1.2e-3] * 15):
            ingest_manifest(s, parse_manifest(doc))
    with sessions() as s:
        series_id = s.scalars(select(Series.id)).one()
    detector = EDivisiveDetector()

    first = sessions()
    assert detect_many(first, [series_id], detector) >= 1  # flushed, not committed: the series row is held
    second_waits_for_first(sessions, first, lambda s: detect_many(s, [series_id], detector))
    with sessions() as s:
        rows = s.execute(select(Finding.commit_id, Finding.detector, func.count()).where(Finding.series_id == series_id)
                         .group_by(Finding.commit_id, Finding.detector)).all()
    assert rows and all(count == 1 for _, _, count in rows), rows


@postgres_only
def test_a_second_parse_of_a_result_waits_and_stores_its_records_once(sessions: sessionmaker[Session],
                                                                      tmp_path: Path) -> None:
    """A resubmitted run enqueues its parses again: two workers then parse one result at once."""
    store = ArtifactStore(tmp_path / "artifacts")
    ref = store.put(SASS.read_bytes(), "sass", "k.sass")
    doc = builders.manifest(0, [builders.result(artifacts=[{"kind": "sass", "name": "k.sass", "sha256": ref.sha256,
                                                            "size": ref.size}])])
    with unit_of_work(sessions) as s:
        ingest_manifest(s, parse_manifest(doc))
    with sessions() as s:
        result_id = s.scalars(select(Result.id)).one()

    first = sessions()
    assert parse_results(first, store, [result_id]) > 0  # flushed, not committed: the result row is held
    second_waits_for_first(sessions, first, lambda s: parse_results(s, store, [result_id]))
    with sessions() as s:
        names = s.scalars(select(KernelCode.name).where(KernelCode.result_id == result_id)).all()
    assert names and len(names) == len(set(names))
