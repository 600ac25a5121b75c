"""The distributed form: ingest here, detection in a real Celery worker process over the real Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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

REDIS_URL = "redis://127.0.0.1:6379/9"


@pytest.fixture
def redis_url() -> str:
    return fresh_redis(REDIS_URL)


def test_detection_runs_in_a_celery_worker(tmp_path: Path, pg_database: str, redis_url: str) -> None:
    upgrade(pg_database)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWATCH_")}
    env.update(KERNELWATCH_HOME=str(tmp_path), KERNELWATCH_DATABASE_URL=pg_database, KERNELWATCH_REDIS_URL=redis_url)
    worker = subprocess.Popen([sys.executable, "-m", "service.cli", "worker", "--queues", "detect"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ctx = Context.create(load_settings(env))
    try:
        assert isinstance(ctx.queue, CeleryQueue)
        docs = builders.step_series_manifests([1e-3] * 5 + [2.5e-3] * 5)
        for doc in docs:
            submit_manifest(ctx.sessions, ctx.queue, doc)
        deadline = time.monotonic() + 90
        found: list[str] = []
        while time.monotonic() < deadline and not found:
            with ctx.sessions() as s:
                found = list(s.scalars(select(Commit.sha).join(Finding, Finding.commit_id == Commit.id)))
            time.sleep(0.5)
        assert worker.poll() is None, "the worker died"
        assert found == [docs[5]["commit"]["sha"]]
        with ctx.sessions() as s:
            assert s.scalar(select(func.count(Finding.id))) == 1
    finally:
        ctx.close()
        worker.send_signal(signal.SIGTERM)
        try:
            output, _ = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            output, _ = worker.communicate()
    assert "kernelwatch.detect_series" in output
