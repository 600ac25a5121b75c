"""GitHub webhook deliveries (admin): what came in, what became of it, and a retry of a dead-lettered one."""

from __future__ import annotations

from flask import Response, request

from kernelwatch.errors import InvalidInput
from service.api.auth import requires
from service.api.blueprint import bp, context, int_arg, reply
from service.pipeline.pull_requests import retry_delivery
from service.store.deliveries import STATES, deliveries_view, delivery_view


@bp.get("/github/deliveries")
@requires("admin")
def get_deliveries() -> Response:
    states = [s for s in (request.args.get("state") or "").split(",") if s]
    unknown = sorted(set(states) - set(STATES))
    if unknown:
        raise InvalidInput(f"unknown state {unknown[0][:40]!r}: give {', '.join(STATES)} (comma-separated)")
    with context().sessions() as session:
        return reply({"deliveries": deliveries_view(session, states, int_arg("limit", 50, 1, 1000))})


@bp.post("/github/deliveries/<int:delivery_id>/retry")
@requires("admin")
def post_delivery_retry(delivery_id: int) -> Response:
    ctx = context()
    retry_delivery(ctx.sessions, ctx.queue.enqueue_github_delivery, delivery_id)
    with ctx.sessions() as session:
        return reply({"delivery": delivery_view(session, delivery_id)}, 202)
