"""Runner workers on the real broker: a run submitted is run and stored; a runner SIGKILLed mid-run loses
nothing, because another runner takes the task over, and nothing is stored twice."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from service.store.db import make_engine, make_session_factory, upgrade
from service.store.models import Commit, Result, Run, Series
from tests.conftest import fresh_redis
from tests.gitrepo import commit_all, git, suite_repo
from tests.processes import ServiceProcess, clean_env, start_worker

REDIS_URL = "redis://127.0.0.1:6379/10"

# The marker's path is written into the suite, not passed in the environment: a benchmark process gets an
# allow-listed environment only (runners/sandbox.py).
SUITE = '''
import os, time
import numpy as np
from runners.suite import Case, benchmark, grid

MARKER = "MARKER_PATH"

@benchmark(suite="toy", params=grid(n=[256, 512]))
def scale(n):
    marker = MARKER
    if marker and n == 512:
        with open(marker, "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(4)  # long enough for the test to kill the runner in the middle of the run
    x = np.arange(n, dtype=np.float32)
    return Case(fn=lambda v: v * 3, args=(x,), reference=lambda: x * 3)
'''




@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "kernels"
    module = suite_repo(root, SUITE.replace("MARKER_PATH", str(tmp_path / "marker")), module="toy")
    commit_all(root, "first")
    module.write_text(SUITE.replace("MARKER_PATH", ""))  # the second commit runs without the slow step
    commit_all(root, "second")
    return root


@pytest.fixture
def broker() -> str:
    return fresh_redis(REDIS_URL)


def service_env(home: Path, database_url: str, broker: str) -> dict[str, str]:
    return clean_env(home, KERNELWATCH_DATABASE_URL=database_url, KERNELWATCH_REDIS_URL=broker,
                     KERNELWATCH_TASK_VISIBILITY_TIMEOUT="6")


def runner(name: str, env: dict[str, str]) -> ServiceProcess:
    # Returned once consuming, so that the timeouts below count the runs, not the workers' start-up.
    return start_worker(env, Path(env["KERNELWATCH_HOME"]), "runner.cpu", name=name)


@pytest.fixture
def workers() -> Iterator[list[ServiceProcess]]:
    started: list[ServiceProcess] = []
    yield started
    for w in started:
        w.stop()


def wait_for(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    start = time.monotonic()
    deadline = start + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)
    print(f"{what}: {time.monotonic() - start:.1f} s")


def test_a_killed_runner_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, repo: Path, pg_database: str, broker: str, workers: list[ServiceProcess]
) -> None:
    upgrade(pg_database)
    marker = tmp_path / "marker"
    env_a = service_env(tmp_path / "host-a", pg_database, broker)
    env_b = service_env(tmp_path / "host-b", pg_database, broker)
    engine = make_engine(pg_database)
    sessions = make_session_factory(engine)

    def runs_of(sha: str) -> list[Run]:
        with sessions() as s:
            return list(s.scalars(select(Run).join(Commit).where(Commit.sha == sha)))

    first = git(repo, "rev-parse", "HEAD~1")
    workers.append(runner("a", env_a))
    queued = subprocess.run([sys.executable, "-m", "service.cli", "submit", "--repo", str(repo), "--commit", "HEAD~1",
                             "--hardware", "cpu", "--samples", "3"], env=env_a, capture_output=True, text=True)
    assert queued.returncode == 0, queued.stderr
    task_id = queued.stdout.strip().rsplit(" ", 1)[-1]

    # Runner A reaches the slow benchmark: kill it, its benchmark process included, without warning.
    wait_for(lambda: marker.exists(), 120, "runner A to start the run")
    workers[0].kill()
    assert runs_of(first) == []

    workers.append(runner("b", env_b))
    wait_for(lambda: len(runs_of(first)) > 0, 120, "runner B to take the task over and store the run")
    time.sleep(2)  # a duplicate, if any, would land now
    [run] = runs_of(first)
    assert run.run_uid == task_id.replace("-", "") and run.status == "complete"
    assert len(marker.read_text().split()) == 2, "the task should have been started by A, then by B"

    # B keeps serving: the next commit, queued while it runs, is stored once too.
    second = git(repo, "rev-parse", "HEAD")
    marker.unlink()
    queued = subprocess.run([sys.executable, "-m", "service.cli", "submit", "--repo", str(repo), "--commit", second,
                             "--hardware", "cpu", "--samples", "3"], env=env_b, capture_output=True, text=True)
    assert queued.returncode == 0, queued.stderr
    wait_for(lambda: len(runs_of(second)) > 0, 120, "the second run")
    with sessions() as s:
        assert s.scalar(select(func.count(Run.id))) == 2
        assert s.scalar(select(func.count(Result.id)).join(Series).where(Series.metric == "wall_time")) == 4
        assert s.scalar(select(func.count(Result.id))) == 4
    engine.dispose()


def test_a_follow_up_run_that_cannot_be_made_ends_its_job_failed(
    tmp_path: Path, repo: Path, pg_database: str, broker: str, workers: list[ServiceProcess]
) -> None:
    """A confirmation's run that a runner cannot make (here: a commit the repository does not hold) ends its job
    failed, saying why, as the in-process queue does; before, the job stayed open, waiting for runs that would
    never come. The runner reports through the broker, so a runner host without a database can too."""
    from datetime import UTC, datetime

    from service.context import Context
    from service.contract import parse_manifest
    from service.pipeline.bisect import RunOrder
    from service.pipeline.ingest import ingest_manifest
    from service.settings import load_settings
    from service.store.db import unit_of_work
    from service.store.models import BisectJob
    from tests import builders

    upgrade(pg_database)
    env = service_env(tmp_path / "host", pg_database, broker)
    ctx = Context.create(load_settings(env))
    try:
        now = datetime.now(UTC)
        with unit_of_work(ctx.sessions) as s:
            # A repository and a series to follow, stored without queueing detection (which would cancel a job
            # whose change it does not find).
            ingest_manifest(s, parse_manifest(builders.manifest()))
            series = s.scalars(select(Series)).first()
            assert series is not None
            job = BisectJob(series_id=series.id, repository_id=series.repository_id, good_commit_sha="a" * 40,
                            bad_commit_sha="b" * 40, hardware="cpu", state="running", purpose="confirm",
                            runs_requested=[], created_at=now, updated_at=now)
            s.add(job)
            s.flush()
            job_id = job.id
        workers.append(start_worker(env, tmp_path / "host", "runner.cpu,detect", name="both"))
        ctx.queue.enqueue_runs([RunOrder(job_id=job_id, repo=str(repo), shas=["f" * 40], suite="toy/scale",
                                         params="n=256", samples=2, branch="main", trigger="confirm",
                                         hardware="cpu")])

        def ended() -> bool:
            with ctx.sessions() as s:
                found = s.get(BisectJob, job_id)
                return found is not None and found.state != "running"

        wait_for(ended, 120, "the job to end")
        with ctx.sessions() as s:
            found = s.get(BisectJob, job_id)
            assert found is not None and found.state == "failed", (found.state if found else None)
            assert "the confirm run could not be made" in (found.message or "") and "ffffffff" in (found.message or "")
    finally:
        ctx.close()
