"""The schedule of tracked branches on the real Redis and PostgreSQL: a beat tick queues each branch tip's suite
on its runner queue once, a second tick queues nothing, a stored run keeps the tip from being queued again, and
`kernelwatch beat` itself sends the ticks."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from runners.worker import SuiteTask, execute
from service import tasks
from service.settings import load_settings
from service.store.db import upgrade
from service.task_names import RUN_SUITE_TASK, RUN_TRACKED_TASK
from service.tracked import scheduled_task_id
from tests.conftest import fresh_redis
from tests.gitrepo import commit_all, git, suite_repo
from tests.processes import RUN_SETTINGS, clean_env, start_kernelwatch

TICK_REDIS_URL = "redis://127.0.0.1:6379/12"
BEAT_REDIS_URL = "redis://127.0.0.1:6379/13"

SUITE = '''
import numpy as np
from runners.suite import Case, benchmark, grid

@benchmark(suite="toy", params=grid(n=[64]))
def double(n):
    x = np.arange(n, dtype=np.float32)
    return Case(fn=lambda v: v * 2, args=(x,), reference=lambda: x * 2)
'''




@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with two branches: main, and dev one commit ahead of it."""
    root = tmp_path / "kernels"
    suite_repo(root, SUITE, module="toy")
    commit_all(root, "first")
    git(root, "checkout", "-q", "-b", "dev")
    git(root, "commit", "-q", "--allow-empty", "-m", "on dev")
    git(root, "checkout", "-q", "main")
    return root


def queued(client: redis.Redis, queue: str) -> list[dict[str, Any]]:
    """The task messages waiting on a queue (kombu's Redis transport keeps them in a list named after it)."""
    out = []
    for raw in client.lrange(queue, 0, -1):
        envelope = json.loads(raw)
        args, kwargs, _ = json.loads(base64.b64decode(envelope["body"]))
        out.append({"task": envelope["headers"]["task"], "id": envelope["headers"]["id"], "args": args,
                    "kwargs": kwargs})
    return out


@pytest.fixture
def worker_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, repo: Path, pg_database: str) -> Iterator[None]:
    """This process configured as a detect worker would be, with main tracked on cpu and dev (by a file:// URL,
    so through ls-remote) on h200."""
    upgrade(pg_database)
    for name in [k for k in os.environ if k.startswith("KERNELWATCH_") and k not in RUN_SETTINGS]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("KERNELWATCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELWATCH_DATABASE_URL", pg_database)
    monkeypatch.setenv("KERNELWATCH_REDIS_URL", fresh_redis(TICK_REDIS_URL))
    monkeypatch.setenv("KERNELWATCH_TRACK", f"{repo}@main,file://{repo}@dev@h200")
    monkeypatch.setenv("KERNELWATCH_TRACK_PERIOD", "60")
    tasks._worker_context.cache_clear()
    yield
    if tasks._worker_context.cache_info().currsize:
        tasks._worker_context(load_settings()).close()
    tasks._worker_context.cache_clear()


def test_each_tip_is_queued_once_on_its_runner_queue(worker_env: None, repo: Path) -> None:
    settings = load_settings()
    app = tasks.make_celery(settings)
    run_tracked = app.tasks[RUN_TRACKED_TASK]
    ticks = [entry["args"] for entry in app.conf.beat_schedule.values() if entry["task"] == RUN_TRACKED_TASK]
    client = redis.Redis.from_url(TICK_REDIS_URL)
    main, dev = git(repo, "rev-parse", "main"), git(repo, "rev-parse", "dev")

    # The first beat: both tips queued, each on its hardware's runner queue, under its deterministic task id.
    assert [run_tracked(*args)["action"] for args in ticks] == ["queued", "queued"]
    [on_cpu] = queued(client, "runner.cpu")
    [on_h200] = queued(client, "runner.h200")
    assert on_cpu["task"] == on_h200["task"] == "kernelwatch.run_suite"
    assert on_cpu["id"] == scheduled_task_id(str(repo), main, "cpu")
    assert on_h200["id"] == scheduled_task_id(f"file://{repo}", dev, "h200")
    assert on_cpu["kwargs"] == {"repo": str(repo), "commit": main, "suite": "*", "params": "",
                                 "quick": False, "samples": 20, "trigger": "schedule", "branch": "main",
                                 "capture": True}
    assert (on_h200["kwargs"]["commit"], on_h200["kwargs"]["branch"]) == (dev, "dev")

    # The second beat, tips unmoved and runs not yet stored: nothing more is queued.
    assert [run_tracked(*args)["action"] for args in ticks] == ["already-queued", "already-queued"]
    assert len(queued(client, "runner.cpu")) == 1 and len(queued(client, "runner.h200")) == 1

    # A runner takes the cpu message and stores its run (the code run_suite runs, with the message's id and
    # arguments). Once it is stored, even a lapsed queued mark does not queue the tip again.
    client.lpop("runner.cpu")
    ctx = tasks._worker_context(settings)
    execute(SuiteTask.from_kwargs({**on_cpu["kwargs"], "samples": 3, "capture": False}), on_cpu["id"],
            ctx.settings.home, ctx.submit)
    for key in client.scan_iter("kernelwatch:scheduled:*"):
        client.delete(key)
    assert run_tracked(*ticks[0])["action"] == "stored"
    assert queued(client, "runner.cpu") == []

    # main moves: its new tip is queued on the next beat.
    git(repo, "commit", "-q", "--allow-empty", "-m", "later on main")
    outcome = run_tracked(*ticks[0])
    assert outcome["action"] == "queued" and outcome["sha"] == git(repo, "rev-parse", "main")
    [again] = queued(client, "runner.cpu")
    assert again["kwargs"]["commit"] == outcome["sha"] != main


