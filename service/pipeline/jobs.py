"""The table of jobs: every piece of follow-up work, written once, for every queue that carries it.

A job is a typed function ``(env, queue, *arguments)``. ``env`` holds the process's collaborators (built once, by
``service.context.Context.create``); ``queue`` is where the job's own follow-ups go. The three carriers run the
same table (issue 19: the in-process queue used to re-implement each Celery task body, and they drifted):

- ``InProcessQueue`` (service/pipeline/queue.py): the CLI's synchronous form, and what the embedded server's
  background thread runs each task through. A job raises, except the failures its ``contained`` names, which are
  logged (a run that cannot be made must not undo the ingest that asked for it).
- ``BackgroundQueue`` (service/pipeline/background.py): the same, on one thread, a ``Transient`` failure tried
  again after a delay.
- Celery (service/tasks.py): each job registered under its name, a ``Transient`` failure retried up to
  ``max_retries`` after ``backoff``.

Names and queues are service/task_names.py's. The jobs that only a beat starts (the sweeps, a tracked branch's
tick) are here too, so that service/tasks.py is a loop and nothing else.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwatch.errors import AnotherProject, Conflict, KernelWatchError, Transient
from runners.artifacts import ArtifactStore
from service.detect.types import Detector
from service.store.db import unit_of_work
from service.store.deliveries import DELIVERY_ATTEMPTS, STALE_AFTER, stale
from service.task_names import (
    COMPARE_TASK,
    DETECT_QUEUE,
    DETECT_TASK,
    FOLLOW_UP_FAILED_TASK,
    GITHUB_DELIVERY_SWEEP_TASK,
    GITHUB_DELIVERY_TASK,
    INGEST_QUEUE,
    NOTIFY_ALERT_TASK,
    NOTIFY_DUE_TASK,
    NOTIFY_QUEUE,
    PARSE_SWEEP_TASK,
    PARSE_TASK,
    PR_REPORT_TASK,
    PR_RUN_FAILED_TASK,
    RUN_SUITE_TASK,
    RUN_TRACKED_TASK,
)
from service.tracked import SCHEDULE_TRIGGER

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from service.pipeline.bisect import FollowUpPolicy, RunOrder
    from service.pipeline.notify import SlackNotifier
    from service.pipeline.ports import TaskQueue
    from service.pipeline.pull_requests import PullRequestHooks

log = logging.getLogger(__name__)

# The key of a follow-up run's task arguments that names its job: not the runner's (SuiteTask leaves it out), but
# where a run that cannot be made reports, so that its job ends failed rather than waits for results that will
# never come (``run_suite`` below).
FOLLOW_UP_JOB = "follow_up_job"

Upload = Callable[[dict[str, Any]], object]  # what it returns (an upload's outcome) is not read


@dataclass(frozen=True)
class JobEnv:
    """The collaborators of one process, built once; the jobs read them and nothing else."""

    sessions: sessionmaker[Session]
    detector: Detector
    artifacts: ArtifactStore
    # Where runs are made and commits checked out; None (a test's store, say) makes no follow-up run.
    home: Path | None = None
    repos_dir: Path | None = None
    policy: FollowUpPolicy | None = None
    notifier: SlackNotifier | None = None  # Slack alerts; None while KERNELWATCH_SLACK_TOKEN is unset
    pull_requests: PullRequestHooks | None = None  # the GitHub pull-request hook; None leaves its work undone
    # A runner host apart from the service uploads over HTTP (runners/uploader.py); None stores here.
    uploader: Upload | None = None
    redis_url: str | None = None  # the beat's tick marks what it queued there
    task_visibility_timeout_s: int = 3600
    track_mark_ttl_s: int = 3600


class TryAgain(Transient):
    """Not a failure of this job but a wait: try again after ``retry_after_s``. A carrier that has no tries left
    returns ``result`` (Slack asked to wait; the notification row holds the state, the sweep the rest)."""

    def __init__(self, message: str, retry_after_s: float, result: Any) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.result = result


def default_backoff(exc: Exception, retries: int) -> float:
    return float(min(60, 2 ** retries))


def github_backoff(exc: Exception, retries: int) -> float:
    """GitHub's own hint when it gave one (a rate limit says when it lifts), else exponential backoff."""
    hint = getattr(exc, "retry_after_s", None)
    return float(hint) + 1 if isinstance(hint, int | float) else float(min(300, 5 * 2 ** retries))


