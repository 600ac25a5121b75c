"""The wiring of one process: settings → engine, sessions and task queue. Built by faces, never at import."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from runners.uploader import HttpUploader
from service.detect.series_detector import EDivisiveDetector
from service.detect.types import Detector
from service.pipeline.background import BackgroundQueue
from service.pipeline.bisect import FollowUpPolicy
from service.pipeline.ingest import IngestOutcome
from service.pipeline.jobs import JobEnv
from service.pipeline.notify import SlackNotifier
from service.pipeline.ports import TaskQueue
from service.pipeline.pull_requests import HookConfig, PullRequestHooks
from service.pipeline.queue import CeleryQueue, InProcessQueue
from service.pipeline.submit import submit_manifest
from service.settings import Settings
from service.store.db import make_engine, make_session_factory
from service.tracked import queued_mark_ttl_s


@dataclass
class Context:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    queue: TaskQueue
    jobs: JobEnv  # what the job table's jobs are run with (service/pipeline/jobs.py), built once
    celery: Any | None = None  # the sender's Celery app in the distributed form (service/celery_app.py)
    background: BackgroundQueue | None = None  # the embedded server's follow-up thread, once started

    @property
    def detector(self) -> Detector:
        return self.jobs.detector

    @property
    def artifacts(self) -> ArtifactStore:
        return self.jobs.artifacts

    @property
    def follow_up_policy(self) -> FollowUpPolicy | None:
        return self.jobs.policy

    @property
    def notifier(self) -> SlackNotifier | None:
        """Slack alerts; None while KERNELWATCH_SLACK_TOKEN is unset."""
        return self.jobs.notifier

    @property
    def pull_requests(self) -> PullRequestHooks | None:
        """The GitHub pull-request hook's steps."""
        return self.jobs.pull_requests

    @classmethod
    def create(cls, settings: Settings) -> Context:
        """Every collaborator built here, once, and passed in: nothing is set after construction."""
        settings.ensure_dirs()
        engine = make_engine(settings.effective_database_url)
        sessions = make_session_factory(engine)
        celery = None
        if settings.redis_url:
            from service.celery_app import celery_app

            celery = celery_app(settings)  # a sender: the tasks are the workers' (service/tasks.py)
        uploader = None
        if settings.uploads_over_http:
            uploader = http_uploader(settings)  # a runner host apart from the service: no database of its own
        jobs = JobEnv(
            sessions=sessions, detector=EDivisiveDetector(), artifacts=ArtifactStore(settings.artifacts_dir),
            home=settings.home, repos_dir=settings.repos_dir,
            policy=FollowUpPolicy(bisect="bisect" in settings.follow_up, confirm="confirm" in settings.follow_up),
            notifier=_slack_notifier(settings, sessions, None if celery is None else _notify_task(celery)),
            pull_requests=_pull_request_hooks(settings, sessions), uploader=uploader, redis_url=settings.redis_url,
            task_visibility_timeout_s=settings.task_visibility_timeout_s,
            track_mark_ttl_s=queued_mark_ttl_s(settings.track_period_s, settings.task_visibility_timeout_s))
        queue: TaskQueue = InProcessQueue(jobs) if celery is None else CeleryQueue(celery)
        return cls(settings=settings, engine=engine, sessions=sessions, queue=queue, jobs=jobs, celery=celery)

    def submit(self, payload: Any) -> IngestOutcome:
        """A finished run into the store: its artifacts must be in this context's artifact store already."""
        return submit_manifest(self.sessions, self.queue, payload, self.artifacts)

    def with_background_queue(self) -> Context:
        """This context for a long-lived embedded server (`kernelwatch serve` without Redis): its follow-up work
        runs after the request that caused it has answered (service/pipeline/background.py), and deliveries a
        previous server left queued are handed out again (it was their only handler)."""
        if self.celery is not None or self.background is not None:
            return self
        from service.store.deliveries import stale

        background = BackgroundQueue(InProcessQueue(self.jobs))
        if self.pull_requests is not None:
            for delivery_id in stale(self.sessions, older_than=timedelta(0)):
                background.enqueue_github_delivery(delivery_id)
        jobs = self.jobs
        if jobs.notifier is not None:
            # A request's Slack announcements (a triage's edit) go to the thread too, delivered there by the
            # notifier the queue's own work uses, which also sends the retries that are due.
            inline = jobs.notifier
            jobs = dataclasses.replace(jobs, notifier=dataclasses.replace(
                inline, dispatch=lambda alert_id: background.defer("slack", inline.send, [alert_id])))
        return dataclasses.replace(self, queue=background, jobs=jobs, background=background)

    def follow_up_stats(self) -> dict[str, Any] | None:
        """What the embedded server's background queue has pending, done and failed; None elsewhere (Celery's
        queues are watched with Celery's tools, the CLI's queue works synchronously)."""
        return None if self.background is None else self.background.stats()

    def finish_follow_up(self, timeout_s: float) -> int:
        """Let the background queue's pending work finish for up to ``timeout_s`` and stop it; what was left."""
        return 0 if self.background is None else self.background.close(timeout_s)

    def close(self) -> None:
        self.finish_follow_up(0.0)
        self.engine.dispose()


def http_uploader(settings: Settings) -> HttpUploader:
    """The runners' upload to KERNELWATCH_URL with KERNELWATCH_TOKEN, taking artifacts from this host's store."""
    if not settings.uploads_over_http or settings.service_url is None:
        raise ValueError("http_uploader needs KERNELWATCH_URL and KERNELWATCH_TOKEN")
    return HttpUploader(settings.service_url, settings.service_token, ArtifactStore(settings.artifacts_dir))


def _pull_request_hooks(settings: Settings, sessions: sessionmaker[Session]) -> PullRequestHooks:
    from service.integrations.github import ClientFactory

    gh = settings.github
    config = HookConfig(hardware=gh.pr_hardware, label=gh.pr_label, samples=gh.pr_samples, rounds=gh.pr_rounds,
                        public_url=settings.public_url or "", check_runs=gh.uses_app)
    github = ClientFactory(gh.api_url, gh.app_id, gh.app_private_key, gh.token) if gh.can_post else None
    return PullRequestHooks(sessions, github, config)


def _slack_notifier(settings: Settings, sessions: sessionmaker[Session],
                    dispatch: Callable[[int], None] | None) -> SlackNotifier | None:
    if not settings.slack_enabled:
        return None
    from service.integrations.slack import SlackClient

    return SlackNotifier(sessions=sessions, sender=SlackClient(settings.slack_token, settings.slack_api_url),
                         channel=settings.slack_channel, public_url=settings.public_url, dispatch=dispatch)


def _notify_task(celery: Any) -> Callable[[int], None]:
    def dispatch(alert_id: int) -> None:
        from service.task_names import NOTIFY_ALERT_TASK, NOTIFY_QUEUE

        celery.send_task(NOTIFY_ALERT_TASK, args=[alert_id], queue=NOTIFY_QUEUE, ignore_result=True)

    return dispatch
