"""Celery app and task wrappers: ids in, pipeline called, only Transient errors retried.

Used when KERNELWATCH_REDIS_URL is set; the embedded default runs the same pipeline functions in-process.
Start a worker with ``kernelwatch worker --queues detect``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from celery import Celery

from service.errors import Transient
from service.settings import Settings, load_settings

RUN_SUITE_TASK = "kernelwatch.run_suite"


def runner_queue(hardware: str) -> str:
    return f"runner.{hardware}"


@lru_cache(maxsize=1)
def _worker_context() -> Any:
    # One engine per worker process, built on first task rather than at import.
    from service.context import Context

    return Context.create(load_settings())


def make_celery(settings: Settings) -> Celery:
    app = Celery("kernelwatch", broker=settings.redis_url, backend=settings.redis_url)
    app.conf.update(
        task_acks_late=True,  # a worker killed mid-task leaves the task for another worker
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,  # a runner takes one suite at a time and leaves the rest to others
        task_default_queue="detect",
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": settings.task_visibility_timeout_s,
            # Sweep for tasks of vanished workers a few times per visibility timeout (kombu's default is one
            # real sweep per 100 s, far behind a short timeout).
            "unacked_restore_interval": max(1, min(10, settings.task_visibility_timeout_s // 4)),
            "unacked_restore_throttle": 1,
        },
        result_expires=24 * 3600,
        task_serializer="json",
        accept_content=["json"],
    )

    @app.task(name="kernelwatch.parse_artifacts", bind=True, max_retries=5)
    def parse_artifacts(self: Any, result_ids: list[int]) -> int:
        from service.pipeline.parse_artifacts import parse_results
        from service.store.db import unit_of_work

        ctx = _worker_context()
        try:
            with unit_of_work(ctx.sessions) as session:
                return parse_results(session, ctx.artifacts, result_ids)
        except Transient as exc:
            raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries)) from exc

    @app.task(name=RUN_SUITE_TASK, bind=True)
    def run_suite(self: Any, **kwargs: Any) -> list[str]:
        from runners.worker import SuiteTask, execute
        from service.errors import Conflict

        ctx = _worker_context()

        def upload(manifest: dict[str, Any]) -> None:
            try:
                ctx.submit(manifest)
            except Conflict:
                pass  # another delivery of this same task stored its own measurement first; keep that one

        return execute(SuiteTask.from_kwargs(kwargs), self.request.id, ctx.settings.home, upload)

    @app.task(name="kernelwatch.detect_series", bind=True, max_retries=5)
    def detect_series(self: Any, series_ids: list[int]) -> int:
        from service.pipeline.detection import detect_many
        from service.pipeline.queue import follow_up
        from service.store.db import unit_of_work

        ctx = _worker_context()
        try:
            with unit_of_work(ctx.sessions) as session:
                found = detect_many(session, series_ids, ctx.detector, ctx.artifacts)
            follow_up(ctx.sessions, ctx.queue, series_ids, ctx.follow_up_policy, ctx.settings.repos_dir)
            return found
        except Transient as exc:
            raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries)) from exc

    return app
