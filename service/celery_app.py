"""The Celery app as configured for KernelWatch, without its tasks: what a sender needs (the service's queue, the CLI's
`submit`, the API's enqueue) to send tasks by name (service/task_names.py), and what the worker (service/tasks.py)
registers its tasks on. Kept apart so that building a context never imports the task bodies, which import the
context (issue 19: service/context.py and service/tasks.py imported each other)."""

from __future__ import annotations

from typing import Any

from celery import Celery

from service.settings import Settings
from service.task_names import (
    DETECT_QUEUE,
    GITHUB_DELIVERY_SWEEP_TASK,
    INGEST_QUEUE,
    NOTIFY_DUE_TASK,
    NOTIFY_QUEUE,
    PARSE_SWEEP_TASK,
)
from service.tracked import beat_schedule

NOTIFY_SWEEP_S = 300.0  # how often beat looks for Slack deliveries whose retry is due (or whose task was lost)
GITHUB_SWEEP_S = 300.0  # how often beat looks for webhook deliveries whose handler was lost


def celery_app(settings: Settings) -> Celery:
    """The app with KernelWatch's configuration and beat schedule, and no task registered."""
    app = Celery("kernelwatch", broker=settings.redis_url, backend=settings.redis_url)
    app.conf.update(
        task_acks_late=True,  # a worker killed mid-task leaves the task for another worker
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,  # a runner takes one suite at a time and leaves the rest to others
        task_default_queue=DETECT_QUEUE,
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": settings.task_visibility_timeout_s,
            # Sweep for tasks of vanished workers a few times per visibility timeout (kombu's default is one
            # real sweep per 100 s, far behind a short timeout).
            "unacked_restore_interval": max(1, min(10, settings.task_visibility_timeout_s // 4)),
            "unacked_restore_throttle": 1,
        },
        # Nothing reads a task's return value (outcomes are in the database): storing one per task filled Redis
        # with a key per task for a day (bench/soak.py counted thousands).
        task_ignore_result=True,
        result_expires=24 * 3600,
        task_serializer="json",
        accept_content=["json"],
        beat_schedule={**beat_schedule(settings.tracked, settings.track_period_s), **notify_schedule(settings),
                       **parse_sweep_schedule(settings), **github_sweep_schedule(settings)},
    )
    return app


def notify_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """The beat entry of the Slack sweep, when Slack is configured. A sweep that no worker took in time is
    replaced by the next one, so it expires after one period."""
    if not settings.slack_enabled:
        return {}
    return {"slack sweep": {"task": NOTIFY_DUE_TASK, "schedule": NOTIFY_SWEEP_S,
                            "options": {"queue": NOTIFY_QUEUE, "expires": NOTIFY_SWEEP_S}}}


def parse_sweep_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """The beat entry of the sweep that queues lost parses again (service/pipeline/parse_artifacts.overdue_parses):
    once per visibility timeout, for runs that finished more than two of them ago (a parse still queued behind a
    backlog is parsed twice at worst, which is idempotent)."""
    period = float(max(5, settings.task_visibility_timeout_s))
    return {"parse sweep": {"task": PARSE_SWEEP_TASK, "schedule": period,
                            "options": {"queue": INGEST_QUEUE, "expires": period}}}


def github_sweep_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """The beat entry of the sweep that hands out again webhook deliveries whose handler was lost, when the hook
    is on."""
    if not settings.github.webhook_secret:
        return {}
    period = GITHUB_SWEEP_S
    return {"github delivery sweep": {"task": GITHUB_DELIVERY_SWEEP_TASK, "schedule": period,
                                      "options": {"queue": NOTIFY_QUEUE, "expires": period}}}