def test_a_failed_scheduled_run_reads_failed_with_its_reason_until_its_mark_lapses(worker_env: None,
                                                                                    repo: Path) -> None:
    # main's tip carries a project file the runner refuses: its scheduled run fails before storing anything.
    (repo / "kernelwatch.toml").write_text('benchmarks = "../elsewhere"\n')
    commit_all(repo, "a project file pointing outside the repository")
    settings = load_settings()
    app = tasks.make_celery(settings)
    run_tracked = app.tasks[RUN_TRACKED_TASK]
    [tick_args] = [e["args"] for e in app.conf.beat_schedule.values()
                   if e["task"] == RUN_TRACKED_TASK and e["args"][1] == "main"]
    client = redis.Redis.from_url(TICK_REDIS_URL)
    assert run_tracked(*tick_args)["action"] == "queued"
    [message] = queued(client, "runner.cpu")

    # A runner takes it (the run_suite task itself, under the message's id) and fails.
    client.lpop("runner.cpu")
    failed = app.tasks[RUN_SUITE_TASK].apply(kwargs=message["kwargs"], task_id=message["id"])
    assert failed.failed() and "kernelwatch.toml: benchmarks = '../elsewhere'" in str(failed.result)

    outcome = run_tracked(*tick_args)
    assert outcome["action"] == "failed" and outcome["sha"] == message["kwargs"]["commit"]
    assert "kernelwatch.toml: benchmarks = '../elsewhere'" in outcome["failure"]
    mark = f"kernelwatch:scheduled:{message['id']}"
    assert 0 < outcome["retry_in_s"] <= client.ttl(mark) + 1  # the mark kept its expiry
    assert queued(client, "runner.cpu") == []

    # Once the mark lapses the tip is queued again, as before.
    client.delete(mark)
    assert run_tracked(*tick_args)["action"] == "queued"
    assert len(queued(client, "runner.cpu")) == 1


def beat_env(home: Path, track: str, period: str) -> dict[str, str]:
    return clean_env(home, KERNELWATCH_REDIS_URL=fresh_redis(BEAT_REDIS_URL), KERNELWATCH_TRACK=track,
                     KERNELWATCH_TRACK_PERIOD=period)


def test_kernelwatch_beat_sends_a_tick_per_branch_to_the_detect_queue(tmp_path: Path, repo: Path) -> None:
    # A period of an hour: the ticks come at start (Celery's schedule alone fired one period later, and a new
    # deployment measured nothing for its first hour).
    env = beat_env(tmp_path / "home", f"{repo}@main,{repo}@dev@h200", "3600")
    client = redis.Redis.from_url(BEAT_REDIS_URL)
    with start_kernelwatch(env, tmp_path, "beat", name="beat") as beat:
        beat.wait_until(lambda: len({tuple(m["args"]) for m in queued(client, "detect")}) >= 2, 60,
                        "a tick of each branch on the detect queue")
        beat.wait_until(lambda: bool(list((tmp_path / "home").glob("celerybeat-schedule*"))), 60,
                        "beat to start its schedule")
    ticks = queued(client, "detect")
    assert {m["task"] for m in ticks} == {RUN_TRACKED_TASK}, beat.tail()
    assert {tuple(m["args"]) for m in ticks} == {(str(repo), "main", "cpu"), (str(repo), "dev", "h200")}
    assert list((tmp_path / "home").glob("celerybeat-schedule*")), "beat keeps its schedule under KERNELWATCH_HOME"


def test_kernelwatch_beat_without_redis_says_what_to_set(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "service.cli", "beat"], env=clean_env(tmp_path),
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("kernelwatch: error: kernelwatch beat needs KERNELWATCH_REDIS_URL "
                                   "(e.g. redis://127.0.0.1:6379/0)")


def test_kernelwatch_worker_refuses_a_queue_no_sender_sends_to(tmp_path: Path) -> None:
    # `ingset` and `runner.CPU` started a worker that consumed nothing: the tasks waited in queues no one read.
    proc = subprocess.run([sys.executable, "-m", "service.cli", "worker", "--queues", "ingset,runner.cpu,runner.CPU"],
                          env=clean_env(tmp_path, KERNELWATCH_REDIS_URL="redis://127.0.0.1:6379/15"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == ("kernelwatch: error: kernelwatch worker --queues: 'ingset', 'runner.CPU': the "
                                   "queues are ingest, detect, notify and runner.HARDWARE (HARDWARE in lower-case "
                                   "letters, digits, '.' and '-', e.g. runner.cpu, runner.h200)")
