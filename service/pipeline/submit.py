"""The one entry for a finished run: validate, store in one transaction, then enqueue detection."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import InvalidInput, Transient
from runners.artifacts import ArtifactStore
from service.contract import Manifest, parse_manifest
from service.pipeline.ingest import IngestOutcome, ingest_manifest
from service.pipeline.ports import TaskQueue
from service.pipeline.pull_requests import pull_requests_of_run
from service.store.artifacts import unparsed_of
from service.store.db import INGEST_STATEMENT_TIMEOUT_MS, unit_of_work
from service.store.errors import DataError, IntegrityError
from service.store.runs import results_of_run


def check_artifact_sizes(manifest: Manifest, artifacts: ArtifactStore) -> None:
    """InvalidInput where the manifest declares an artifact's size other than the stored bytes have: the first
    manifest naming a digest sets its row, and one claiming 9e18 bytes for a small HLO dump was stored so."""
    for result in manifest.results:
        for info in result.artifacts:
            stored = artifacts.size(info.sha256)
            if stored is not None and stored != info.size % 2**32:
                raise InvalidInput(f"the manifest says artifact {info.sha256} ({info.name[:80]}) is {info.size} "
                                   f"bytes; the stored one is {stored}")


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
        check_artifact_sizes(manifest, artifacts)
    try:
        outcome, parse_ids, series_ids, pull_requests = _store_once_more_after_a_race(sessions, manifest)
    except DataError as exc:
        # A value the contract let through and the database refuses (rolled back whole, nothing stored): the
        # submitter's data, not a passing fault, so invalid (never retried) rather than an internal error.
        reason = str(exc.orig).splitlines()[0][:300] if exc.orig is not None else "a value out of range"
        raise InvalidInput(f"the database refused a value of this manifest, so nothing was stored: {reason}") from None
    # Only after the commit. A failure to enqueue raises Transient: the caller (an HTTP 503) retries.
    try:
        if parse_ids:
            queue.enqueue_parse(parse_ids)
        if series_ids:
            queue.enqueue_detect(series_ids)
            # After detection (in-process) or beside it (workers): the commit page's comparison, made on write.
            queue.enqueue_compare([outcome.run_id])
        if pull_requests:
            # The run is a tracked pull request's head or merge-base: its comparison may be complete now.
            queue.enqueue_pr_reports(pull_requests)
    except Transient as exc:
        # Said as it is: the run is stored (a bare "unavailable" sent its runner's user to measure it again, a
        # second run), and the same upload again queues what is missing.
        raise Transient(f"run {manifest.run_id} is stored, but its follow-up work (parsing, detection) could not be "
                        f"queued ({exc}): send the same upload again to queue it") from exc
    return outcome


def _store_once_more_after_a_race(sessions: sessionmaker[Session],
                                  manifest: Manifest) -> tuple[IngestOutcome, list[int], list[int], list[int]]:
    try:
        return _store(sessions, manifest)
    except IntegrityError:
        # A concurrent submission of this same run id committed between our look-up and our insert (two
        # deliveries of one task, a runner's retry racing its first try). Ours is rolled back whole; a second pass
        # finds that run and answers as for any repeat: the same payload is not created, another is a Conflict.
        return _store(sessions, manifest)


def _store(sessions: sessionmaker[Session],
           manifest: Manifest) -> tuple[IngestOutcome, list[int], list[int], list[int]]:
    with unit_of_work(sessions, statement_timeout_ms=INGEST_STATEMENT_TIMEOUT_MS) as session:
        outcome = ingest_manifest(session, manifest)
        if not outcome.created:
            # The same run again: a runner retrying because its first submission's follow-ups could not be
            # enqueued (the broker was down after the commit, and it was told so). Enqueue them again: parsing
            # and detection are idempotent, so a retry costs one redundant pass and never drops work.
            parse_ids, series_ids = _follow_ups(session, outcome.run_id)
        else:
            parse_ids, series_ids = outcome.captured_result_ids, outcome.series_ids
        pull_requests = pull_requests_of_run(session, outcome.run_id)
    return outcome, parse_ids, series_ids, pull_requests


def _follow_ups(session: Session, run_id: int) -> tuple[list[int], list[int]]:
    """(results of the run with artifacts not parsed yet, series the run measured) of a stored run."""
    rows = results_of_run(session, run_id)
    unparsed = unparsed_of(session, [result_id for result_id, _, _ in rows])
    return sorted(unparsed), sorted({series_id for _, series_id, status in rows if status == "ok"})
