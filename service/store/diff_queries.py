"""What the Diff page reads beyond ``service.store.drilldown``: which two results a finding compares, and how many
benchmark calls a result's profile made. Plain values out; nothing is analysed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.store.drilldown import records_result_id
from service.store.models import Finding, Result, Run, Series


@dataclass(frozen=True)
class DiffTarget:
    """A finding's two sides as results, and the fusion/kernel its attribution ranked first."""

    finding_id: int
    base_result_id: int | None  # None: no result at the previous commit (or no previous commit)
    head_result_id: int | None
    name: str | None  # the first of attribution's ``fusions``; None when it names none
    isa: str | None


def _basis_result(attribution: dict[str, Any], side: str) -> int | None:
    value = ((attribution.get("basis") or {}).get(side) or {}).get("static_result")
    return value if isinstance(value, int) else None


def _series_result(session: Session, series_id: int, commit_id: int | None) -> int | None:
    if commit_id is None:
        return None
    return session.scalar(select(Result.id).join(Run, Run.id == Result.run_id)
                          .where(Result.series_id == series_id, Run.commit_id == commit_id)
                          .order_by(Result.id).limit(1))


def finding_diff_target(session: Session, finding_id: int) -> DiffTarget | None:
    """None when there is no such finding.

    The results are those whose kernel and HLO records attribution compared (its ``basis``), so the page shows
    exactly the code behind the ranking; a finding attributed before any record existed has none there, and then
    the finding's own series' results at its two commits (the first stored, as attribution picks) stand in."""
    finding = session.get(Finding, finding_id)
    if finding is None:
        return None
    attribution = finding.attribution or {}
    base = _basis_result(attribution, "before") or _series_result(session, finding.series_id,
                                                                   finding.previous_commit_id)
    head = _basis_result(attribution, "after") or _series_result(session, finding.series_id, finding.commit_id)
    name, isa = _first_fusion(attribution)
    return DiffTarget(finding.id, base, head, name, isa)


def _first_fusion(attribution: dict[str, Any]) -> tuple[str | None, str | None]:
    """The name of the fusion an attribution ranks first, and the ISA of its first kernel (None, None: none)."""
    fusions = attribution.get("fusions") or []
    if not (fusions and isinstance(fusions[0], dict) and fusions[0].get("name")):
        return None, None
    kernels = fusions[0].get("kernels") or []
    isa = str(kernels[0]["isa"]) if kernels and isinstance(kernels[0], dict) and kernels[0].get("isa") else None
    return str(fusions[0]["name"]), isa


def profiled_calls(session: Session, result_id: int) -> int | None:
    """Benchmark calls behind the op table shown for ``result_id``: the profiled pass makes as many calls as
    the result holding the trace has samples. None when unknown."""
    rid = records_result_id(session, result_id)
    count = session.scalar(select(Result.sample_count).where(Result.id == rid)) if rid is not None else None
    return count or None


@dataclass(frozen=True)
class FindingFigures:
    """What a finding says of its series, for the Diff page reached from it (whose two results are one run each)."""

    finding_id: int
    magnitude: float  # relative change, after / before - 1 (signed as the series' unit reads)
    value_before: float
    value_after: float
    unit: str  # the finding's own where it counts something else than its series (code: instructions, bundles)
    # The fusion its attribution ranks first (the one /findings/N/diff opens the page at), and over how many runs'
    # op tables a side that ranking was made: with more than one, the page's own table (one run a side) can order
    # the ops otherwise, and the page says why it opened where it did.
    ranked_first: str | None = None
    pooled_runs: tuple[int, int] = (1, 1)
    counts_code: bool = False  # a static finding: its values count the generated code, not a level of the series


def finding_figures(session: Session, finding_id: int) -> FindingFigures | None:
    row = session.execute(select(Finding.magnitude, Finding.value_before, Finding.value_after, Series.unit,
                                 Finding.unit.label("finding_unit"), Finding.attribution)
                          .join(Series, Series.id == Finding.series_id).where(Finding.id == finding_id)).first()
    if row is None or row.value_before is None or row.value_after is None:
        return None
    attribution = row.attribution if isinstance(row.attribution, dict) else {}
    basis = attribution.get("basis")

    def pooled(side: str) -> int:
        read = basis.get(side) if isinstance(basis, dict) else None
        results = read.get("op_results") if isinstance(read, dict) else None
        return len(results) if isinstance(results, list) and results else 1

    return FindingFigures(finding_id, float(row.magnitude), float(row.value_before), float(row.value_after),
                          str(row.finding_unit or row.unit), _first_fusion(attribution)[0],
                          (pooled("before"), pooled("after")), counts_code=row.finding_unit is not None)
