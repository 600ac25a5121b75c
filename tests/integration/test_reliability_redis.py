"""Redis restarts while work is queued: queued work is done after the restart (with an append-only log), and
work that could not be queued is reported, never silently dropped.

The broker is a private redis-server of each test (the machine's Redis serves every other test)."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import select

from service.store.db import make_engine, make_session_factory, upgrade
from service.store.models import Commit, Finding
from tests import builders, processes
from tests.api_client import make_api
from tests.private_servers import PrivateRedis
from tests.processes import ServiceProcess, clean_env


@pytest.fixture
def broker() -> Iterator[PrivateRedis]:
    server = PrivateRedis(Path(tempfile.mkdtemp(prefix="kw-reliability-redis-")), appendonly=True)
    server.start()
    try:
        yield server
    finally:
        server.destroy()


def service_env(home: Path, database_url: str, broker_url: str) -> dict[str, str]:
    return clean_env(home, KERNELWATCH_DATABASE_URL=database_url, KERNELWATCH_REDIS_URL=broker_url,
                     KERNELWATCH_FOLLOW_UP="none", KERNELWATCH_TASK_VISIBILITY_TIMEOUT="30")


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], ServiceProcess]]:
    started: list[ServiceProcess] = []

    def start(env: dict[str, str]) -> ServiceProcess:
        # Returned once consuming, so that the waits below count the work, not the worker's start-up.
        worker = processes.start_worker(env, tmp_path, "ingest,detect", name=f"worker-{len(started)}")
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def flagged_shas(database_url: str) -> list[str]:
    engine = make_engine(database_url)
    try:
        with make_session_factory(engine)() as s:
            return sorted(s.scalars(select(Commit.sha).join(Finding, Finding.commit_id == Commit.id)))
    finally:
        engine.dispose()


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)
    return True


def post_run(api: Any, doc: dict[str, Any]) -> Any:
    return api.client.post("/api/v1/runs", data=json.dumps(doc), content_type="application/json",
                           headers=api.auth("submit"))


# Ten commits, the last three 2.5x slower: the step (at commit 7) shows only once commit 9 is in, so the
# detection task of commit 9's submission is the one that finds it.
LEVELS = [1e-3] * 7 + [2.5e-3] * 3
STEP = 7


def test_queued_detection_survives_a_redis_restart(
    tmp_path: Path, pg_database: str, broker: PrivateRedis,
    start_worker: Callable[[dict[str, str]], ServiceProcess],
) -> None:
    """With the append-only log, the tasks queued before the broker died are run after it is back, and the web
    process that queued them reconnects by itself for the next submission."""
    upgrade(pg_database)
    env = service_env(tmp_path, pg_database, broker.url)
    api = make_api(pg_database, tmp_path, KERNELWATCH_REDIS_URL=broker.url, KERNELWATCH_FOLLOW_UP="none")
    docs = builders.step_series_manifests(LEVELS)
    try:
        for doc in docs[:-1]:
            response = post_run(api, doc)
            assert response.status_code == 201, response.json
        broker.stop()  # SIGKILL: no chance to save anything but what the log already holds
        broker.start()
        response = post_run(api, docs[-1])  # the same web process, its broker connection gone stale
        assert response.status_code == 201, response.json
        start_worker(env)
        assert wait_for(lambda: flagged_shas(pg_database) == [docs[STEP]["commit"]["sha"]], 60), \
            "the queued detection was lost in the restart"
    finally:
        api.ctx.close()


def test_a_submission_the_broker_refused_is_reported_and_its_detection_not_dropped(
    tmp_path: Path, pg_database: str, broker: PrivateRedis,
    start_worker: Callable[[dict[str, str]], ServiceProcess],
) -> None:
    upgrade(pg_database)
    env = service_env(tmp_path, pg_database, broker.url)
    api = make_api(pg_database, tmp_path, KERNELWATCH_REDIS_URL=broker.url, KERNELWATCH_FOLLOW_UP="none")
    docs = builders.step_series_manifests(LEVELS)
    outcomes: list[tuple[int, Any, float]] = []
    try:
        # A worker keeps up with the submissions: when the broker dies, nothing of the earlier ones is queued,
        # so only the refused submission's own task could find the step.
        worker = start_worker(env)
        for doc in docs[:-1]:
            assert post_run(api, doc).status_code == 201
        client = redis.Redis.from_url(broker.url)
        assert wait_for(lambda: client.llen("detect") == 0 and client.hlen("unacked") == 0, 30)
        client.close()
        assert flagged_shas(pg_database) == []
        broker.stop()
        start = time.monotonic()
        refused = post_run(api, docs[-1])
        outcomes.append((refused.status_code, refused.json, time.monotonic() - start))
        broker.start()
        retried = post_run(api, docs[-1])  # the runner retries, as it does on any 5xx
        outcomes.append((retried.status_code, retried.json, 0.0))
        # The worker reconnects by itself; give it time to run whatever reaches the queue.
        detected = wait_for(lambda: flagged_shas(pg_database) == [docs[STEP]["commit"]["sha"]], 25)
        assert worker.alive(), "the worker died with the broker"
    finally:
        api.ctx.close()
    (status, body, took), (retry_status, _, _) = outcomes
    # Reported: a prompt 503 in the stable shape that the runner retries on, not a 500 it may give up on.
    assert status == 503 and body["error"]["code"] == "unavailable", (status, body)
    # ... which says the run is stored, and that the same upload again queues the rest (its runner's user measured
    # the commit again when told only "unavailable, try again later": a second run).
    assert f"run {docs[-1]['run_id']} is stored" in body["error"]["message"], body
    assert "send the same upload again" in body["error"]["message"], body
    assert took < 10
    assert retry_status in (200, 201)
    # Not dropped: the run's detection happens once the broker is back.
    assert detected, "the step at the refused submission's commit was never detected"
