"""Celery app and task wrappers: ids in, pipeline called, only Transient errors retried.

Used when KERNELWATCH_REDIS_URL is set; the embedded default runs the same pipeline functions in-process.
Start a worker with ``kernelwatch worker --queues ingest,detect,notify`` and the schedule of tracked branches
with ``kernelwatch beat``.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from celery import Celery

from kernelwatch.errors import Transient
from runners.artifacts import ArtifactStore
from runners.uploader import HttpUploader
from service.celery_app import celery_app
from service.settings import Settings, load_settings
from service.store.deliveries import DELIVERY_ATTEMPTS, STALE_AFTER
from service.task_names import (
    COMPARE_TASK,
    DETECT_QUEUE,
    DETECT_TASK,
    FOLLOW_UP_FAILED_TASK,
    GITHUB_DELIVERY_SWEEP_TASK,
    GITHUB_DELIVERY_TASK,
    NOTIFY_ALERT_TASK,
    NOTIFY_DUE_TASK,
    PARSE_SWEEP_TASK,
    PARSE_TASK,
    PR_REPORT_TASK,
    RUN_SUITE_TASK,
    RUN_TRACKED_TASK,
)
from service.tracked import queued_mark_ttl_s

log = logging.getLogger(__name__)

@lru_cache(maxsize=1)
def _worker_context() -> Any:
    # One engine per worker process, built on first task rather than at import.
    from service.context import Context

    return Context.create(load_settings())


def http_uploader(settings: Settings) -> HttpUploader:
    """The runners' upload to KERNELWATCH_URL with KERNELWATCH_TOKEN, taking artifacts from this host's store."""
    if not settings.uploads_over_http or settings.service_url is None:
        raise ValueError("http_uploader needs KERNELWATCH_URL and KERNELWATCH_TOKEN")
    return HttpUploader(settings.service_url, settings.service_token, ArtifactStore(settings.artifacts_dir))


def _github_countdown(exc: Exception, retries: int) -> float:
    """GitHub's own hint when it gave one (a rate limit says when it lifts), else exponential backoff."""
    hint = getattr(exc, "retry_after_s", None)
    return float(hint) + 1 if isinstance(hint, int | float) else float(min(300, 5 * 2 ** retries))


