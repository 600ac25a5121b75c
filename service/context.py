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
from service.detect.series_detector import EDivisiveDetector
from service.detect.types import Detector
from service.pipeline.background import BackgroundQueue
from service.pipeline.bisect import FollowUpPolicy
from service.pipeline.ingest import IngestOutcome
from service.pipeline.notify import SlackNotifier
from service.pipeline.ports import TaskQueue
from service.pipeline.pull_requests import HookConfig, PullRequestHooks
from service.pipeline.queue import CeleryQueue, InProcessQueue
from service.pipeline.submit import submit_manifest
from service.settings import Settings
from service.store.db import make_engine, make_session_factory


@dataclass
class Context:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    queue: TaskQueue
    detector: Detector
    artifacts: ArtifactStore
    follow_up_policy: FollowUpPolicy | None = None
    notifier: SlackNotifier | None = None  # Slack alerts; None while KERNELWATCH_SLACK_TOKEN is unset
    pull_requests: PullRequestHooks | None = None  # the GitHub pull-request hook's steps

    @classmethod
    def create(cls, settings: Settings) -> Context:
        settings.ensure_dirs()
        engine = make_engine(settings.effective_database_url)
        sessions = make_session_factory(engine)
        detector: Detector = EDivisiveDetector()
        artifacts = ArtifactStore(settings.artifacts_dir)
        policy = FollowUpPolicy(bisect="bisect" in settings.follow_up, confirm="confirm" in settings.follow_up)
        notifier = _slack_notifier(settings, sessions)
        queue: TaskQueue
        if settings.redis_url:
            from service.celery_app import celery_app

            celery = celery_app(settings)  # a sender: the tasks are the workers' (service/tasks.py)
            queue = CeleryQueue(celery)
            if notifier is not None:
                notifier.dispatch = _notify_task(celery)
        else:
            queue = InProcessQueue(sessions, detector, artifacts, home=settings.home, policy=policy,
                                   notifier=notifier)
        hooks = _pull_request_hooks(settings, sessions)
        if isinstance(queue, InProcessQueue):
            queue.pull_requests = hooks
        return cls(settings=settings, engine=engine, sessions=sessions, queue=queue, detector=detector,
                   artifacts=artifacts, follow_up_policy=policy, notifier=notifier, pull_requests=hooks)

    def submit(self, payload: Any) -> IngestOutcome:
        """A finished run into the store: its artifacts must be in this context's artifact store already."""
        return submit_manifest(self.sessions, self.queue, payload, self.artifacts)

    def with_background_queue(self) -> Context:
        """This context for a long-lived embedded server (`kernelwatch serve` without Redis): its follow-up work
        runs after the request that caused it has answered (service/pipeline/background.py), and deliveries a
        previous server left queued are handed out again (it was their only handler)."""
        if not isinstance(self.queue, InProcessQueue):
            return self
        from service.store.deliveries import stale

        background = BackgroundQueue(self.queue)
        if self.pull_requests is not None:
            for delivery_id in stale(self.sessions, older_than=timedelta(0)):
                background.enqueue_github_delivery(delivery_id)
        notifier = self.notifier
        if notifier is not None:
            # A request's Slack announcements (a triage's edit) go to the thread too, delivered there by the
            # notifier the queue's own work uses, which also sends the retries that are due.
            inline = notifier
            notifier = dataclasses.replace(notifier, dispatch=lambda alert_id: background.defer(
                "slack", inline.send, [alert_id]))
        return dataclasses.replace(self, queue=background, notifier=notifier)

    def follow_up_stats(self) -> dict[str, Any] | None:
        """What the embedded server's background queue has pending, done and failed; None elsewhere (Celery's
        queues are watched with Celery's tools, the CLI's queue works synchronously)."""
        return self.queue.stats() if isinstance(self.queue, BackgroundQueue) else None

    def finish_follow_up(self, timeout_s: float) -> int:
        """Let the background queue's pending work finish for up to ``timeout_s`` and stop it; what was left."""
        return self.queue.close(timeout_s) if isinstance(self.queue, BackgroundQueue) else 0

    def close(self) -> None:
        self.finish_follow_up(0.0)
        self.engine.dispose()


def _pull_request_hooks(settings: Settings, sessions: sessionmaker[Session]) -> PullRequestHooks:
    from service.integrations.github import ClientFactory

    gh = settings.github
    config = HookConfig(hardware=gh.pr_hardware, label=gh.pr_label, samples=gh.pr_samples, rounds=gh.pr_rounds,
                        public_url=settings.public_url or "", check_runs=gh.uses_app)
    github = ClientFactory(gh.api_url, gh.app_id, gh.app_private_key, gh.token) if gh.can_post else None
    return PullRequestHooks(sessions, github, config)


def _slack_notifier(settings: Settings, sessions: sessionmaker[Session]) -> SlackNotifier | None:
    if not settings.slack_enabled:
        return None
    from service.integrations.slack import SlackClient

    return SlackNotifier(sessions=sessions, sender=SlackClient(settings.slack_token, settings.slack_api_url),
                         channel=settings.slack_channel, public_url=settings.public_url)


def _notify_task(celery: Any) -> Callable[[int], None]:
    def dispatch(alert_id: int) -> None:
        from service.task_names import NOTIFY_ALERT_TASK, NOTIFY_QUEUE

        celery.send_task(NOTIFY_ALERT_TASK, args=[alert_id], queue=NOTIFY_QUEUE, ignore_result=True)

    return dispatch
