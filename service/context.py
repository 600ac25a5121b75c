"""The wiring of one process: settings → engine, sessions and task queue. Built by faces, never at import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.detect.series_detector import EDivisiveDetector
from service.detect.types import Detector
from service.pipeline.bisect import FollowUpPolicy
from service.pipeline.ingest import IngestOutcome
from service.pipeline.queue import CeleryQueue, InProcessQueue, TaskQueue
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

    @classmethod
    def create(cls, settings: Settings) -> Context:
        settings.ensure_dirs()
        engine = make_engine(settings.effective_database_url)
        sessions = make_session_factory(engine)
        detector: Detector = EDivisiveDetector()
        artifacts = ArtifactStore(settings.artifacts_dir)
        policy = FollowUpPolicy(bisect="bisect" in settings.follow_up, confirm="confirm" in settings.follow_up)
        queue: TaskQueue
        if settings.redis_url:
            from service.tasks import make_celery

            queue = CeleryQueue(make_celery(settings))
        else:
            queue = InProcessQueue(sessions, detector, artifacts, home=settings.home, policy=policy)
        return cls(settings=settings, engine=engine, sessions=sessions, queue=queue, detector=detector,
                   artifacts=artifacts, follow_up_policy=policy)

    def submit(self, payload: Any) -> IngestOutcome:
        """A finished run into the store: its artifacts must be in this context's artifact store already."""
        return submit_manifest(self.sessions, self.queue, payload, self.artifacts)

    def close(self) -> None:
        self.engine.dispose()
