"""The distributed form: ingest here, detection in a real Celery worker process over the real Redis."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from service.context import Context
from service.pipeline.queue import CeleryQueue
from service.pipeline.submit import submit_manifest
from service.settings import load_settings
from service.store.db import upgrade
from service.store.models import Commit, Finding
from tests import builders
from tests.conftest import fresh_redis
from tests.processes import clean_env, start_worker

REDIS_URL = "redis://127.0.0.1:6379/9"


@pytest.fixture
def redis_url() -> str:
    return fresh_redis(REDIS_URL)


def test_detection_runs_in_a_celery_worker(tmp_path: Path, pg_database: str, redis_url: str) -> None:
    upgrade(pg_database)
    env = clean_env(tmp_path, KERNELWATCH_DATABASE_URL=pg_database, KERNELWATCH_REDIS_URL=redis_url)
    ctx = Context.create(load_settings(env))
    with start_worker(env, tmp_path, "detect") as worker:
        try:
            assert isinstance(ctx.queue, CeleryQueue)
            docs = builders.step_series_manifests([1e-3] * 5 + [2.5e-3] * 5)
            for doc in docs:
                submit_manifest(ctx.sessions, ctx.queue, doc)
            found: list[str] = []

            def flagged() -> bool:
                with ctx.sessions() as s:
                    found[:] = s.scalars(select(Commit.sha).join(Finding, Finding.commit_id == Commit.id))
                return bool(found)

            worker.wait_until(flagged, 90, "the worker to detect the step")
            assert found == [docs[5]["commit"]["sha"]]
            with ctx.sessions() as s:
                assert s.scalar(select(func.count(Finding.id))) == 1
        finally:
            ctx.close()
    assert "kernelwatch.detect_series" in worker.output()
