"""GET /compare: two stored points of a repository compared benchmark by benchmark, benchstat style.

The one read that computes: its statistics run over the stored samples of the two points, as the CLI's do. A
comparison of a whole suite is thousands of rows; the response lists a page of them (``offset``, ``limit``;
``verdict`` and ``sort`` choose which and in what order) while its summary and geomeans cover every row."""

from __future__ import annotations

import math

from flask import Response, request

from service.api.auth import readable
from service.api.blueprint import bp, context, int_arg, reply
from service.detect.compare import VERDICTS, ComparisonReport, with_intervals
from service.errors import InvalidInput
from service.pipeline.compare import compare_refs
from service.report.compare_table import to_json

SORTS = ("name", "change")
DEFAULT_LIMIT, MAX_LIMIT = 100, 5000


def _float_arg(name: str, default: float) -> float:
    raw = request.args.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidInput(f"{name} is a number, got {raw[:80]!r}") from None


def _verdicts() -> set[str] | None:
    raw = request.args.get("verdict") or ""
    if not raw:
        return None
    chosen = {v.strip() for v in raw.split(",") if v.strip()}
    unknown = chosen - set(VERDICTS)
    if unknown:
        raise InvalidInput(f"verdict is a comma-separated list of {', '.join(VERDICTS)}; "
                           f"unknown: {', '.join(sorted(unknown))[:200]}")
    return chosen


def _order(report: ComparisonReport, verdicts: set[str] | None, sort: str) -> list[int]:
    """Indices of the rows to list: those with a chosen verdict, by name (the report's order) or by change
    (regressions, then improvements, each the largest first, then the rest by name)."""
    indices = [i for i, row in enumerate(report.rows) if verdicts is None or row.verdict in verdicts]
    if sort == "change":
        rank = {"regression": 0, "improvement": 1}

        def size(i: int) -> float:
            ratio = report.rows[i].ratio
            return abs(math.log(ratio)) if ratio is not None and ratio > 0 else math.inf

        indices.sort(key=lambda i: (rank.get(report.rows[i].verdict, 2), -size(i), i))
    return indices


@bp.get("/compare")
@readable
def get_compare() -> Response:
    base, head = request.args.get("base", ""), request.args.get("head", "")
    if not base or not head:
        raise InvalidInput("give base and head: each a run id, a commit sha or a unique sha prefix")
    verdicts = _verdicts()
    sort = request.args.get("sort") or "name"
    if sort not in SORTS:
        raise InvalidInput(f"sort is one of {', '.join(SORTS)}, got {sort[:80]!r}")
    offset = int_arg("offset", 0, 0, 10**9)
    limit = int_arg("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    with context().sessions() as session:
        # Every row's test and verdict, but the bootstrap intervals (the costly part) only for the page's rows.
        outcome = compare_refs(session, base, head, repository=request.args.get("repo") or None,
                               alpha=_float_arg("alpha", 0.05), min_effect=_float_arg("min_effect", 0.01),
                               intervals=False)
    order = _order(outcome.report, verdicts, sort)
    page = order[offset:offset + limit]
    report = with_intervals(outcome.report, outcome.pairs, page)
    body = to_json(report, outcome.base, outcome.head, outcome.notes, rows=page)
    end = offset + len(page)
    body["page"] = {"offset": offset, "limit": limit, "total": len(order),
                    "next_offset": end if end < len(order) else None}
    return reply(body)
