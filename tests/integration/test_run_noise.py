"""A series' spread between runs, learned from stored history (service/store/run_noise.py), on both databases:
what a comparison side of one run is tested against."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.contract.manifest import Manifest
from service.detect.compare import NO_SPREAD, ONE_RUN, CompareParams
from service.pipeline.compare import compare_resolved, resolve
from service.pipeline.ingest import ingest_manifest
from service.store.models import Environment, Run, Series
from service.store.run_noise import run_noise
from tests import builders


def run_of(position: int, level: float, samples: int = 8) -> dict[str, Any]:
    """One run of commit ``position`` whose samples sit tightly around ``level``."""
    values = [level * (1 + 0.001 * (i - samples / 2)) for i in range(samples)]
    return builders.manifest(position, [builders.result(samples=values)])


def ingest(sessions: sessionmaker[Session], manifest: dict[str, Any]) -> int:
    with sessions.begin() as session:
        return ingest_manifest(session, Manifest.model_validate(manifest)).run_id


def test_the_spread_comes_from_commits_that_ran_twice_or_more(sessions: sessionmaker[Session]) -> None:
    # Commit 0 ran three times, commit 1 twice: their run medians spread around each commit's own mean.
    levels = {0: [1.0e-3, 1.2e-3, 0.9e-3], 1: [1.1e-3, 1.3e-3]}
    for position, runs in levels.items():
        for level in runs:
            ingest(sessions, run_of(position, level))
    single = [ingest(sessions, run_of(2, 1.0e-3)), ingest(sessions, run_of(3, 3.0e-3))]
    with sessions() as session:
        [series_id] = session.scalars(select(Series.id))
        [environment] = session.scalars(select(Environment.id))
        noise = run_noise(session, [series_id], [environment])[series_id]
        logs = [np.log(np.median(run_of(0, level)["results"][0]["samples"]))
                for runs in levels.values() for level in runs]
        expected = (np.var(logs[:3], ddof=0) * 3 + np.var(logs[3:], ddof=0) * 2) / 3
        assert noise.df == 3 and noise.sd == pytest.approx(math.sqrt(expected))
        # The compared runs are left out: without commit 1's second run, commit 1 no longer counts.
        second_of_1 = session.scalars(select(Run.id).order_by(Run.id)).all()[4]
        assert run_noise(session, [series_id], [environment], [second_of_1])[series_id].df == 2
        assert run_noise(session, [series_id], []) == {}

        # One run against one: the spread says runs vary, so one run a side is not tested (run_stats' note).
        base, head = resolve(session, builders.commit(2)["sha"]), resolve(session, builders.commit(3)["sha"])
        row = compare_resolved(session, base, head, CompareParams(), stored=False).report.rows[0]
        assert row.verdict == "inconclusive" and row.reason == ONE_RUN and row.p_value is None
    assert single


def test_without_replicated_commits_one_run_a_side_is_inconclusive(sessions: sessionmaker[Session]) -> None:
    for position, level in ((0, 1e-3), (1, 3e-3)):
        ingest(sessions, run_of(position, level))
    with sessions() as session:
        base, head = resolve(session, builders.commit(0)["sha"]), resolve(session, builders.commit(1)["sha"])
        row = compare_resolved(session, base, head, CompareParams(), stored=False).report.rows[0]
    assert row.verdict == "inconclusive" and row.reason == NO_SPREAD and row.p_value is None


def test_a_quiet_history_carries_its_samples_spread_and_compares_runs_with_it(
        sessions: sessionmaker[Session]) -> None:
    """Runs that agree as closely as their samples allow (run_stats's note): the stored spread carries the
    samples' spread from six degrees of freedom between runs on, and two runs a side are then tested with it."""
    rng = np.random.default_rng(3)

    def quiet_run(position: int, level: float) -> dict[str, Any]:
        values = (level * np.exp(0.03 * rng.standard_normal(10))).tolist()
        return builders.manifest(position, [builders.result(samples=values)])

    for position in range(3):  # 3 commits x 3 runs: 6 degrees of freedom between runs
        for _ in range(3):
            ingest(sessions, quiet_run(position, 1e-3))
    for position, level in ((3, 1e-3), (4, 1.06e-3)):
        for _ in range(2):
            ingest(sessions, quiet_run(position, level))
    with sessions() as session:
        [series_id] = session.scalars(select(Series.id))
        [environment] = session.scalars(select(Environment.id))
        compared = session.scalars(select(Run.id).order_by(Run.id)).all()[9:]
        noise = run_noise(session, [series_id], [environment], compared)[series_id]
        assert noise.df == 6 and noise.samples is not None
        # A run's log median moves about 0.03 * 1.25 / sqrt(10) from its 10 samples.
        assert math.sqrt(noise.samples.median_var) == pytest.approx(0.03 * 1.2533 / math.sqrt(10), rel=0.35)
        # The same runs read as the quiet test reads a side: the spread of their trimmed means, per commit.
        assert noise.trimmed is not None and noise.trimmed.run_df == 6
        base, head = resolve(session, builders.commit(3)["sha"]), resolve(session, builders.commit(4)["sha"])
        row = compare_resolved(session, base, head, CompareParams(), stored=False).report.rows[0]
        assert row.method == "quiet" and row.verdict == "regression"
        # Fewer than six degrees of freedom between runs: the samples' spread is not read at all.
        fewer = run_noise(session, [series_id], [environment], [*compared, *session.scalars(
            select(Run.id).order_by(Run.id)).all()[:3]])[series_id]
        assert fewer.df == 4 and fewer.samples is None and fewer.trimmed is None