def _delivery_backoff(exc: Exception, retries: int) -> float:
    # Never later than the sweep's horizon, or the sweep would hand it out a second time meanwhile (a rate
    # limit's hint can be an hour).
    return min(github_backoff(exc, retries), STALE_AFTER.total_seconds() / 2)


def _hint_backoff(exc: Exception, retries: int) -> float:
    hint = getattr(exc, "retry_after_s", None)
    return max(1.0, float(hint)) if isinstance(hint, int | float) else default_backoff(exc, retries)


# --- the jobs ---------------------------------------------------------------------------------------------------

def parse(env: JobEnv, queue: TaskQueue, result_ids: list[int]) -> int:
    """Read the stored artifacts of these results (op tables, kernels, HLO)."""
    from service.pipeline.parse_artifacts import parse_results

    with unit_of_work(env.sessions) as session:
        return parse_results(session, env.artifacts, list(result_ids))


def detect(env: JobEnv, queue: TaskQueue, series_ids: list[int]) -> int:
    """Change points of these series, then their follow-ups and announcements."""
    from service.pipeline.detection import detect_and_follow_up

    return detect_and_follow_up(env.sessions, queue, series_ids, env.detector, env.artifacts, env.policy,
                                env.repos_dir, env.notifier)


def compare(env: JobEnv, queue: TaskQueue, run_ids: list[int]) -> int:
    """Each new run's commit compared with the measured commit before it, and stored."""
    from service.pipeline.stored_comparisons import store_comparisons

    return store_comparisons(env.sessions, run_ids)


def follow_up_failed(env: JobEnv, queue: TaskQueue, job_id: int, message: str) -> None:
    """A follow-up run that could not be made: its job ends failed, saying why."""
    from service.pipeline.bisect import fail_job

    with unit_of_work(env.sessions) as session:
        fail_job(session, job_id, message)


def run_suite(env: JobEnv, queue: TaskQueue, task_id: str, kwargs: dict[str, Any]) -> list[str]:
    """Check out, run and upload one suite task (runners/worker.py); its run ids. A follow-up run that cannot be
    made ends its job failed through the queue: the runner host may have no database, a service worker has."""
    from runners.worker import SuiteTask, execute

    if env.home is None:
        raise KernelWatchError("this process has no home to check commits out in: no run can be made here")
    try:
        return execute(SuiteTask.from_kwargs(kwargs), task_id, env.home, _uploader(env, queue))
    except Exception as exc:
        job_id = kwargs.get(FOLLOW_UP_JOB)
        if job_id is not None:
            queue.enqueue_follow_up_failed(
                int(job_id), f"the {kwargs.get('trigger', 'follow-up')} run could not be made: {exc}"[:2000])
        if kwargs.get("trigger") == SCHEDULE_TRIGGER and env.redis_url is not None:
            _record_scheduled_failure(env.redis_url, task_id, str(exc) or type(exc).__name__)
        if kwargs.get("trigger") == "pr" and kwargs.get("pr_number") and kwargs.get("also"):
            # The pull request's check run would otherwise stay in progress for good: no run will come to report.
            # Its session (the task's id without dashes, runners/worker.py) says which hardware's task it was.
            queue.enqueue_pr_run_failed(str(kwargs["repo"]), int(kwargs["pr_number"]), str(kwargs["also"][-1]),
                                        (str(exc) or type(exc).__name__)[:2000], task_id.replace("-", ""))
        raise


def _record_scheduled_failure(redis_url: str, task_id: str, reason: str) -> None:
    """A tracked tip's scheduled run failed: its queued mark says why, for the ticks that find it
    (service/pipeline/tracking.py)."""
    import redis

    from service.pipeline.tracking import record_failure

    client = redis.Redis.from_url(redis_url, socket_timeout=10)
    try:
        record_failure(client, task_id, reason)
    finally:
        client.close()


def _uploader(env: JobEnv, queue: TaskQueue) -> Upload:
    from runners.uploader import UploadConflict
    from service.pipeline.submit import submit_manifest

    send = env.uploader

    def upload(manifest: dict[str, Any]) -> None:
        try:
            if send is not None:
                send(manifest)
            else:
                submit_manifest(env.sessions, queue, manifest, env.artifacts)
        except AnotherProject:
            raise  # stored nowhere: the repository's name is another project's in the store (say so, fail the task)
        except (Conflict, UploadConflict):
            pass  # another delivery of this same task stored its own measurement first; keep that one

    return upload


