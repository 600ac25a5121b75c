"""Results stored without roofline figures (before migration 0011) get the figures ingest would have stored, by
`kernelwatch db upgrade` or `kernelwatch db backfill-roofline`: the same numbers, on both databases, once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from service.contract import parse_manifest
from service.pipeline.ingest import ingest_manifest
from service.pipeline.result_roofline_rows import ROOFLINE_COLUMNS
from service.pipeline.roofline_backfill import backfill_roofline
from service.store.db import make_engine, make_session_factory, unit_of_work
from service.store.models import Result, Run, Series
from tests import builders
from tests.processes import clean_env, kernelwatch


def stored_runs() -> list[dict[str, Any]]:
    """An H200 run (published roofs; one result names no dtype, one bf16, one with its device time beside it, which
    its figures are drawn against), a calibrated CPU run, a CPU run that did not calibrate (no roof), and a result
    without counts."""
    h200 = builders.manifest(0, environment=builders.environment(**builders.H200), results=[
        builders.result(), builders.result(name="softmax_bf16", params={"rows": 256, "dtype": "bfloat16"}),
        builders.result(name="uncounted", flops=None, bytes_accessed=None),
        builders.result(name="device_timed"),
        builders.result(name="device_timed", metric="device_time", samples=[1e-4, 1.1e-4, 0.9e-4], flops=None,
                        bytes_accessed=None)])
    calibrated = builders.manifest(1, environment=builders.environment(calibration=builders.calibration()))
    plain = builders.manifest(2)
    return [h200, calibrated, plain]


def figures(s: Session) -> dict[tuple[str, str, str], tuple[object, ...]]:
    rows = s.execute(select(Run.run_uid, Series.metric, Result.id, *(getattr(Result, c) for c in ROOFLINE_COLUMNS))
                     .join(Series, Series.id == Result.series_id).join(Run, Run.id == Result.run_id)
                     .where(Series.metric == "wall_time"))
    return {(r[0], r[1], str(r[2])): tuple(r[3:]) for r in rows}


def forget_figures(sessions: sessionmaker[Session]) -> None:
    """What a result stored before 0011 looks like: every roofline column null."""
    with unit_of_work(sessions) as s:
        s.execute(update(Result).values(dict.fromkeys(ROOFLINE_COLUMNS)))


def test_the_backfill_stores_what_ingest_stored(sessions: sessionmaker[Session]) -> None:
    with unit_of_work(sessions) as s:
        for doc in stored_runs():
            ingest_manifest(s, parse_manifest(doc))
    with sessions() as s:
        at_ingest = figures(s)
    with_figures = [k for k, v in at_ingest.items() if v[2] is not None]
    assert len(with_figures) == 4  # three on the H200, one on the calibrated host
    # The device-timed one by its device time (median 1e-4 s), the others by their wall time (1e-3 s).
    by_fraction = sorted(v[3] / v[2] for v in at_ingest.values() if v[2] is not None)  # fraction / roofline_s
    assert by_fraction[-1] == pytest.approx(1 / 1e-4) and by_fraction[0] == pytest.approx(1 / 1e-3)
    forget_figures(sessions)

    with unit_of_work(sessions) as s:
        counts = backfill_roofline(s)
    assert (counts.filled, counts.without_roof, counts.without_counts) == (4, 1, 1)
    with sessions() as s:
        assert figures(s) == at_ingest  # identical to the last digit, peak source included
    with unit_of_work(sessions) as s:
        again = backfill_roofline(s)
    assert again.filled == 0 and again.without_roof == 1  # done once; what has no roof is still counted

    with unit_of_work(sessions) as s:
        recomputed = backfill_roofline(s, recompute=True)
    assert recomputed.filled == 4
    with sessions() as s:
        assert figures(s) == at_ingest


def test_db_upgrade_backfills_and_says_how_many(tmp_path: Path, pg_database: str) -> None:
    env = clean_env(tmp_path / "home", KERNELWATCH_DATABASE_URL=pg_database)
    kernelwatch("db", "upgrade", env=env)
    engine = make_engine(pg_database)
    try:
        sessions = make_session_factory(engine)
        with unit_of_work(sessions) as s:  # stored here: the commands under test are the two that follow
            for doc in stored_runs():
                ingest_manifest(s, parse_manifest(doc))
        forget_figures(sessions)
        out = kernelwatch("db", "upgrade", env=env)
        assert "roofline figures: 4 results filled, 1 without a roof" in out and "1 without FLOP/byte counts" in out
        with sessions() as s:
            assert sum(1 for v in figures(s).values() if v[2] is not None) == 4
        out = kernelwatch("db", "backfill-roofline", env=env)
        assert "roofline figures: 0 results filled" in out
    finally:
        engine.dispose()
