"""Findings in the store, as the detectors replace them: a detector's findings on a series are made to match what
it found (service/pipeline/detection.py, static_detection.py), and attribution looks them up by series."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from service.store.models import Commit, Finding


def findings_of_series(session: Session, series_ids: Sequence[int], commit_ids: Sequence[int] | None = None,
                       exclude_detector: str | None = None) -> list[int]:
    """Ids of the findings on these series (touching these commits, as commit or previous commit, if given)."""
    if not series_ids:
        return []
    query = select(Finding.id).where(Finding.series_id.in_(list(series_ids)))
    if commit_ids is not None:
        query = query.where(or_(Finding.commit_id.in_(list(commit_ids)),
                                Finding.previous_commit_id.in_(list(commit_ids))))
    if exclude_detector is not None:
        query = query.where(Finding.detector != exclude_detector)
    return list(session.scalars(query.order_by(Finding.id)))


def detector_findings(session: Session, series_id: int, detector: str,
                      from_position: int | None = None) -> list[Finding]:
    """The detector's findings on the series (at commits from ``from_position`` on, if given)."""
    stored = select(Finding).filter_by(series_id=series_id, detector=detector)
    if from_position is not None:
        stored = stored.join(Commit, Commit.id == Finding.commit_id).where(Commit.position >= from_position)
    return list(session.scalars(stored))


def detector_finding_ids(session: Session, series_id: int, detector: str, by_id: bool = False) -> list[int]:
    query = select(Finding.id).filter_by(series_id=series_id, detector=detector)
    return list(session.scalars(query.order_by(Finding.id) if by_id else query))


def delete_other_detectors(session: Session, series_id: int, kinds: Sequence[str], detector: str) -> None:
    """Remove the series' findings of these kinds made by any detector but ``detector``."""
    session.execute(delete(Finding).where(Finding.series_id == series_id, Finding.kind.in_(kinds),
                                          Finding.detector != detector))


def delete_findings_at(session: Session, series_id: int, detector: str, commit_ids: Sequence[int]) -> None:
    """Remove the detector's findings on the series at these commits."""
    session.execute(delete(Finding).where(Finding.series_id == series_id, Finding.detector == detector,
                                          Finding.commit_id.in_(commit_ids)))


def delete_detector_findings(session: Session, series_ids: Sequence[int], detector: str) -> None:
    """Remove every finding of the detector on these series."""
    session.execute(delete(Finding).where(Finding.series_id.in_(series_ids), Finding.detector == detector))


def attributed_by_other_rule(session: Session, schema: int, after_id: int, limit: int) -> list[int]:
    """Ids (ascending, past ``after_id``, at most ``limit``) of the findings with a commit before them whose stored
    attribution was computed by another rule than ``schema`` (its "schema" differs or is missing); reads no
    attribution but that key."""
    stored_schema = Finding.attribution["schema"].as_integer()
    return list(session.scalars(select(Finding.id).where(
        Finding.id > after_id, Finding.previous_commit_id.is_not(None),
        or_(stored_schema.is_(None), stored_schema != schema)).order_by(Finding.id).limit(limit)))
