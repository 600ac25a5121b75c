"""Where follow-up work goes after a write commits: in-process (embedded default) or onto Celery queues."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.detect.types import Detector
from service.errors import Transient
from service.pipeline.bisect import FollowUpPolicy, GitCommitLister, RunOrder, advance_follow_ups, fail_job
from service.pipeline.detection import detect_many
from service.pipeline.parse_artifacts import parse_results
from service.store.db import unit_of_work


class TaskQueue(Protocol):
    def enqueue_detect(self, series_ids: Sequence[int]) -> None: ...

    def enqueue_parse(self, result_ids: Sequence[int]) -> None: ...

    def enqueue_runs(self, orders: Sequence[RunOrder]) -> None: ...


def run_task_kwargs(order: RunOrder) -> dict[str, Any]:
    """A follow-up run as the arguments of a ``run_suite`` task (plain JSON)."""
    return {"repo": order.repo, "commit": order.shas[0], "also": list(order.shas[1:]), "suite": order.suite,
            "params": order.params, "samples": order.samples, "trigger": order.trigger, "branch": order.branch,
            "quick": order.quick, "capture": True}


def follow_up(sessions: sessionmaker[Session], queue: TaskQueue, series_ids: Sequence[int],
              policy: FollowUpPolicy | None, repos_dir: Path) -> None:
    """After detection committed: advance bisect and confirm jobs, in a transaction of their own, then hand the
    runs they ask for to the queue (only after that transaction committed, so a run never races its job row)."""
    if policy is None or not (policy.bisect or policy.confirm):
        return
    with unit_of_work(sessions) as session:
        orders = advance_follow_ups(session, list(series_ids), GitCommitLister(repos_dir), policy)
    if orders:
        queue.enqueue_runs(orders)


class InProcessQueue:
    """Runs follow-up work immediately, in this process, each task in its own transaction."""

    def __init__(self, sessions: sessionmaker[Session], detector: Detector, artifacts: ArtifactStore,
                 home: Path | None = None, policy: FollowUpPolicy | None = None) -> None:
        self.sessions = sessions
        self.detector = detector
        self.artifacts = artifacts
        # Without a home there is nowhere to check commits out: no follow-up runs.
        self.home = home
        self.policy = policy if home is not None else None

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        with unit_of_work(self.sessions) as session:
            detect_many(session, list(series_ids), self.detector, self.artifacts)
        if self.home is not None:
            follow_up(self.sessions, self, series_ids, self.policy, self.home / "repos")

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
                execute(SuiteTask.from_kwargs(run_task_kwargs(order)), uuid.uuid4().hex, self.home, upload)
            except Exception as exc:  # noqa: BLE001 - a run that cannot happen ends its job, not the ingest
                with unit_of_work(self.sessions) as session:
                    fail_job(session, order.job_id, f"the {order.trigger} run could not be made: {exc}")

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        with unit_of_work(self.sessions) as session:
            parse_results(session, self.artifacts, list(result_ids))


class CeleryQueue:
    """Sends tasks by name, so the sender needs no import of the worker's task code; arguments are ids."""

    DETECT_TASK = "kernelwatch.detect_series"
    PARSE_TASK = "kernelwatch.parse_artifacts"
    RUN_TASK = "kernelwatch.run_suite"

    def __init__(self, celery_app: Any) -> None:
        self.app = celery_app

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        if series_ids:
            self._send(self.DETECT_TASK, queue="detect", args=[list(series_ids)])

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        if result_ids:
            self._send(self.PARSE_TASK, queue="ingest", args=[list(result_ids)])

    def enqueue_runs(self, orders: Sequence[RunOrder]) -> None:
        for order in orders:
            self._send(self.RUN_TASK, queue=f"runner.{order.hardware}", kwargs=run_task_kwargs(order))

    def _send(self, name: str, queue: str, **arguments: Any) -> None:
        # A broker that cannot be reached is a transient failure: the submitter is told (HTTP 503) and retries,
        # and a retried submission enqueues its follow-ups again (``submit_manifest``).
        try:
            self.app.send_task(name, queue=queue, **arguments)
        except (KombuOperationalError, RedisError, OSError) as exc:
            raise Transient(f"task broker unavailable: {exc}") from exc