def make_celery(settings: Settings) -> Celery:
    """The worker's app: the configured app (service/celery_app.py) with every task registered on it."""
    app = celery_app(settings)
    # Every task below is shared=False: a closure over this app and these settings. A shared task (Celery's
    # default) would be registered into every app made later in the same process, with the first app's
    # settings and broker in its closure.

    @app.task(name=PARSE_TASK, bind=True, max_retries=5, shared=False)
    def parse_artifacts(self: Any, result_ids: list[int]) -> int:
        from service.pipeline.parse_artifacts import parse_results
        from service.store.db import unit_of_work

        ctx = _worker_context()
        try:
            with unit_of_work(ctx.sessions) as session:
                return parse_results(session, ctx.artifacts, result_ids)
        except Transient as exc:
            raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries)) from exc

    @app.task(name=FOLLOW_UP_FAILED_TASK, bind=True, max_retries=5, shared=False)
    def follow_up_failed(self: Any, job_id: int, message: str) -> None:
        """A follow-up run a runner could not make (run_suite below): its job ends failed, saying why."""
        from service.pipeline.bisect import fail_job
        from service.store.db import unit_of_work

        ctx = _worker_context()
        try:
            with unit_of_work(ctx.sessions) as session:
                fail_job(session, job_id, message)
        except Transient as exc:
            raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries)) from exc

    @app.task(name=RUN_SUITE_TASK, bind=True, shared=False)
    def run_suite(self: Any, **kwargs: Any) -> list[str]:
        try:
            return _run_suite(self, **kwargs)
        except Exception as exc:
            from service.pipeline.queue import FOLLOW_UP_JOB

            job_id = kwargs.get(FOLLOW_UP_JOB)
            if job_id is not None:
                # The runner host may have no database: the job is ended by a worker that has one. As the
                # in-process queue does (service/pipeline/queue.py), a run that cannot be made ends its job.
                app.send_task(FOLLOW_UP_FAILED_TASK, queue=DETECT_QUEUE, ignore_result=True, args=[
                    int(job_id), f"the {kwargs.get('trigger', 'follow-up')} run could not be made: {exc}"[:2000]])
            raise

    def _run_suite(self: Any, **kwargs: Any) -> list[str]:
        from runners.worker import SuiteTask, execute

        task = SuiteTask.from_kwargs(kwargs)
        if settings.uploads_over_http:
            # A runner host apart from the service: manifests and artifacts go to its HTTP API, no database here.
            from runners.uploader import UploadConflict

            send = http_uploader(settings)

            def upload_http(manifest: dict[str, Any]) -> None:
                try:
                    send(manifest)
                except UploadConflict:
                    pass  # another delivery of this same task stored its own measurement first; keep that one

            return execute(task, self.request.id, settings.home, upload_http)

        from kernelwatch.errors import Conflict

        ctx = _worker_context()

        def upload(manifest: dict[str, Any]) -> None:
            try:
                ctx.submit(manifest)
            except Conflict:
                pass  # another delivery of this same task stored its own measurement first; keep that one

        return execute(task, self.request.id, ctx.settings.home, upload)

    @app.task(name=DETECT_TASK, bind=True, max_retries=5, shared=False)
    def detect_series(self: Any, series_ids: list[int]) -> int:
        from service.pipeline.queue import detect_and_follow_up

        ctx = _worker_context()
        try:
            return detect_and_follow_up(ctx.sessions, ctx.queue, series_ids, ctx.detector, ctx.artifacts,
                                        ctx.follow_up_policy, ctx.settings.repos_dir, ctx.notifier)
        except Transient as exc:
            raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries)) from exc

    @app.task(name=COMPARE_TASK, bind=True, max_retries=5, shared=False)
    def compare_runs(self: Any, run_ids: list[int]) -> int:
        from service.pipeline.stored_comparisons import store_comparisons

        ctx = _worker_context()
        try:
            return store_comparisons(ctx.sessions, run_ids)
        except Transient as exc:
            raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries)) from exc

    @app.task(name=NOTIFY_ALERT_TASK, bind=True, max_retries=8, shared=False)
    def notify_alert(self: Any, alert_id: int) -> dict[str, Any]:
        """Bring Slack up to date with one alert. Slack's failures are recorded on the alert's notification row
        (never raised); a transient one is retried here after its backoff, and by the beat's sweep should this
        task be lost."""
        ctx = _worker_context()
        if ctx.notifier is None:
            return {"alert_id": alert_id, "state": "off"}
        try:
            outcome = ctx.notifier.deliver(alert_id)
        except Transient as exc:  # the database, not Slack
            raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries)) from exc
        if outcome.state == "pending" and outcome.retry_in_s is not None and self.request.retries < self.max_retries:
            raise self.retry(countdown=max(1.0, outcome.retry_in_s))
        return {"alert_id": alert_id, "state": outcome.state, "error": outcome.error}

    @app.task(name=PARSE_SWEEP_TASK, shared=False)
    def parse_sweep() -> list[int]:
        """A beat tick: queue again the parses a killed worker lost (``parse_sweep_schedule``)."""
        from datetime import UTC, datetime, timedelta

        from service.pipeline.parse_artifacts import overdue_parses

        ctx = _worker_context()
        cutoff = datetime.now(UTC) - timedelta(seconds=2 * ctx.settings.task_visibility_timeout_s)
        with ctx.sessions() as session:
            overdue = overdue_parses(session, cutoff)
        if overdue:
            log.warning("queueing %d result(s) whose parse was lost again", len(overdue))
            ctx.queue.enqueue_parse(overdue)
        return overdue

    @app.task(name=NOTIFY_DUE_TASK, shared=False)
    def notify_due() -> list[int]:
        """A beat tick: start the Slack deliveries that are due."""
        ctx = _worker_context()
        return [] if ctx.notifier is None else ctx.notifier.sweep()

    @app.task(name=GITHUB_DELIVERY_TASK, bind=True, max_retries=DELIVERY_ATTEMPTS, shared=False)
    def github_delivery(self: Any, delivery_id: int) -> str:
        """A stored GitHub webhook delivery acted on: track the pull request, queue its runs. Retried whole while
        GitHub, the database or the broker is away, dead-lettered after DELIVERY_ATTEMPTS tries."""
        ctx = _worker_context()
        if ctx.pull_requests is None:
            return "off"
        try:
            return str(ctx.pull_requests.handle_delivery(delivery_id, ctx.queue.enqueue_suite_runs))
        except Transient as exc:
            try:
                again = ctx.pull_requests.retry_or_dead_letter(delivery_id, exc)
            except Transient:
                again = True  # the database is the one away: Celery's count bounds it, the sweep the rest
            if not again:
                return "dead-lettered"
            # Never later than the sweep's horizon, or the sweep would hand it out a second time meanwhile (a
            # rate limit's hint can be an hour).
            countdown = min(_github_countdown(exc, self.request.retries), STALE_AFTER.total_seconds() / 2)
            raise self.retry(exc=exc, countdown=countdown) from exc

    @app.task(name=GITHUB_DELIVERY_SWEEP_TASK, shared=False)
    def github_delivery_sweep() -> list[int]:
        """A beat tick: hand out again the deliveries whose handler was lost (service/store/deliveries.stale)."""
        from service.store.deliveries import stale

        ctx = _worker_context()
        if ctx.pull_requests is None:
            return []
        lost = stale(ctx.sessions)
        for delivery_id in lost:
            ctx.queue.enqueue_github_delivery(delivery_id)
        if lost:
            log.warning("handing out %d webhook delivery(ies) whose handler was lost again", len(lost))
        return lost

    @app.task(name=PR_REPORT_TASK, bind=True, max_retries=8, shared=False)
    def report_pull_request(self: Any, pull_request_id: int) -> str:
        """Compare a pull request's head with its merge-base and post the check and the comment."""
        ctx = _worker_context()
        if ctx.pull_requests is None:
            return "off"
        try:
            return str(ctx.pull_requests.report(pull_request_id))
        except Transient as exc:
            raise self.retry(exc=exc, countdown=_github_countdown(exc, self.request.retries)) from exc

    @app.task(name=RUN_TRACKED_TASK, bind=True, max_retries=3, shared=False)
    def run_tracked(self: Any, repo: str, branch: str, hardware: str) -> dict[str, str]:
        """A beat tick: queue the default suite at the branch's tip on runner.<hardware>, once per tip."""
        import redis

        from service.pipeline.tracking import RedisQueuedMarks, branch_tip, scheduled_run_stored, tick
        from service.tracked import TrackedBranch

        ctx = _worker_context()

        def send(queue: str, task_id: str, kwargs: dict[str, Any]) -> None:
            self.app.send_task(RUN_SUITE_TASK, kwargs=kwargs, queue=queue, task_id=task_id, ignore_result=True)

        client = redis.Redis.from_url(ctx.settings.redis_url, socket_timeout=10)
        try:
            outcome = tick(TrackedBranch(repo, branch, hardware), branch_tip, scheduled_run_stored(ctx.sessions),
                           RedisQueuedMarks(client), send,
                           queued_mark_ttl_s(ctx.settings.track_period_s, ctx.settings.task_visibility_timeout_s))
        except Transient as exc:
            # A tick that keeps failing is replaced by the next beat anyway: a few quick retries, no more.
            raise self.retry(exc=exc, countdown=min(60, 5 * 2 ** self.request.retries)) from exc
        finally:
            client.close()
        return {"sha": outcome.sha, "action": outcome.action, "task_id": outcome.task_id}

    return app
