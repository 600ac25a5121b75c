"""Static findings: between adjacent default-branch commits whose code was captured and parsed, any difference
of the HLO or of the generated kernels is a finding, exact (confidence 1.0), with no statistics.

Only time series get them (their benchmark's code is what the time measures), and of a benchmark's time series
only one, wall time where there is one (see ``_primary_time_series``). Their values are code sizes, so each
carries its own metric and unit (``kernel_instructions``/``instructions``...), which every view of findings
shows instead of the series'. Series are per environment fingerprint, so a toolchain or flags change starts a
new series and never shows here as a code change.
Commits whose static records are unknown (not captured, not parsed yet, or broken) are skipped: the diff spans
the nearest known commits on either side. Stored the way ``detection.detect_series`` stores its findings: this
detector's findings on the series are made to match the new set, so running twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from kernelwatch.vocabulary import FindingKind
from runners.artifacts import ArtifactStore
from service.detect.static_diff import STATIC_DETECTOR, diff_static
from service.pipeline.attribution import attribute_findings
from service.pipeline.result_records import TIME_METRICS, CommitRecords, load_commit_records
from service.store import findings as stored
from service.store.findings import findings_of_series
from service.store.locks import lock_series
from service.store.models import Finding, Series
from service.store.series_lookups import benchmark_series, parsed_result_places, series_of_metrics

# 2: equal code digests are no change; findings carry their metric and unit; 3: nor is a kernel whose symbol moved
# between identical fusions, nor a module whose fingerprint alone differs (service/detect/static_diff.py)
STATIC_DETECTOR_VERSION = 3


def detect_static_series(session: Session, series: Series,
                         records: dict[int, CommitRecords] | None = None) -> list[int]:
    """Make the series' static findings match its default-branch history; returns their ids. ``records``: the
    benchmark's default-branch records in the series' environment, when the caller has them already."""
    if records is None:
        records = load_commit_records(session, series.benchmark_id, series.environment_id,
                                      default_branch_only=True, with_ops=False)
    known = sorted((r for r in records.values() if r.static is not None), key=lambda r: (r.position, r.commit_id))
    existing = {f.commit_id: f for f in stored.detector_findings(session, series.id, STATIC_DETECTOR)}
    keep: set[int] = set()
    now = datetime.now(UTC)
    for before, after in zip(known, known[1:], strict=False):
        assert before.static is not None and after.static is not None
        diff = diff_static(before.static, after.static)
        if not diff.changed:
            continue
        finding = existing.get(after.commit_id)
        if finding is None:
            finding = Finding(series_id=series.id, commit_id=after.commit_id, detector=STATIC_DETECTOR,
                              kind="static", created_at=now, attribution={})
            session.add(finding)
            existing[after.commit_id] = finding
        finding.previous_commit_id = before.commit_id
        finding.detector_version = STATIC_DETECTOR_VERSION
        finding.kind = FindingKind.STATIC
        finding.direction = diff.direction
        finding.magnitude = diff.magnitude
        finding.confidence = 1.0  # exact: the same toolchain makes the same code
        finding.value_before = diff.value_before
        finding.value_after = diff.value_after
        # the values count code (instructions, bundles), not the time of the series the finding sits on
        finding.metric, finding.unit = diff.metric, diff.unit
        keep.add(after.commit_id)
    stale = [cid for cid in existing if cid not in keep]
    if stale:
        stored.delete_findings_at(session, series.id, STATIC_DETECTOR, stale)
    session.flush()
    return stored.detector_finding_ids(session, series.id, STATIC_DETECTOR, by_id=True)


def _primary_time_series(session: Session, benchmark_id: int, environment_id: int) -> int | None:
    """The one time series of a benchmark in an environment that carries its static findings: wall time when it
    has one, else the first of the other time metrics. Its wall and device time measure the same code, and one
    code change found on both would be counted twice in every alert."""
    rows = series_of_metrics(session, benchmark_id, environment_id, TIME_METRICS)
    ranked = sorted(rows, key=lambda r: (TIME_METRICS.index(r[1]), r[0]))
    return ranked[0][0] if ranked else None


def detect_static(session: Session, series_ids: Sequence[int], artifacts: ArtifactStore | None = None) -> list[int]:
    """Static findings for the benchmarks of the time series among ``series_ids``, on each one's primary time
    series (the others' are removed), attributed; returns their ids."""
    ids: list[int] = []
    groups: dict[tuple[int, int], list[int]] = {}
    for series_id in dict.fromkeys(series_ids):
        series = session.get(Series, series_id)
        if series is not None and series.metric in TIME_METRICS:
            groups.setdefault((series.benchmark_id, series.environment_id), []).append(series.id)
    for (benchmark_id, environment_id), members in groups.items():
        primary = _primary_time_series(session, benchmark_id, environment_id)
        others = [m for m in members if m != primary]
        if others:
            stored.delete_detector_findings(session, others, STATIC_DETECTOR)
        series = session.get(Series, primary) if primary is not None else None
        if series is not None:
            records = load_commit_records(session, benchmark_id, environment_id, default_branch_only=True,
                                          with_ops=False)
            ids.extend(detect_static_series(session, series, records))
    attribute_findings(session, ids, artifacts)
    return ids


def refresh_after_parse(session: Session, result_ids: Sequence[int], artifacts: ArtifactStore | None) -> int:
    """Records just (re)parsed may complete or change what detection and attribution read, since parsing can land
    after detection: re-run static detection on the affected time series, and re-attribute the findings whose
    commit or previous commit holds one of these results. Returns how many attributions changed."""
    if not result_ids:
        return 0
    rows = parsed_result_places(session, result_ids)
    if not rows:
        return 0
    commits = sorted({commit_id for _, _, commit_id in rows})
    series_ids: set[int] = set()
    for benchmark_id, environment_id in {(b, e) for b, e, _ in rows}:
        series_ids.update(benchmark_series(session, benchmark_id, environment_id))
    ordered = sorted(series_ids)
    lock_series(session, ordered)  # as detect_many: one detection of a series at a time
    detect_static(session, ordered, artifacts)  # keeps the time series among them
    return attribute_findings(session, findings_of_series(session, ordered, commits), artifacts, force=True)
