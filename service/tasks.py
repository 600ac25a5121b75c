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
        worker_prefetch_multiplier=1,
        task_default_queue="detect",
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        accept_content=["json"],
    )

    @app.task(name="kernelwatch.detect_series", bind=True, max_retries=5)
    def detect_series(self: Any, series_ids: list[int]) -> int:
        from service.pipeline.detection import detect_many
        from service.store.db import unit_of_work

        ctx = _worker_context()
        try:
            with unit_of_work(ctx.sessions) as session:
                return detect_many(session, series_ids, ctx.detector)
        except Transient as exc:
            raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries)) from exc

    return app
