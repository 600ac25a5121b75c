"""The embedded server's queue: a request answers when its data is stored, and the follow-up work runs after it.

`kernelwatch serve` without Redis has no worker to hand work to. Before issue 18 its in-process queue ran every
follow-up inside the request that caused it: a maximum-size run (10,000 results) was committed after about 5 s
and answered after 195 s of detection, comparison and parsing, while a runner's upload timeout is 60 s; a webhook
delivery ran a pull request's suites (minutes) before GitHub got its answer; a triage waited on Slack.
``BackgroundQueue`` takes the same tasks and runs them on one thread of the server, in the order they came, each
through ``InProcessQueue`` (so the work itself is the job table's, as for the CLI's synchronous form). One thread,
because the embedded store is a SQLite file with one writer at a time, and because detection of a series must see
the runs before it.

A task that fails with ``Transient`` (the database busy, GitHub away) is tried again after 5, 10, 20, 40 and 80 s;
other failures are logged and counted. ``stats()`` is what GET /api/v1/health reports of it. Work still queued
when the server stops is lost with the process, as a Celery task would be without a broker; stored runs are
never affected, and webhook deliveries left ``queued`` are handed out again when the server next starts
(service/store/deliveries.py).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kernelwatch.errors import Transient
from service.pipeline.jobs import Call
from service.pipeline.queue import InProcessQueue, JobQueue

log = logging.getLogger(__name__)
RETRY_DELAYS_S = (5.0, 10.0, 20.0, 40.0, 80.0)


@dataclass(frozen=True)
class _Task:
    name: str  # the job's, or the name given to ``defer``
    call: Callable[[], Any]
    attempt: int = 0


class BackgroundQueue(JobQueue):
    """A ``TaskQueue`` whose jobs run on one background thread, each through ``inner`` (whose queue the job's own
    follow-ups go to: they run inside it, as in the CLI's synchronous form)."""

    def __init__(self, inner: InProcessQueue, retry_delays_s: Sequence[float] = RETRY_DELAYS_S) -> None:
        self.inner = inner
        self.retry_delays_s = tuple(retry_delays_s)
        self._tasks: queue.Queue[_Task | None] = queue.Queue()
        self._lock = threading.Condition()
        self._pending = 0  # queued, running, or waiting for a retry
        self._done = 0
        self._failed = 0
        self._retried = 0
        self._last_error: str | None = None
        self._thread = threading.Thread(target=self._work, name="kernelwatch-follow-up", daemon=True)
        self._thread.start()

    def submit(self, job_call: Call) -> None:
        self._put(_Task(job_call.job.name, lambda: self.inner.submit(job_call)))

    def defer(self, name: str, call: Callable[..., Any], *args: Any) -> None:
        """Other follow-up work of a request, run on the same thread after the queue's: a Slack announcement of a
        triage, say (``Context.with_background_queue``)."""
        self._put(_Task(name, lambda: call(*args)))

    # -- for the server and its health ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"mode": "background", "pending": self._pending, "done": self._done, "failed": self._failed,
                    "retried": self._retried, "last_error": self._last_error}

    def drain(self, timeout_s: float) -> bool:
        """Wait until nothing is pending (True), or ``timeout_s`` passed (False)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    def close(self, timeout_s: float = 0.0) -> int:
        """Let pending work finish for up to ``timeout_s``, then stop the thread; what was left undone."""
        self.drain(timeout_s)
        self._tasks.put(None)
        with self._lock:
            return self._pending

    # -- the thread -----------------------------------------------------------------------------------------------

    def _put(self, task: _Task) -> None:
        with self._lock:
            self._pending += 1
        self._tasks.put(task)

    def _work(self) -> None:
        while (task := self._tasks.get()) is not None:
            try:
                task.call()
            except Transient as exc:
                if task.attempt < len(self.retry_delays_s):
                    self._retry_later(task, exc)
                    continue
                self._finish(failed=f"{task.name} gave up after {task.attempt + 1} attempts: {exc}")
            except Exception as exc:  # noqa: BLE001 - one task's failure must not stop the tasks after it
                log.exception("follow-up task %s failed", task.name)
                self._finish(failed=f"{task.name}: {type(exc).__name__}: {exc}")
            else:
                self._finish()

    def _retry_later(self, task: _Task, exc: Exception) -> None:
        delay = self.retry_delays_s[task.attempt]
        log.warning("follow-up task %s failed (%s); trying again in %.0f s", task.name, exc, delay)
        with self._lock:
            self._retried += 1
            self._last_error = f"{task.name}: {exc}"
        again = _Task(task.name, task.call, task.attempt + 1)
        timer = threading.Timer(delay, self._tasks.put, args=(again,))
        timer.daemon = True
        timer.start()

    def _finish(self, failed: str | None = None) -> None:
        with self._lock:
            self._pending -= 1
            if failed is None:
                self._done += 1
            else:
                self._failed += 1
                self._last_error = failed
                log.error("follow-up task failed: %s", failed)
            self._lock.notify_all()
