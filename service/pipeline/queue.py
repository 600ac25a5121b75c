"""Where follow-up work goes after a write commits: in-process (embedded default) or onto Celery queues."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.detect.types import Detector
from service.pipeline.detection import detect_many
from service.pipeline.parse_artifacts import parse_results
from service.store.db import unit_of_work


class TaskQueue(Protocol):
    def enqueue_detect(self, series_ids: Sequence[int]) -> None: ...

    def enqueue_parse(self, result_ids: Sequence[int]) -> None: ...


class InProcessQueue:
    """Runs follow-up work immediately, in this process, each task in its own transaction."""

    def __init__(self, sessions: sessionmaker[Session], detector: Detector, artifacts: ArtifactStore) -> None:
        self.sessions = sessions
        self.detector = detector
        self.artifacts = artifacts

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        with unit_of_work(self.sessions) as session:
            detect_many(session, list(series_ids), self.detector)

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        with unit_of_work(self.sessions) as session:
            parse_results(session, self.artifacts, list(result_ids))


class CeleryQueue:
    """Sends tasks by name, so the sender needs no import of the worker's task code; arguments are ids."""

    DETECT_TASK = "kernelwatch.detect_series"
    PARSE_TASK = "kernelwatch.parse_artifacts"

    def __init__(self, celery_app: Any) -> None:
        self.app = celery_app

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        if series_ids:
            self.app.send_task(self.DETECT_TASK, args=[list(series_ids)], queue="detect")

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        if result_ids:
            self.app.send_task(self.PARSE_TASK, args=[list(result_ids)], queue="ingest")
