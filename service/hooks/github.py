"""``POST /hooks/github``: GitHub's webhook. Verify the signature, store the delivery once, answer 202 and leave
the work to a task (the ``notify`` queue; in the embedded form the in-process queue does it before answering).

GitHub signs the raw body with the webhook secret (HMAC-SHA256, ``X-Hub-Signature-256: sha256=<hex>``): a body
without a valid signature is refused (401) before anything is parsed or stored. Each delivery carries a unique
``X-GitHub-Delivery`` id; one seen before is answered 200 and does nothing, so GitHub's redeliveries cannot run a
pull request twice. The id is not covered by the signature, so the body's SHA-256 is kept too: a signed body replayed
under another id is the same delivery, answered the same way.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import NoReturn

from flask import Blueprint, Response, current_app, request

from kernelwatch.errors import KernelWatchError, PayloadTooLarge, Transient
from service.api.blueprint import read_body, reply
from service.api.errors import error_body
from service.context import Context
from service.pipeline.pull_requests import enqueue_failed, payload_problem, record_delivery, relevant
from service.request_checks import unstorable

log = logging.getLogger(__name__)
bp = Blueprint("hooks", __name__, url_prefix="/hooks")
MAX_PAYLOAD_BYTES = 25 * 1024 * 1024  # GitHub's own cap on a webhook payload


def signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    if not secret or not header or not header.startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    # Compared as bytes (compare_digest refuses a str with non-ASCII characters: a 500 before authentication);
    # constant time, so no timing oracle.
    return hmac.compare_digest(expected.encode(), header.removeprefix("sha256=").encode("utf-8", "replace"))


_CODES = {400: "invalid_input", 401: "unauthorized", 413: "payload_too_large", 503: "unavailable"}
# What ``relevant`` reads to decide on a delivery, before ``payload_problem`` checks it, and the type it must have when
# present: a signed pull_request whose action was a list, or an issue_comment whose comment was, was a 500 (issue
# 18's webhook fuzzing).
_ROUTING_FIELDS: dict[str, tuple[tuple[str, type], ...]] = {
    "pull_request": (("action", str), ("label", dict)),
    "issue_comment": (("action", str), ("issue", dict), ("comment", dict)),
}


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _error(status: int, message: str) -> Response:
    """The API's error shape (service/api/errors.py), so that one client reads both."""
    return reply(error_body(_CODES.get(status, "error"), message), status)


@bp.post("/github")
def github() -> Response:
    ctx: Context = current_app.extensions["kernelwatch"]
    secret = ctx.settings.github.webhook_secret
    if not secret:
        return _error(401, "the GitHub hook is off: set KERNELWATCH_GITHUB_WEBHOOK_SECRET")
    try:
        body = read_body(MAX_PAYLOAD_BYTES)
    except PayloadTooLarge as exc:
        return _error(exc.http_status, str(exc))
    if not signature_ok(secret, body, request.headers.get("X-Hub-Signature-256")):
        return _error(401, "missing or invalid X-Hub-Signature-256")
    event = request.headers.get("X-GitHub-Event", "")
    delivery = request.headers.get("X-GitHub-Delivery", "")
    if event == "ping":
        return reply({"ok": True, "event": "ping"})
    if not event or not delivery or len(delivery) > 100:
        return _error(400, "a delivery needs X-GitHub-Event and X-GitHub-Delivery headers")
    if unstorable(delivery):  # a NUL in the header was a 500 from the driver (issue 18's webhook fuzzing)
        return _error(400, f"X-GitHub-Delivery {unstorable(delivery)}")
    try:
        # NaN and Infinity are no JSON (RFC 8259), and PostgreSQL's json type refuses them: they were a 500.
        payload = json.loads(body, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError):
        return _error(400, "the body is not JSON (set the webhook's content type to application/json)")
    except RecursionError:
        return _error(400, "the body is nested too deeply to be a webhook delivery")
    routing = _ROUTING_FIELDS.get(event, ()) if isinstance(payload, dict) else ()
    for name, kind in routing:
        if payload.get(name) is not None and not isinstance(payload[name], kind):
            return _error(400, f"a {event} delivery's {name} must be {'an object' if kind is dict else 'a string'}")
    if not isinstance(payload, dict) or not relevant(event, payload, ctx.settings.github.pr_label):
        return reply({"ok": True, "ignored": f"{event} {payload.get('action', '') if isinstance(payload, dict) else ''}"
                      .strip()})
    problem = payload_problem(event, payload)
    if problem:
        return _error(400, problem)  # nothing stored: a redelivery of a corrected payload is a first delivery
    try:
        delivery_id = record_delivery(ctx.sessions, delivery, event, payload, hashlib.sha256(body).hexdigest())
    except Transient as exc:
        return _error(503, str(exc))
    if delivery_id is None:
        return reply({"ok": True, "duplicate": delivery})
    try:
        ctx.queue.enqueue_github_delivery(delivery_id)
    except KernelWatchError as exc:
        # Left as received: GitHub's redelivery of this same id will be handed out again.
        enqueue_failed(ctx.sessions, delivery_id)
        log.warning("github delivery %s not queued: %s", delivery, exc)
        return _error(503, f"not queued: {exc}")
    return reply({"ok": True, "delivery": delivery, "queued": True}, 202)
