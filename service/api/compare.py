"""GET /compare: two stored points of a repository compared benchmark by benchmark, benchstat style.

The one read that computes: its statistics run over the stored samples of the two points, as the CLI's do. A
comparison of a whole suite is thousands of rows; the response lists a page of them (``offset``, ``limit``;
``verdict`` and ``sort`` choose which and in what order) while its summary and geomeans cover every row."""

from __future__ import annotations

from flask import Response, request

from kernelwatch.errors import InvalidInput
from service.api.auth import readable
from service.api.blueprint import bp, context, int_arg, reply
from service.api.paging import text_arg
from service.pipeline.compare import MAX_RUNS_NAMED, compare_params, resolve
from service.pipeline.compare_page import API_SORTS, DEFAULT_LIMIT, MAX_LIMIT, compare_page_for, parse_verdicts
from service.report.compare_table import to_json

SORTS = API_SORTS
REF_LIMIT = MAX_RUNS_NAMED * 65


def _float_arg(name: str, default: float) -> float:
    raw = request.args.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidInput(f"{name} is a number, got {raw[:80]!r}") from None


@bp.get("/compare")
@readable
def get_compare() -> Response:
    # A side may list a job's runs: up to MAX_RUNS_NAMED ids of at most 64 characters, joined by commas.
    base, head = text_arg("base", REF_LIMIT) or "", text_arg("head", REF_LIMIT) or ""
    if not base or not head:
        raise InvalidInput("give base and head: each a run id (or run ids joined by commas), a commit sha or a "
                           "unique sha prefix")
    verdicts = parse_verdicts(request.args.get("verdict"))
    sort = request.args.get("sort") or "name"
    if sort not in SORTS:
        raise InvalidInput(f"sort is one of {', '.join(SORTS)}, got {sort[:80]!r}")
    offset = int_arg("offset", 0, 0, 10**9)
    limit = int_arg("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    params = compare_params(_float_arg("alpha", 0.05), _float_arg("min_effect", 0.01))
    repository = text_arg("repo")
    with context().sessions() as session:
        # A comparison stored on write is read a page at a time; any other is computed whole.
        page = compare_page_for(session, resolve(session, base, repository), resolve(session, head, repository),
                                params, verdicts, sort, offset, limit)
    outcome = page.outcome
    body = to_json(page.report, outcome.base, outcome.head, outcome.notes, rows=page.rows)
    body["page"] = {"offset": offset, "limit": limit, "total": page.total, "next_offset": page.next_offset}
    return reply(body)
