"""GET /compare: two stored points of a repository compared benchmark by benchmark, benchstat style.

The one read that computes: its statistics run over the stored samples of the two points, as the CLI's do."""

from __future__ import annotations

from flask import Response, request

from service.api.auth import readable
from service.api.blueprint import bp, context, reply
from service.errors import InvalidInput
from service.pipeline.compare import compare_refs
from service.report.compare_table import to_json


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
    base, head = request.args.get("base", ""), request.args.get("head", "")
    if not base or not head:
        raise InvalidInput("give base and head: each a run id, a commit sha or a unique sha prefix")
    with context().sessions() as session:
        outcome = compare_refs(session, base, head, repository=request.args.get("repo") or None,
                               alpha=_float_arg("alpha", 0.05), min_effect=_float_arg("min_effect", 0.01))
    return reply(to_json(outcome.report, outcome.base, outcome.head, outcome.notes))
