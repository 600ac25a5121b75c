"""Where follow-up work goes after a write commits: in-process (embedded default) or onto Celery queues."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import KernelWatchError, Transient
from runners.artifacts import ArtifactStore
from service.detect.types import Detector
from service.pipeline.bisect import FollowUpPolicy, GitCommitLister, RunOrder, advance_follow_ups, fail_job
from service.pipeline.detection import detect_many
from service.pipeline.parse_artifacts import parse_results
from service.pipeline.ports import TaskQueue
from service.pipeline.stored_comparisons import store_comparisons
from service.store.db import unit_of_work
from service.task_names import (
    COMPARE_TASK,
    DETECT_QUEUE,
    DETECT_TASK,
    GITHUB_DELIVERY_TASK,
    INGEST_QUEUE,
    NOTIFY_QUEUE,
    PARSE_TASK,
    PR_REPORT_TASK,
    RUN_SUITE_TASK,
    runner_queue,
)

if TYPE_CHECKING:
    from service.pipeline.alerts import GroupingOutcome
    from service.pipeline.notify import SlackNotifier
    from service.pipeline.pull_requests import PullRequestHooks, SuiteRun

log = logging.getLogger(__name__)


FOLLOW_UP_JOB = "follow_up_job"


def run_task_kwargs(order: RunOrder) -> dict[str, Any]:
    """A follow-up run as the arguments of a ``run_suite`` task (plain JSON)."""
    return {"repo": order.repo, "commit": order.shas[0], "also": list(order.shas[1:]), "suite": order.suite,
            "params": order.params, "samples": order.samples, "trigger": order.trigger, "branch": order.branch,
            "quick": order.quick, "capture": True,
            # Not the runner's (SuiteTask leaves it out): where a run that cannot be made reports, so that its
            # job ends failed rather than waits for results that will never come (service/tasks.py run_suite).
            FOLLOW_UP_JOB: order.job_id}


def follow_up(sessions: sessionmaker[Session], queue: TaskQueue, series_ids: Sequence[int],
              policy: FollowUpPolicy | None, repos_dir: Path, notifier: SlackNotifier | None = None) -> None:
    """After detection committed: advance bisect and confirm jobs, in a transaction of their own, then hand the
    runs they ask for to the queue (only after that transaction committed, so a run never races its job row).
    A job that ended there owes its alert's thread a reply: marked in that transaction, sent after it."""
    if policy is None or not (policy.bisect or policy.confirm):
        return
    verdicts: list[int] = []
    with unit_of_work(sessions) as session:
        orders = advance_follow_ups(session, list(series_ids), GitCommitLister(repos_dir), policy)
        if notifier is not None:
            verdicts = notifier.mark_verdicts(session, list(series_ids))
    if orders:
        queue.enqueue_runs(orders)
    if notifier is not None:
        notifier.send(verdicts)


def detect_and_follow_up(sessions: sessionmaker[Session], queue: TaskQueue, series_ids: Sequence[int],
                         detector: Detector, artifacts: ArtifactStore | None, policy: FollowUpPolicy | None,
                         repos_dir: Path | None, notifier: SlackNotifier | None = None) -> int:
    """Detection in one transaction, then its follow-ups, then the announcements of the alerts it made. The
    announcements go last: a new alert whose change the follow-up starts bisecting is held until that ends
    (each bisection step replaces the alert with a narrower one; see ``service.pipeline.notify``)."""
    marked: list[int] = []

    def on_grouped(session: Session, outcome: GroupingOutcome) -> None:
        assert notifier is not None
        marked.extend(notifier.mark_grouped(session, outcome))

    with unit_of_work(sessions) as session:
        found = detect_many(session, list(series_ids), detector, artifacts,
                            on_grouped=on_grouped if notifier is not None else None)
    if repos_dir is not None:
        follow_up(sessions, queue, series_ids, policy, repos_dir, notifier)
    if notifier is not None:
        notifier.send(marked)
    return found


