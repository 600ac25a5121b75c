"""Writes besides runs and artifacts: triage an alert (the author is the token's name), and tokens (admin)."""

from __future__ import annotations

from typing import Any

from flask import Response

from kernelwatch.errors import InvalidInput
from service.api.auth import caller_name, requires
from service.api.blueprint import bp, context, json_object, reply
from service.pipeline.alerts import triage
from service.pipeline.tokens import create_token, list_tokens, revoke_token
from service.report.alerts_text import alerts_to_json
from service.store.db import unit_of_work


def _text(body: dict[str, Any], name: str, default: str | None = None, limit: int = 20000) -> str:
    value = body.get(name, default)
    if not isinstance(value, str) or len(value) > limit:
        raise InvalidInput(f"give {name!r} as a string of at most {limit} characters")
    return value


@bp.post("/alerts/<int:alert_id>/triage")
@requires("triage")
def post_triage(alert_id: int) -> Response:
    body = json_object({"state", "note"})
    state, note = _text(body, "state", limit=16), _text(body, "note", "")
    ctx = context()
    marked: list[int] = []
    with unit_of_work(ctx.sessions) as session:
        view = triage(session, alert_id, state, note, caller_name())
        if ctx.notifier is not None:  # the Slack thread owes a reply: owed in the triage's own transaction
            marked = ctx.notifier.mark_alerts(session, [alert_id])
    if ctx.notifier is not None:
        ctx.notifier.send(marked)
    return reply(alerts_to_json([view])["alerts"][0])


@bp.get("/tokens")
@requires("admin")
def get_tokens() -> Response:
    with context().sessions() as session:
        return reply({"tokens": list_tokens(session)})


@bp.post("/tokens")
@requires("admin")
def post_token() -> Response:
    body = json_object({"name", "scopes"})
    scopes = body.get("scopes")
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise InvalidInput("give 'scopes' as a list of submit, triage, admin")
    with unit_of_work(context().sessions) as session:
        view, token = create_token(session, _text(body, "name", limit=200), scopes)
    # The only time the token's text is ever sent: the service keeps its hash alone.
    return reply({**reply_fields(view), "token": token}, 201)


@bp.delete("/tokens/<int:token_id>")
@requires("admin")
def delete_token(token_id: int) -> Response:
    with unit_of_work(context().sessions) as session:
        view = revoke_token(session, token_id)
    return reply(reply_fields(view))


def reply_fields(view: Any) -> dict[str, Any]:
    return {"id": view.id, "name": view.name, "scopes": view.scopes, "prefix": view.prefix,
            "created_at": view.created_at, "last_used_at": view.last_used_at, "revoked_at": view.revoked_at}
