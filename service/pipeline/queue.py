"""The carriers of follow-up work: each turns the typed ``TaskQueue`` calls into calls of the one job table
(service/pipeline/jobs.py). ``InProcessQueue`` runs them here and now (the embedded default and the CLI),
``CeleryQueue`` sends them by name onto the broker (the distributed form; service/tasks.py runs the same jobs);
service/pipeline/background.py's queue runs them on a thread of the embedded server."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from kernelwatch.errors import Transient
from service.pipeline.jobs import Call, JobEnv, call, run_task_kwargs
from service.task_names import (
    COMPARE_TASK,
    DETECT_TASK,
    FOLLOW_UP_FAILED_TASK,
    GITHUB_DELIVERY_TASK,
    PARSE_TASK,
    PR_REPORT_TASK,
    PR_RUN_FAILED_TASK,
    RUN_SUITE_TASK,
    runner_queue,
)

if TYPE_CHECKING:
    from service.pipeline.bisect import RunOrder
    from service.pipeline.pull_requests import SuiteRun

log = logging.getLogger(__name__)


class JobQueue:
    """The ``TaskQueue`` port written once over ``submit``: what differs between carriers is how a call travels."""

    def submit(self, job_call: Call) -> None:
        raise NotImplementedError

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        if series_ids:
            self.submit(call(DETECT_TASK, list(series_ids)))

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        if result_ids:
            self.submit(call(PARSE_TASK, list(result_ids)))

    def enqueue_compare(self, run_ids: Sequence[int]) -> None:
        if run_ids:
            self.submit(call(COMPARE_TASK, list(run_ids)))

    def enqueue_runs(self, orders: Sequence[RunOrder]) -> None:
        for order in orders:
            # The order's task id: the runs it stores are named after it, which is how a confirmation tells its
            # own runs from any other run of the same commits (service/pipeline/bisect.py).
            self.submit(call(RUN_SUITE_TASK, run_task_kwargs(order), task_id=order.task_id,
                             hardware=order.hardware))

    def enqueue_follow_up_failed(self, job_id: int, message: str) -> None:
        self.submit(call(FOLLOW_UP_FAILED_TASK, job_id, message))

    def enqueue_github_delivery(self, delivery_id: int) -> None:
        self.submit(call(GITHUB_DELIVERY_TASK, delivery_id))

    def enqueue_suite_runs(self, runs: Sequence[SuiteRun]) -> None:
        for run in runs:
            self.submit(call(RUN_SUITE_TASK, run.kwargs, task_id=run.task_id, hardware=run.hardware))

    def enqueue_pr_reports(self, pull_request_ids: Sequence[int]) -> None:
        for pr_id in pull_request_ids:
            self.submit(call(PR_REPORT_TASK, pr_id))

    def enqueue_pr_run_failed(self, clone_url: str, number: int, head_sha: str, message: str,
                              task_session: str | None = None) -> None:
        self.submit(call(PR_RUN_FAILED_TASK, clone_url, number, head_sha, message, task_session))


class InProcessQueue(JobQueue):
    """Runs each job immediately, in this process; a job's follow-ups come back here and run inside it, so a
    bisection proceeds to its end inside the call that started it."""

    def __init__(self, env: JobEnv) -> None:
        self.env = env

    def submit(self, job_call: Call) -> None:
        if job_call.job.takes_task_id and self.env.home is None:
            return  # nowhere to check commits out: no run (a test's store, say)
        try:
            job_call(self.env, self)
        except job_call.job.contained:
            # An ingest, a webhook or a report asked for this; it stands, and the next event tries again.
            log.exception("follow-up %s%s failed", job_call.job.name, _brief(job_call.args))


def _brief(args: tuple[Any, ...]) -> str:
    text = repr(args)
    return text if len(text) <= 200 else text[:197] + "..."


class CeleryQueue(JobQueue):
    """Sends jobs by name, so the sender needs no import of the worker's task code; arguments are plain JSON."""

    def __init__(self, celery_app: Any) -> None:
        self.app = celery_app

    def submit(self, job_call: Call) -> None:
        job = job_call.job
        if job.takes_task_id:
            assert job_call.hardware is not None, "a run names the hardware whose runners take it"
            self._send(job.name, runner_queue(job_call.hardware), kwargs=job_call.args[0], task_id=job_call.task_id)
        else:
            assert job.queue is not None
            self._send(job.name, job.queue, args=list(job_call.args))

    def _send(self, name: str, queue: str, **arguments: Any) -> None:
        # A broker that cannot be reached is a transient failure: the submitter is told (HTTP 503) and retries,
        # and a retried submission enqueues its follow-ups again (``submit_manifest``).
        # ignore_result: nothing waits on these tasks' results, and without it send_task first subscribes to the
        # result backend (the same Redis), which during a longer outage raises a RuntimeError ("Retry limit
        # exceeded while trying to reconnect to the Celery result store backend") that no except below catches:
        # a 500 the runner does not retry, after the run was committed, and its follow-ups were never queued.
        try:
            self.app.send_task(name, queue=queue, ignore_result=True, **arguments)
        except (KombuOperationalError, RedisError, OSError) as exc:
            raise Transient(f"task broker unavailable: {exc}") from exc
