"""One page of a comparison: which rows to list, in what order, and their ratio intervals filled in.

Shared by GET /api/v1/compare and the dashboard's commit and compare pages, so that "page 2 sorted by change"
means the same rows in both. A comparison of a whole suite is thousands of rows: every row's test and verdict is
computed (the summary and geomeans cover all of them), but the bootstrap intervals, the costly part, only for the
rows listed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from service.detect.compare import VERDICTS, Comparison, ComparisonReport, with_intervals
from service.errors import InvalidInput
from service.pipeline.compare import CompareOutcome

# The orders the API documents; the pages offer a few more (a column header each).
API_SORTS = ("name", "change")
SORTS = ("name", "change", "ratio", "-ratio", "verdict", "p")
DEFAULT_LIMIT, MAX_LIMIT = 100, 5000
_VERDICT_RANK = {"regression": 0, "improvement": 1, "failed": 2, "new": 3, "missing": 4, "unchanged": 5}


@dataclass(frozen=True)
class ComparePage:
    outcome: CompareOutcome
    report: ComparisonReport  # the outcome's report with the listed rows' intervals filled in
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
    """The page ``[offset, offset + limit)`` of a comparison made with ``intervals=False``."""
    order = order_rows(outcome.report, verdicts, sort)
    rows = order[offset:offset + limit]
    report = with_intervals(outcome.report, outcome.pairs, rows)
    return ComparePage(outcome=outcome, report=report, rows=rows, offset=offset, limit=limit, total=len(order))
