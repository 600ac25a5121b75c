"""Detection on write reads a bounded tail of a series' history: the newest ``limit`` measured commits. Findings
in the tail's first ``settled`` commits (which lack the level before them) and before it stay as stored; those
after are made to match what the detector sees. A series shorter than the limit is read whole."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.contract import parse_manifest
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.detection import default_branch_points, detect_series
from service.pipeline.ingest import ingest_manifest
from service.store.db import unit_of_work
from service.store.models import Commit, Finding, Series
from tests import builders

COMMITS = 60
STEPS = (10, 50)  # +50 % each


@pytest.fixture
def history(sessions: sessionmaker[Session]) -> sessionmaker[Session]:
    """``COMMITS`` commits of one series, +50 % at each of ``STEPS``, 0.5 % noise; nothing detected yet."""
    rng = np.random.default_rng(7)
    with unit_of_work(sessions) as s:
        for position in range(COMMITS):
            level = 1e-3 * 1.5 ** sum(position >= step for step in STEPS)
            samples = [float(v) for v in level * (1 + 0.005 * rng.standard_normal(5))]
            ingest_manifest(s, parse_manifest(builders.manifest(position, [builders.result(samples=samples)])))
    return sessions


def found(s: Session, series_id: int) -> dict[int, str]:
    """Position -> direction of the series' findings."""
    rows = s.execute(select(Commit.position, Finding.direction).join(Commit, Commit.id == Finding.commit_id)
                     .where(Finding.series_id == series_id, Finding.detector == EDivisiveDetector.name)).all()
    return dict(rows)  # type: ignore[arg-type]


def add_finding(s: Session, series_id: int, position: int) -> None:
    commit = s.scalars(select(Commit).where(Commit.position == position)).one()
    s.add(Finding(series_id=series_id, commit_id=commit.id, previous_commit_id=commit.id - 1,
                  detector=EDivisiveDetector.name, detector_version=1, kind="time", direction="regression",
                  magnitude=0.2, confidence=3.0, p_value=0.001, value_before=1e-3, value_after=1.2e-3,
                  attribution={}, created_at=datetime.now(UTC)))
    s.flush()


def test_the_tail_is_read_and_what_lies_before_it_stays(history: sessionmaker[Session]) -> None:
    detector = EDivisiveDetector()
    with unit_of_work(history) as s:
        [series] = s.scalars(select(Series).where(Series.metric == "wall_time")).all()
        points, cut = default_branch_points(s, series)
        assert len(points) == COMMITS and not cut
        points, cut = default_branch_points(s, series, limit=30)
        assert [p.position for p in points] == list(range(30, COMMITS)) and cut
        assert default_branch_points(s, series, limit=COMMITS)[1] is False  # exactly the limit: nothing left out

        detect_series(s, series.id, detector)  # the whole series: both steps
        assert found(s, series.id) == {10: "regression", 50: "regression"}

        # Findings an earlier read left before the tail (at 10, 20) or in its settled start (32) stay; one in the
        # live part that the detector no longer sees (40) goes; the step in the live part (50) is found.
        add_finding(s, series.id, 20)
        add_finding(s, series.id, 32)
        add_finding(s, series.id, 40)
        detect_series(s, series.id, detector, limit=30, settled=5)
        assert found(s, series.id) == {10: "regression", 20: "regression", 32: "regression", 50: "regression"}

        # A read of the whole series again is the truth everywhere.
        detect_series(s, series.id, detector, limit=COMMITS + 1)
        assert found(s, series.id) == {10: "regression", 50: "regression"}


def test_a_change_in_the_settled_start_of_the_tail_is_not_added(history: sessionmaker[Session]) -> None:
    """The step at 50 falls in the settled start of a tail that begins at 45: not found there (it would be judged
    against five commits of the old level), and not removed where a full read stored it."""
    detector = EDivisiveDetector()
    with unit_of_work(history) as s:
        [series] = s.scalars(select(Series).where(Series.metric == "wall_time")).all()
        detect_series(s, series.id, detector, limit=15, settled=10)
        assert found(s, series.id) == {}
        detect_series(s, series.id, detector)
        detect_series(s, series.id, detector, limit=15, settled=10)
        assert found(s, series.id) == {10: "regression", 50: "regression"}