def github_delivery(env: JobEnv, queue: TaskQueue, delivery_id: int) -> str:
    """A stored GitHub webhook delivery acted on: track the pull request, queue its runs. A ``Transient`` failure
    is counted on the delivery's row and raised for the carrier to try again, until the row is dead-lettered."""
    if env.pull_requests is None:
        return "off"
    try:
        return str(env.pull_requests.handle_delivery(delivery_id, queue.enqueue_suite_runs))
    except Transient as exc:
        try:
            again = env.pull_requests.retry_or_dead_letter(delivery_id, exc)
        except Transient:
            again = True  # the database is the one away: the carrier's count bounds it, the sweep the rest
        if not again:
            return "dead-lettered"
        raise


def pr_report(env: JobEnv, queue: TaskQueue, pull_request_id: int) -> str:
    """Compare a pull request's head with its merge-base and post the check and the comment."""
    if env.pull_requests is None:
        return "off"
    return str(env.pull_requests.report(pull_request_id))


def pr_run_failed(env: JobEnv, queue: TaskQueue, clone_url: str, number: int, head_sha: str, message: str,
                  task_session: str | None = None) -> str:
    """A pull request's runs could not be made: complete its check run as failed and say why in its comment (with
    other hardware's tasks in the scheduling, beside their verdict). ``task_session`` None: sent before it was."""
    if env.pull_requests is None:
        return "off"
    return str(env.pull_requests.run_failed(clone_url, number, head_sha, message, task_session))


def notify_alert(env: JobEnv, queue: TaskQueue, alert_id: int) -> dict[str, Any]:
    """Bring Slack up to date with one alert. Slack's failures are recorded on the alert's notification row (never
    raised); one Slack asks to wait out is tried again after its backoff, and by the sweep should that be lost."""
    if env.notifier is None:
        return {"alert_id": alert_id, "state": "off"}
    outcome = env.notifier.deliver(alert_id)
    result = {"alert_id": alert_id, "state": outcome.state, "error": outcome.error}
    if outcome.state == "pending" and outcome.retry_in_s is not None:
        raise TryAgain(f"Slack delivery of alert {alert_id} pending", outcome.retry_in_s, result)
    return result


def parse_sweep(env: JobEnv, queue: TaskQueue) -> list[int]:
    """A beat tick: queue again the parses a killed worker lost (``parse_sweep_schedule``)."""
    from service.pipeline.parse_artifacts import overdue_parses

    cutoff = datetime.now(UTC) - timedelta(seconds=2 * env.task_visibility_timeout_s)
    with env.sessions() as session:
        overdue = overdue_parses(session, cutoff)
    if overdue:
        log.warning("queueing %d result(s) whose parse was lost again", len(overdue))
        queue.enqueue_parse(overdue)
    return overdue


def notify_due(env: JobEnv, queue: TaskQueue) -> list[int]:
    """A beat tick: start the Slack deliveries that are due."""
    return [] if env.notifier is None else env.notifier.sweep()


def github_delivery_sweep(env: JobEnv, queue: TaskQueue) -> list[int]:
    """A beat tick: hand out again the deliveries whose handler was lost (service/store/deliveries.stale)."""
    if env.pull_requests is None:
        return []
    lost = stale(env.sessions)
    for delivery_id in lost:
        queue.enqueue_github_delivery(delivery_id)
    if lost:
        log.warning("handing out %d webhook delivery(ies) whose handler was lost again", len(lost))
    return lost


def run_tracked(env: JobEnv, queue: TaskQueue, repo: str, branch: str, hardware: str) -> dict[str, Any]:
    """A beat tick: queue the default suite at the branch's tip on runner.<hardware>, once per tip."""
    import redis

    from service.pipeline.pull_requests import SuiteRun
    from service.pipeline.tracking import RedisQueuedMarks, branch_tip, scheduled_run_stored, tick
    from service.tracked import TrackedBranch

    if env.redis_url is None:
        raise KernelWatchError("a tracked branch's tick needs KERNELWATCH_REDIS_URL (its queued marks live there)")

    def send(_queue: str, task_id: str, kwargs: dict[str, Any]) -> None:
        queue.enqueue_suite_runs([SuiteRun(hardware, kwargs, task_id)])

    client = redis.Redis.from_url(env.redis_url, socket_timeout=10)
    try:
        outcome = tick(TrackedBranch(repo, branch, hardware), branch_tip, scheduled_run_stored(env.sessions),
                       RedisQueuedMarks(client), send, env.track_mark_ttl_s)
    finally:
        client.close()
    if outcome.action == "failed":
        log.warning("the scheduled run of %s@%s at %s failed: %s; queued again in %d s, when its mark lapses",
                    repo, branch, outcome.sha[:12], outcome.failure, outcome.retry_in_s or 0)
        return {"sha": outcome.sha, "action": outcome.action, "task_id": outcome.task_id,
                "failure": outcome.failure, "retry_in_s": outcome.retry_in_s}
    return {"sha": outcome.sha, "action": outcome.action, "task_id": outcome.task_id}


