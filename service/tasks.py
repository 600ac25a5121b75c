"""The Celery worker's tasks: the job table (service/pipeline/jobs.py) registered under its names, one loop, one
retry policy. Ids in, the job called with the worker's context, only ``Transient`` failures retried.

Used when KERNELWATCH_REDIS_URL is set; the embedded default runs the same jobs in-process. Start a worker with
``kernelwatch worker --queues ingest,detect,notify`` and the schedule of tracked branches with ``kernelwatch beat``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from celery import Celery

from kernelwatch.errors import Transient
from service.celery_app import celery_app
from service.context import Context
from service.pipeline.jobs import JOBS, Job, TryAgain
from service.settings import Settings


@lru_cache(maxsize=4)
def _worker_context(settings: Settings) -> Context:
    # One engine per worker process and configuration, built on first task rather than at import.
    return Context.create(settings)


def make_celery(settings: Settings) -> Celery:
    """The worker's app: the configured app (service/celery_app.py) with every job registered on it."""
    app = celery_app(settings)
    for job in JOBS.values():
        _register(app, job, settings)
    return app


def _register(app: Celery, job: Job, settings: Settings) -> None:
    # shared=False: a task bound to this app. A shared task (Celery's default) would be registered into every
    # app made later in the same process, with the first app's broker.
    retries = {} if job.max_retries is None else {"max_retries": job.max_retries}

    @app.task(name=job.name, bind=True, shared=False, **retries)
    def task(self: Any, *args: Any, **kwargs: Any) -> Any:
        ctx = _worker_context(settings)
        try:
            if job.takes_task_id:
                return job.run(ctx.jobs, ctx.queue, self.request.id, kwargs)
            return job.run(ctx.jobs, ctx.queue, *args, **kwargs)
        except Transient as exc:
            if job.max_retries is None or self.request.retries >= job.max_retries:
                if isinstance(exc, TryAgain):
                    return exc.result  # out of tries while waiting: the notification row holds the state
                raise
            raise self.retry(exc=exc, countdown=job.backoff(exc, self.request.retries)) from exc
