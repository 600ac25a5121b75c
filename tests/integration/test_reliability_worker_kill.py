"""A detect worker SIGKILLed in the middle of a batch: the task it was running goes back to the queue (late
acknowledgement, a short visibility timeout), a fresh worker runs it and the rest of the batch, and in the end
every series has its finding exactly once: nothing lost to the kill, nothing doubled by the redelivery.

Real processes on the real PostgreSQL, and a private Redis (its queues are this test's alone)."""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select

from service.pipeline.bisect import RunOrder
from service.pipeline.queue import CeleryQueue
from service.pipeline.submit import submit_manifest
from service.settings import load_settings
from service.store.db import make_engine, make_session_factory, upgrade
from service.store.models import Commit, Finding, Run
from service.tasks import make_celery
from tests import builders
from tests.private_servers import PrivateRedis
from tests.processes import ServiceProcess, clean_env, start_worker

COMMITS = 10
STEP_AT = 5
SERIES = 240
CHUNK = 30  # series per detect task: each task takes a second or so, well inside the visibility timeout
VISIBILITY_TIMEOUT_S = 6


class RecordingQueue:
    """Takes what ingest would enqueue, so that the test decides when and how the batch reaches the broker."""

    def __init__(self) -> None:
        self.series_ids: set[int] = set()

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        self.series_ids.update(series_ids)

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        pass

    def enqueue_runs(self, orders: Sequence[RunOrder]) -> None:
        pass

    def enqueue_compare(self, run_ids: Sequence[int]) -> None:
        pass


@pytest.fixture
def broker() -> Iterator[str]:
    server = PrivateRedis(Path(tempfile.mkdtemp(prefix="kw-reliability-redis-")), appendonly=False)
    server.start()
    try:
        yield server.url
    finally:
        server.destroy()


def tasks(worker: ServiceProcess, event: str) -> list[str]:
    """Ids of the detect tasks the worker's log says were ``received`` or ``succeeded``."""
    return re.findall(rf"kernelwatch\.detect_series\[([0-9a-f-]+)\] {event}", worker.output())


def detect_worker(name: str, env: dict[str, str], log_dir: Path) -> ServiceProcess:
    # Not waited for: the batch is queued already, and the test watches the log for the tasks themselves.
    return start_worker(env, log_dir, "detect", name=name, wait_ready=False)


@pytest.fixture
def workers() -> Iterator[list[ServiceProcess]]:
    started: list[ServiceProcess] = []
    yield started
    for w in started:
        w.stop()


def wait_for(condition: Callable[[], bool], timeout: float, what: str, poll_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll_s)


def test_a_killed_detect_worker_loses_nothing_and_doubles_nothing(
    tmp_path: Path, pg_database: str, broker: str, workers: list[ServiceProcess]
) -> None:
    upgrade(pg_database)
    env = clean_env(tmp_path, KERNELWATCH_DATABASE_URL=pg_database, KERNELWATCH_REDIS_URL=broker,
                    KERNELWATCH_TASK_VISIBILITY_TIMEOUT=str(VISIBILITY_TIMEOUT_S), KERNELWATCH_FOLLOW_UP="none")
    engine = make_engine(pg_database)
    sessions = make_session_factory(engine)

    # SERIES kernels, each stepping up 2.5x at commit STEP_AT: one finding per series, at that commit.
    recorded = RecordingQueue()
    for position in range(COMMITS):
        level = 1e-3 if position < STEP_AT else 2.5e-3
        results = [builders.result(name=f"kernel_{i}", samples=[level * (1 + 0.002 * ((k * 7 + i) % 5))
                                                                for k in range(10)]) for i in range(SERIES)]
        submit_manifest(sessions, recorded, builders.manifest(position, results))
    series_ids = sorted(recorded.series_ids)
    assert len(series_ids) == SERIES

    # The batch goes onto the detect queue before any worker runs, as the queue the API fills would be.
    celery = make_celery(load_settings(env))
    queue = CeleryQueue(celery)
    chunks = [series_ids[i:i + CHUNK] for i in range(0, SERIES, CHUNK)]
    for chunk in chunks:
        queue.enqueue_detect(chunk)

    def series_with_findings() -> int:
        with sessions() as s:
            return int(s.scalar(select(func.count(func.distinct(Finding.series_id)))) or 0)

    # Worker A finishes one task, takes the next: kill it, pool child included, in the middle of that one. Killed
    # the moment its log says so, polled often: on a fast host a task lasts ~0.4 s, and a pause before the kill
    # let it finish first (the kill then found nothing in flight).
    workers.append(detect_worker("a", env, tmp_path))
    a = workers[0]
    wait_for(lambda: len(tasks(a, "succeeded")) >= 1 and len(tasks(a, "received")) > len(tasks(a, "succeeded")),
             60, "worker A to be running its second task", poll_s=0.01)
    a.kill()
    in_flight = set(tasks(a, "received")) - set(tasks(a, "succeeded"))
    assert in_flight, "worker A had no task in flight when it was killed"
    stored_at_kill = series_with_findings()
    assert 0 < stored_at_kill < SERIES, "the kill should have landed in the middle of the batch"

    workers.append(detect_worker("b", env, tmp_path))
    b = workers[1]
    wait_for(lambda: series_with_findings() == SERIES and len(tasks(b, "succeeded")) >= len(chunks) - len(
        tasks(a, "succeeded")), 90, "worker B to run the rest of the batch, the killed task included")
    time.sleep(VISIBILITY_TIMEOUT_S / 2)  # a duplicate redelivery, if any, would land now
    assert in_flight <= set(tasks(b, "succeeded")), "the task A was running was not redelivered to B"
    assert set(tasks(a, "succeeded")) | set(tasks(b, "succeeded")) >= set(tasks(a, "received")) | set(
        tasks(b, "received"))

    with sessions() as s:
        step_commit = s.scalar(select(Commit.id).where(Commit.sha == builders.sha_for(f"demo-{STEP_AT}")))
        rows = s.execute(select(Finding.series_id, Finding.commit_id)).all()
        assert len(rows) == SERIES, "every series' finding exactly once"
        assert {sid for sid, _ in rows} == set(series_ids)
        assert {cid for _, cid in rows} == {step_commit}
        assert s.scalar(select(func.count(Run.id))) == COMMITS
    # Nothing left behind on the broker: no queued and no unacknowledged message.
    client = redis.Redis.from_url(broker)
    assert client.llen("detect") == 0
    assert client.zcard("unacked_index") == 0 and client.hlen("unacked") == 0
    client.close()
    engine.dispose()
