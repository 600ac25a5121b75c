"""The job table (service/pipeline/jobs.py): every task name has one job, every carrier turns the port's typed calls
into calls of the same jobs, and Celery's wrapper retries only what the job's entry says."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import service.task_names as names
from kernelwatch.errors import KernelWatchError, Transient
from runners.artifacts import ArtifactStore
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.bisect import RunOrder
from service.pipeline.jobs import JOBS, Call, Job, JobEnv, TryAgain, call
from service.pipeline.pull_requests import SuiteRun
from service.pipeline.queue import InProcessQueue, JobQueue
from service.settings import load_settings
from service.store.db import make_engine, make_session_factory


class Recorded(JobQueue):
    def __init__(self) -> None:
        self.calls: list[Call] = []

    def submit(self, job_call: Call) -> None:
        self.calls.append(job_call)


def test_every_task_name_has_exactly_one_job() -> None:
    declared = {value for key, value in vars(names).items() if key.endswith("_TASK")}
    assert declared == set(JOBS)
    for job in JOBS.values():
        assert job.queue is None or job.queue in {names.INGEST_QUEUE, names.DETECT_QUEUE, names.NOTIFY_QUEUE}


def test_the_port_s_typed_calls_become_calls_of_the_table() -> None:
    queue = Recorded()
    queue.enqueue_detect([])  # nothing to do is not a task
    queue.enqueue_detect([3, 1])
    queue.enqueue_parse((7,))
    queue.enqueue_pr_reports([4, 5])
    queue.enqueue_follow_up_failed(9, "why")
    order = RunOrder(job_id=9, hardware="h200", repo="r", shas=["a", "b"], suite="*", params="", samples=5,
                     trigger="bisect", branch="main", quick=False, task_id="t-9")
    queue.enqueue_runs([order])
    queue.enqueue_suite_runs([SuiteRun("cpu", {"repo": "r", "commit": "c"})])
    got = [(c.job.name, c.args[:1] if c.job.takes_task_id else c.args, c.task_id, c.hardware) for c in queue.calls]
    run_kwargs = queue.calls[5].args[0]
    assert got[:5] == [(names.DETECT_TASK, ([3, 1],), None, None), (names.PARSE_TASK, ([7],), None, None),
                       (names.PR_REPORT_TASK, (4,), None, None), (names.PR_REPORT_TASK, (5,), None, None),
                       (names.FOLLOW_UP_FAILED_TASK, (9, "why"), None, None)]
    assert got[5][0] == names.RUN_SUITE_TASK and got[5][2:] == ("t-9", "h200")
    assert run_kwargs["commit"] == "a" and run_kwargs["also"] == ["b"] and run_kwargs["follow_up_job"] == 9
    assert got[6] == (names.RUN_SUITE_TASK, ({"repo": "r", "commit": "c"},), None, "cpu")


@pytest.fixture
def env(tmp_path: Path) -> JobEnv:
    sessions = make_session_factory(make_engine(f"sqlite:///{tmp_path / 'kw.db'}"))
    return JobEnv(sessions, EDivisiveDetector(), ArtifactStore(tmp_path / "artifacts"), home=tmp_path / "home")


def _job(run: Any, **entry: Any) -> Job:
    return Job("test.job", run, names.DETECT_QUEUE, **entry)


def test_the_in_process_queue_raises_but_logs_what_its_entry_contains(
        env: JobEnv, caplog: pytest.LogCaptureFixture) -> None:
    queue = InProcessQueue(env)

    def fails(_env: JobEnv, _queue: Any, message: str) -> None:
        raise KernelWatchError(message)

    with pytest.raises(KernelWatchError, match="raised"):
        queue.submit(Call(_job(fails), ("raised",)))
    with caplog.at_level(logging.ERROR):
        queue.submit(Call(_job(fails, contained=(KernelWatchError,)), ("contained",)))
    assert "test.job" in caplog.text and "contained" in caplog.text


def test_a_run_is_not_made_where_there_is_no_home(env: JobEnv) -> None:
    seen: list[str] = []
    queue = InProcessQueue(JobEnv(env.sessions, env.detector, env.artifacts))
    queue.submit(Call(_job(lambda *a: seen.append("ran"), takes_task_id=True), ({},)))
    InProcessQueue(env).submit(Call(_job(lambda _e, _q, task_id, kw: seen.append(task_id), takes_task_id=True),
                                    ({},), task_id="t-1"))
    assert seen == ["t-1"]


def test_celery_retries_a_transient_failure_as_the_entry_says(tmp_path: Path) -> None:
    from service.tasks import _register, celery_app

    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path)})
    app = celery_app(settings)
    app.conf.task_always_eager = True
    tries: dict[str, int] = {}

    def flaky(_env: JobEnv, _queue: Any, name: str, failures: int) -> str:
        tries[name] = tries.get(name, 0) + 1
        if tries[name] <= failures:
            raise Transient(f"{name} away")
        return f"{name} done"

    def waits(_env: JobEnv, _queue: Any) -> str:
        raise TryAgain("Slack asks to wait", 0.0, "gave up waiting")

    _register(app, Job("t.retried", flaky, names.DETECT_QUEUE, max_retries=2, backoff=lambda e, r: 0.0), settings)
    _register(app, Job("t.never", flaky, names.DETECT_QUEUE, max_retries=None), settings)
    _register(app, Job("t.waits", waits, names.NOTIFY_QUEUE, max_retries=1, backoff=lambda e, r: 0.0), settings)
    assert app.tasks["t.retried"].apply(args=["a", 2]).get() == "a done" and tries["a"] == 3
    with pytest.raises(Transient):
        app.tasks["t.retried"].apply(args=["b", 5]).get()
    assert tries["b"] == 3  # the first try and two retries
    with pytest.raises(Transient):
        app.tasks["t.never"].apply(args=["c", 1]).get()
    assert tries["c"] == 1
    assert app.tasks["t.waits"].apply().get() == "gave up waiting"


def test_call_names_a_job_of_the_table() -> None:
    assert call(names.PARSE_TASK, [1]).job is JOBS[names.PARSE_TASK]
    with pytest.raises(KeyError):
        call("kernelwatch.no_such_job")
