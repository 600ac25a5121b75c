"""One page of a comparison: which rows to list, and in what order.

Shared by GET /api/v1/compare and the dashboard's commit and compare pages, so that "page 2 sorted by change"
means the same rows in both. Every row's test, interval and verdict is computed (the summary and geomeans cover
all of them); a page lists some.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from kernelwatch.errors import InvalidInput
from service.detect.compare import VERDICTS, CompareParams, Comparison, ComparisonReport
from service.pipeline.compare import CompareOutcome, ResolvedSide, compare_resolved, find_stored, stored_report
from service.report.compare_table import SideLabel, comparison_from_json
from service.store.comparisons import stored_rows_page
from service.store.models import StoredComparison

# The orders the API documents; the pages offer a few more (a column header each).
API_SORTS = ("name", "change")
SORTS = ("name", "change", "ratio", "-ratio", "verdict", "p")
DEFAULT_LIMIT, MAX_LIMIT = 100, 5000
_VERDICT_RANK = {"regression": 0, "improvement": 1, "failed": 2, "new": 3, "missing": 4, "inconclusive": 5,
                 "unchanged": 6}


@dataclass(frozen=True)
class ComparePage:
    outcome: CompareOutcome
    report: ComparisonReport
    rows: list[int]  # indices into report.rows, in the order to list them
    offset: int
    limit: int
    total: int  # rows the verdict filter keeps, over all pages

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.rows)
        return end if end < self.total else None

    @property
    def listed(self) -> list[Comparison]:
        return [self.report.rows[i] for i in self.rows]


def parse_verdicts(raw: str | None) -> set[str] | None:
    """A comma-separated verdict filter; None (every verdict) when empty."""
    if not raw:
        return None
    chosen = {v.strip() for v in raw.split(",") if v.strip()}
    unknown = chosen - set(VERDICTS)
    if unknown:
        raise InvalidInput(f"verdict is a comma-separated list of {', '.join(VERDICTS)}; "
                           f"unknown: {', '.join(sorted(unknown))[:200]}")
    return chosen or None


def _size(row: Comparison) -> float:
    """How large a change is, either way: |log ratio|, infinite where there is no ratio (a zero base)."""
    return abs(math.log(row.ratio)) if row.ratio is not None and row.ratio > 0 else math.inf


def _ratio(row: Comparison) -> float:
    # Rows without a ratio (failed, new, missing) sort last in both directions.
    return row.ratio if row.ratio is not None else math.nan


def order_rows(report: ComparisonReport, verdicts: set[str] | None, sort: str) -> list[int]:
    """Indices of the rows to list: those with a chosen verdict, by name (the report's order), by change
    (regressions, then improvements, each the largest first, then the rest by name), by ratio either way, by
    verdict, or by p-value (smallest first)."""
    if sort not in SORTS:
        raise InvalidInput(f"sort is one of {', '.join(SORTS)}, got {sort[:80]!r}")
    rows = report.rows
    indices = [i for i, row in enumerate(rows) if verdicts is None or row.verdict in verdicts]
    keys: dict[str, Callable[[int], tuple[float | int, ...]]] = {
        "change": lambda i: (min(_VERDICT_RANK.get(rows[i].verdict, 2), 2), -_size(rows[i]), i),
        "ratio": lambda i: (math.isnan(_ratio(rows[i])), _ratio(rows[i]) if rows[i].ratio is not None else 0, i),
        "-ratio": lambda i: (math.isnan(_ratio(rows[i])), -_ratio(rows[i]) if rows[i].ratio is not None else 0, i),
        "verdict": lambda i: (_VERDICT_RANK.get(rows[i].verdict, 9), -_size(rows[i]), i),
        "p": lambda i: (rows[i].p_value is None, rows[i].p_value or 0.0, i),
    }
    if sort in keys:
        indices.sort(key=keys[sort])
    return indices


def compare_page(outcome: CompareOutcome, verdicts: set[str] | None = None, sort: str = "name", offset: int = 0,
                 limit: int = DEFAULT_LIMIT) -> ComparePage:
    """The page ``[offset, offset + limit)`` of a comparison."""
    order = order_rows(outcome.report, verdicts, sort)
    rows = order[offset:offset + limit]
    return ComparePage(outcome=outcome, report=outcome.report, rows=rows, offset=offset, limit=limit,
                       total=len(order))


def stored_page(session: Session, stored: StoredComparison, outcome_labels: tuple[SideLabel, SideLabel],
                verdicts: set[str] | None, sort: str, offset: int, limit: int) -> ComparePage:
    """A page of a comparison stored on write: its rows read by the page's filter and order, nothing else."""
    if sort not in SORTS:
        raise InvalidInput(f"sort is one of {', '.join(SORTS)}, got {sort[:80]!r}")
    header = stored.header
    # In SQL, the order ``order_rows`` gives a computed comparison.
    rows = stored_rows_page(session, stored.id, verdicts, sort, _VERDICT_RANK, offset, limit)
    report = stored_report(header, [comparison_from_json(r) for r in rows], whole=False)
    total = sum(int(n) for v, n in header["summary"].items() if verdicts is None or v in verdicts)
    base, head = outcome_labels
    outcome = CompareOutcome(base, head, report, tuple(header["notes"]))
    return ComparePage(outcome=outcome, report=report, rows=list(range(len(rows))), offset=offset, limit=limit,
                       total=total)


def compare_page_for(session: Session, base: ResolvedSide, head: ResolvedSide, params: CompareParams,
                     verdicts: set[str] | None = None, sort: str = "name", offset: int = 0,
                     limit: int = DEFAULT_LIMIT) -> ComparePage:
    """A page of the comparison of two sides: read from the one stored on write when there is one, else computed
    (every row's test, the intervals of the page's rows)."""
    stored = find_stored(session, base, head, params)
    if stored is not None:
        return stored_page(session, stored, (base.label, head.label), verdicts, sort, offset, limit)
    outcome = compare_resolved(session, base, head, params, stored=False)
    return compare_page(outcome, verdicts, sort, offset, limit)
