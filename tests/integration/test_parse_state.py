"""Parse state is per result: a run naming bytes an earlier run's parse already read has no records of its own
until its parse runs, so static detection in between must treat its kernels as unknown, not as gone (found by
bench/soak.py: a "-100 %" static finding and its alert appeared, then vanished when the parse landed); and a
parse a killed worker lost is found by beat's sweep."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.pipeline.parse_artifacts import parse_results
from service.pipeline.static_detection import detect_static
from service.pipeline.submit import submit_manifest
from service.store.db import unit_of_work
from service.store.models import Finding, Result
from tests import builders

SASS = Path(__file__).parents[1] / "fixtures" / "sass" / "synthetic_sm80_sm90a.sass"


class NoFollowUps:
    """Parsing and detection run when the test says so, not on submit."""

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        pass

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        pass

    def enqueue_runs(self, orders: Sequence[Any]) -> None:
        raise AssertionError("nothing here orders runs")

    def enqueue_compare(self, run_ids: Sequence[int]) -> None:
        pass


def test_a_result_not_parsed_yet_has_unknown_kernels_not_gone_ones(sessions: sessionmaker[Session],
                                                                    tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    ref = store.put(SASS.read_bytes(), "sass", "k.sass")

    def run(position: int) -> tuple[int, int]:
        result = builders.result(artifacts=[{"kind": "sass", "name": "k.sass", "sha256": ref.sha256,
                                             "size": ref.size}])
        submit_manifest(sessions, NoFollowUps(), builders.manifest(position, [result]), store)  # type: ignore[arg-type]
        with sessions() as s:
            row = s.execute(select(Result.id, Result.series_id).order_by(Result.id.desc())).first()
            assert row is not None
            return row[0], row[1]

    first, series_id = run(0)
    with unit_of_work(sessions) as s:
        parse_results(s, store, [first])
    second, _ = run(1)  # the same code, so the same bytes; its own parse has not run
    with unit_of_work(sessions) as s:
        detect_static(s, [series_id], store)
    with sessions() as s:
        assert s.scalars(select(Finding)).all() == []
    with unit_of_work(sessions) as s:
        parse_results(s, store, [second])
        detect_static(s, [series_id], store)
    with sessions() as s:
        assert s.scalars(select(Finding)).all() == []  # and once parsed: the same kernels, no change


def test_the_parse_sweep_finds_a_lost_parse_and_nothing_else(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    """What beat's sweep queues again (service/tasks.py): results of runs finished before the cutoff with a
    parseable artifact unread for them; not a parsed one, not a newer one, not a pruned one."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import update

    from service.pipeline.parse_artifacts import overdue_parses
    from service.store.models import Artifact, Run

    store = ArtifactStore(tmp_path / "artifacts")
    ref = store.put(SASS.read_bytes(), "sass", "k.sass")
    results = []
    for position in range(3):  # builders date runs from 2026-02-01, a minute apart
        result = builders.result(artifacts=[{"kind": "sass", "name": "k.sass", "sha256": ref.sha256,
                                             "size": ref.size}])
        submit_manifest(sessions, NoFollowUps(), builders.manifest(position, [result]), store)  # type: ignore[arg-type]
        with sessions() as s:
            results.append(s.scalars(select(Result.id).order_by(Result.id.desc())).first())
    parsed, lost, recent = results
    with unit_of_work(sessions) as s:
        parse_results(s, store, [parsed])
        s.execute(update(Run).where(Run.id == select(Result.run_id).where(Result.id == recent).scalar_subquery())
                  .values(finished_at=datetime.now(UTC)))
    cutoff = datetime.now(UTC) - timedelta(minutes=1)
    with sessions() as s:
        assert overdue_parses(s, cutoff) == [lost]
    with unit_of_work(sessions) as s:  # pruned: its bytes are gone, nothing to parse
        s.execute(update(Artifact).values(pruned_at=datetime.now(UTC)))
    with sessions() as s:
        assert overdue_parses(s, cutoff) == []
