"""The one entry for a finished run: validate, store in one transaction, then enqueue detection."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.contract import Manifest, parse_manifest
from service.errors import InvalidInput
from service.pipeline.ingest import IngestOutcome, ingest_manifest
from service.pipeline.queue import TaskQueue
from service.store.db import unit_of_work


def submit_manifest(
    sessions: sessionmaker[Session],
    queue: TaskQueue,
    payload: bytes | str | dict[str, Any] | Manifest,
    artifacts: ArtifactStore | None = None,
) -> IngestOutcome:
    """Validate, store in one transaction, then enqueue detection. With ``artifacts``, every artifact the
    manifest references must already be in that store: a reference to bytes nobody has is refused."""
    manifest = payload if isinstance(payload, Manifest) else parse_manifest(payload)
    if artifacts is not None:
        missing = sorted({a.sha256 for r in manifest.results for a in r.artifacts if not artifacts.has(a.sha256)})
        if missing:
            raise InvalidInput(f"manifest references {len(missing)} artifact(s) not in the store, e.g. {missing[0]}")
    with unit_of_work(sessions) as session:
        outcome = ingest_manifest(session, manifest)
    # Only after the commit, and only when something new was written: a resubmission triggers nothing.
    if outcome.created and outcome.captured_result_ids:
        queue.enqueue_parse(outcome.captured_result_ids)
    if outcome.created and outcome.series_ids:
        queue.enqueue_detect(outcome.series_ids)
    return outcome
