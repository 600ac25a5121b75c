"""Detection on write reads each commit's runs apart (issue 16): a commit measured by several runs is their
geometric mean, one vote a run, whatever the number of samples each took; and the test counts the runs."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.contract import parse_manifest
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.detection import default_branch_points, detect_series
from service.pipeline.ingest import ingest_manifest
from service.store.db import unit_of_work
from service.store.models import Commit, Finding, Series
from tests import builders


def ingest(s: Session, position: int, samples: list[float]) -> None:
    ingest_manifest(s, parse_manifest(builders.manifest(position, [builders.result(samples=samples)])))


def test_the_points_keep_each_runs_samples_apart(sessions: sessionmaker[Session]) -> None:
    with unit_of_work(sessions) as s:
        ingest(s, 0, [1e-3] * 3)
        ingest(s, 1, [2e-3] * 12)  # one process that took many samples, on a slow host
        ingest(s, 1, [1e-3] * 4)
        ingest(s, 1, [1e-3] * 4)
        [series] = s.scalars(select(Series).where(Series.metric == "wall_time")).all()
        points, cut = default_branch_points(s, series)
        assert not cut and [p.position for p in points] == [0, 1]
        assert [tuple(p.run_sizes) for p in points] == [(3,), (12, 4, 4)]
        assert points[1].run_medians() == [2e-3, 1e-3, 1e-3]
        assert float(np.median(points[1].samples)) == 2e-3  # the pool would have been the slow run alone


def test_a_step_measured_by_several_runs_a_commit_is_found_with_four_commits_a_side(
        sessions: sessionmaker[Session]) -> None:
    """Three runs a commit, 25 % apart from process to process, a 2x step after 4 commits: found at the step."""
    rng = np.random.default_rng(3)
    with unit_of_work(sessions) as s:
        for position in range(8):
            for _ in range(3):
                level = 1e-3 * (2.0 if position >= 4 else 1.0) * np.exp(0.25 * rng.standard_normal())
                ingest(s, position, [float(v) for v in level * np.exp(0.02 * rng.standard_normal(10))])
        [series] = s.scalars(select(Series).where(Series.metric == "wall_time")).all()
        detect_series(s, series.id, EDivisiveDetector())
        found = s.execute(select(Commit.position, Finding.direction, Finding.detector_version)
                          .join(Commit, Commit.id == Finding.commit_id)
                          .where(Finding.series_id == series.id)).all()
        assert [tuple(f) for f in found] == [(4, "regression", EDivisiveDetector.version)]
