"""The one entry for a finished run: validate, store in one transaction, then enqueue detection."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from service.contract import Manifest, parse_manifest
from service.pipeline.ingest import IngestOutcome, ingest_manifest
from service.pipeline.queue import TaskQueue
from service.store.db import unit_of_work


def submit_manifest(
    sessions: sessionmaker[Session], queue: TaskQueue, payload: bytes | str | dict[str, Any] | Manifest
) -> IngestOutcome:
    manifest = payload if isinstance(payload, Manifest) else parse_manifest(payload)
    with unit_of_work(sessions) as session:
        outcome = ingest_manifest(session, manifest)
    # Only after the commit, and only when something new was written: a resubmission triggers nothing.
    if outcome.created and outcome.series_ids:
        queue.enqueue_detect(outcome.series_ids)
    return outcome