class InProcessQueue:
    """Runs follow-up work immediately, in this process, each task in its own transaction."""

    def __init__(self, sessions: sessionmaker[Session], detector: Detector, artifacts: ArtifactStore,
                 home: Path | None = None, policy: FollowUpPolicy | None = None,
                 notifier: SlackNotifier | None = None) -> None:
        self.sessions = sessions
        self.notifier = notifier
        self.detector = detector
        self.artifacts = artifacts
        # Without a home there is nowhere to check commits out: no follow-up runs.
        self.home = home
        self.policy = policy if home is not None else None

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        detect_and_follow_up(self.sessions, self, series_ids, self.detector, self.artifacts, self.policy,
                             None if self.home is None else self.home / "repos", self.notifier)

    def enqueue_runs(self, orders: Sequence[RunOrder]) -> None:
        """Run them here and now, through the code a runner worker runs; each result is ingested (and detected,
        and followed up) as it arrives, so a bisection proceeds to its end inside this call."""
        from runners.worker import SuiteTask, execute
        from service.pipeline.submit import submit_manifest

        def upload(manifest: dict[str, Any]) -> None:
            submit_manifest(self.sessions, self, manifest, self.artifacts)

        assert self.home is not None
        for order in orders:
            try:
                # The order's task id: the runs it stores are named after it, which is how a confirmation
                # tells its own runs from any other run of the same commits (service/pipeline/bisect.py).
                execute(SuiteTask.from_kwargs(run_task_kwargs(order)), order.task_id, self.home, upload)
            except Exception as exc:  # noqa: BLE001 - a run that cannot happen ends its job, not the ingest
                with unit_of_work(self.sessions) as session:
                    fail_job(session, order.job_id, f"the {order.trigger} run could not be made: {exc}")

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        with unit_of_work(self.sessions) as session:
            parse_results(session, self.artifacts, list(result_ids))

    def enqueue_compare(self, run_ids: Sequence[int]) -> None:
        store_comparisons(self.sessions, run_ids)

    # Set by Context.create: None leaves webhook deliveries and pull-request reports undone.
    pull_requests: PullRequestHooks | None = None

    def enqueue_github_delivery(self, delivery_id: int) -> None:
        if self.pull_requests is None:
            return
        try:
            self.pull_requests.handle_delivery(delivery_id, self.enqueue_suite_runs)
        except Transient as exc:
            if self.pull_requests.retry_or_dead_letter(delivery_id, exc):
                raise  # tried again by the background queue; in a request, answered 503 (service/hooks/github.py)

    def enqueue_suite_runs(self, runs: Sequence[SuiteRun]) -> None:
        """Run them here and now (minutes: the embedded form has no runner to hand them to), each manifest
        ingested as it comes, which reports the pull request when its head is in."""
        from runners.worker import SuiteTask, execute
        from service.pipeline.submit import submit_manifest

        def upload(manifest: dict[str, Any]) -> None:
            submit_manifest(self.sessions, self, manifest, self.artifacts)

        if self.home is None:
            return
        for run in runs:
            try:
                execute(SuiteTask.from_kwargs(run.kwargs), uuid.uuid4().hex, self.home, upload)
            except Exception:  # noqa: BLE001 - one run that cannot happen must not stop the others
                log.exception("the %s run of %s could not be made", run.kwargs.get("trigger"), run.kwargs.get("repo"))

    def enqueue_pr_reports(self, pull_request_ids: Sequence[int]) -> None:
        if self.pull_requests is None:
            return
        for pr_id in pull_request_ids:
            try:
                self.pull_requests.report(pr_id)
            except KernelWatchError:
                # GitHub down or refusing: the ingest that got here stands. The next run or push reports again.
                log.exception("pull request %s could not be reported", pr_id)


class CeleryQueue:
    """Sends tasks by name, so the sender needs no import of the worker's task code; arguments are ids."""

    def __init__(self, celery_app: Any) -> None:
        self.app = celery_app

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        if series_ids:
            self._send(DETECT_TASK, queue=DETECT_QUEUE, args=[list(series_ids)])

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        if result_ids:
            self._send(PARSE_TASK, queue=INGEST_QUEUE, args=[list(result_ids)])

    def enqueue_compare(self, run_ids: Sequence[int]) -> None:
        if run_ids:
            self._send(COMPARE_TASK, queue=DETECT_QUEUE, args=[list(run_ids)])

    def enqueue_runs(self, orders: Sequence[RunOrder]) -> None:
        for order in orders:
            # The order's task id, which names the runs it stores (see InProcessQueue.enqueue_runs).
            self._send(RUN_SUITE_TASK, queue=runner_queue(order.hardware), kwargs=run_task_kwargs(order),
                       task_id=order.task_id)

    def enqueue_github_delivery(self, delivery_id: int) -> None:
        self._send(GITHUB_DELIVERY_TASK, queue=NOTIFY_QUEUE, args=[delivery_id])

    def enqueue_suite_runs(self, runs: Sequence[SuiteRun]) -> None:
        for run in runs:
            self._send(RUN_SUITE_TASK, queue=runner_queue(run.hardware), kwargs=run.kwargs)

    def enqueue_pr_reports(self, pull_request_ids: Sequence[int]) -> None:
        for pr_id in pull_request_ids:
            self._send(PR_REPORT_TASK, queue=NOTIFY_QUEUE, args=[pr_id])

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