# --- the table ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Job:
    name: str  # the Celery task's name (service/task_names.py)
    run: Callable[..., Any]
    # None: the runners' queue of the task's hardware (runner.<hardware>), chosen when it is sent.
    queue: str | None
    max_retries: int | None = 5  # of a Transient failure, under Celery; None: never retried there
    backoff: Callable[[Exception, int], float] = default_backoff
    # Failures the synchronous in-process queue logs instead of raising: its caller is an ingest that stands.
    contained: tuple[type[BaseException], ...] = ()
    # A run: called with the carrier's task id first (the runs it stores are named after it) and one dict of the
    # runner's arguments, which Celery carries as the task's keyword arguments (runners/worker.SuiteTask).
    takes_task_id: bool = False


JOBS: dict[str, Job] = {job.name: job for job in (
    Job(PARSE_TASK, parse, INGEST_QUEUE),
    Job(DETECT_TASK, detect, DETECT_QUEUE),
    Job(COMPARE_TASK, compare, DETECT_QUEUE),
    Job(FOLLOW_UP_FAILED_TASK, follow_up_failed, DETECT_QUEUE),
    # A run is minutes of work: never retried whole by the carrier (a redelivery runs it again; worker.execute).
    Job(RUN_SUITE_TASK, run_suite, None, max_retries=None, contained=(Exception,), takes_task_id=True),
    Job(GITHUB_DELIVERY_TASK, github_delivery, NOTIFY_QUEUE, max_retries=DELIVERY_ATTEMPTS,
        backoff=_delivery_backoff),
    Job(PR_REPORT_TASK, pr_report, NOTIFY_QUEUE, max_retries=8, backoff=github_backoff,
        contained=(KernelWatchError,)),  # GitHub down or refusing: the next run or push reports again
    Job(PR_RUN_FAILED_TASK, pr_run_failed, NOTIFY_QUEUE, max_retries=8, backoff=github_backoff,
        contained=(KernelWatchError,)),
    Job(NOTIFY_ALERT_TASK, notify_alert, NOTIFY_QUEUE, max_retries=8, backoff=_hint_backoff),
    Job(PARSE_SWEEP_TASK, parse_sweep, INGEST_QUEUE, max_retries=None),
    Job(NOTIFY_DUE_TASK, notify_due, NOTIFY_QUEUE, max_retries=None),
    Job(GITHUB_DELIVERY_SWEEP_TASK, github_delivery_sweep, NOTIFY_QUEUE, max_retries=None),
    # A tick that keeps failing is replaced by the next beat anyway: a few quick retries, no more.
    Job(RUN_TRACKED_TASK, run_tracked, None, max_retries=3,
        backoff=lambda exc, retries: float(min(60, 5 * 2 ** retries))),
)}


def run_task_kwargs(order: RunOrder) -> dict[str, Any]:
    """A follow-up run as the arguments of a ``run_suite`` task (plain JSON)."""
    return {"repo": order.repo, "commit": order.shas[0], "also": list(order.shas[1:]), "suite": order.suite,
            "params": order.params, "samples": order.samples, "trigger": order.trigger, "branch": order.branch,
            "quick": order.quick, "capture": True, FOLLOW_UP_JOB: order.job_id}


@dataclass(frozen=True)
class Call:
    """One job to run: its arguments, and for a run its task id and hardware (which runner queue takes it)."""

    job: Job
    args: tuple[Any, ...] = ()
    task_id: str | None = None
    hardware: str | None = None

    def __call__(self, env: JobEnv, queue: TaskQueue) -> Any:
        if self.job.takes_task_id:
            return self.job.run(env, queue, self.task_id or uuid.uuid4().hex, *self.args)
        return self.job.run(env, queue, *self.args)


def call(name: str, *args: Any, task_id: str | None = None, hardware: str | None = None) -> Call:
    return Call(JOBS[name], args, task_id, hardware)
