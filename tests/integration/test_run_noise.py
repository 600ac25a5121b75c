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
from service.detect.compare import NO_SPREAD, CompareParams
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

        # One run against one: a pooled t-test against that spread (df 3), a 3x change decided.
        base, head = resolve(session, builders.commit(2)["sha"]), resolve(session, builders.commit(3)["sha"])
        row = compare_resolved(session, base, head, CompareParams(), stored=False).report.rows[0]
        assert row.method == "pooled" and row.df == 3 and row.verdict == "regression"
    assert single


def test_without_replicated_commits_one_run_a_side_is_inconclusive(sessions: sessionmaker[Session]) -> None:
    for position, level in ((0, 1e-3), (1, 3e-3)):
        ingest(sessions, run_of(position, level))
    with sessions() as session:
        base, head = resolve(session, builders.commit(0)["sha"]), resolve(session, builders.commit(1)["sha"])
        row = compare_resolved(session, base, head, CompareParams(), stored=False).report.rows[0]
    assert row.verdict == "inconclusive" and row.reason == NO_SPREAD and row.p_value is None
