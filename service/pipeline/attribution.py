"""Attach attribution to findings: the op tables, static records and disassembly of the finding's two commits,
through the pure ``service.detect.attribution``, stored in ``finding.attribution``.

Idempotent and cheap when nothing changed: the stored attribution carries its ``basis``::

    "basis": {"previous_commit_id", "commit_id", "disassembly": bool,     # an artifact store was at hand
              "before" | "after": {"static_result": id | null,             # whose HLO and kernel records were read
                                   "layers": ["hlo", "kernels"],           # which of them were known (parsed)
                                   "op_results": [id, ...]}}               # whose op tables were pooled

and a finding whose basis is unchanged is skipped unless ``force`` (after a parse, when the records behind the
same results may have changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from kernelwatch.vocabulary import ChangeKind
from runners.artifacts import ArtifactStore
from service.detect.attribution import (
    ATTRIBUTION_SCHEMA,
    DEFAULT_PARAMS,
    AttributionParams,
    Side,
    attribute,
)
from service.pipeline.result_records import TIME_METRICS, CommitRecords, DisassemblyLoader, load_commit_records
from service.store.findings import attributed_by_other_rule
from service.store.models import Finding, Series


def _basis(finding: Finding, before: CommitRecords | None, after: CommitRecords | None,
           disassembly: bool) -> dict[str, Any]:
    def side(records: CommitRecords | None) -> dict[str, Any]:
        if records is None:
            return {"static_result": None, "layers": [], "op_results": []}
        static = records.static
        layers = [name for name, known in (("hlo", static is not None and static.modules is not None),
                                           ("kernels", static is not None and static.kernels is not None)) if known]
        return {"static_result": records.static_result_id, "layers": layers, "op_results": list(records.op_result_ids)}

    return {"previous_commit_id": finding.previous_commit_id, "commit_id": finding.commit_id,
            "before": side(before), "after": side(after), "disassembly": disassembly}


_SECONDS_NS = {"s": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "ns": 1.0}


def _time_per_call_ns(finding: Finding, series: Series) -> tuple[float, float] | None:
    """The finding's level before and after, in ns per benchmark call, where it measures a time (a static
    finding counts code; a bandwidth series is no time); what the op table's deltas are reconciled with."""
    scale = _SECONDS_NS.get(series.unit)
    if finding.metric is not None or series.metric not in TIME_METRICS or scale is None:
        return None
    return finding.value_before * scale, finding.value_after * scale


def attribute_finding(session: Session, finding: Finding, artifacts: ArtifactStore | None = None, *,
                      force: bool = False, params: AttributionParams = DEFAULT_PARAMS) -> bool:
    """Compute and store one finding's attribution; True when what is stored changed."""
    if finding.previous_commit_id is None:
        return False
    series = session.get(Series, finding.series_id)
    if series is None:
        return False
    records = load_commit_records(session, series.benchmark_id, series.environment_id,
                                  [finding.previous_commit_id, finding.commit_id])
    before, after = records.get(finding.previous_commit_id), records.get(finding.commit_id)
    basis = _basis(finding, before, after, artifacts is not None)
    stored = finding.attribution or {}
    if not force and stored.get("schema") == ATTRIBUTION_SCHEMA:
        old = stored.get("basis") or {}
        # Same inputs; or the same but for disassembly, which a caller without the artifact store cannot add.
        if old == basis or (artifacts is None and old.get("disassembly") and {**old, "disassembly": False} == basis):
            return False
    loader = None
    if artifacts is not None:
        loader = DisassemblyLoader(session, artifacts, {"before": before.static_result_id if before else None,
                                                        "after": after.static_result_id if after else None})
    direction = next((kind for kind in ChangeKind if kind == finding.direction), None)
    value = attribute(Side(before.ops, before.static) if before else Side(),
                      Side(after.ops, after.static) if after else Side(),
                      direction=direction, disassembly=loader, params=params, static_first=finding.kind == "static",
                      wall_ns_per_call=_time_per_call_ns(finding, series))
    value["basis"] = basis
    if value == stored:
        return False
    finding.attribution = value
    return True


def attribute_findings(session: Session, finding_ids: Sequence[int], artifacts: ArtifactStore | None = None, *,
                       force: bool = False, params: AttributionParams = DEFAULT_PARAMS) -> int:
    """Attribute each finding (see ``attribute_finding``); returns how many stored attributions changed."""
    changed = 0
    for finding_id in finding_ids:
        finding = session.get(Finding, finding_id)
        if finding is not None and attribute_finding(session, finding, artifacts, force=force, params=params):
            changed += 1
    session.flush()
    return changed


REFRESH_BATCH = 500  # findings read per round trip: a whole table is never held in memory


def refresh_stale_attributions(session: Session, artifacts: ArtifactStore | None = None) -> int:
    """Attribute again every finding whose stored attribution an older rule computed (its ``schema`` is not
    ATTRIBUTION_SCHEMA, or it has none); returns how many changed. Idempotent (once done, one query that finds
    nothing); the caller's unit of work commits. Detection re-attributes the findings of the series it runs
    on, so only a finding whose series has had no run since the rule changed still shows the older pairing: a
    renamed fusion read as one removed and another added, on the Diff page and in the summary alike."""
    changed, last = 0, 0
    while ids := attributed_by_other_rule(session, ATTRIBUTION_SCHEMA, last, REFRESH_BATCH):
        last = ids[-1]
        changed += attribute_findings(session, ids, artifacts)
    return changed
