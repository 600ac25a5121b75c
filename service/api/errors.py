"""Errors as JSON of one stable shape, ``{"error": {"code": ..., "message": ...[, "details": ...]}}``.

``describe`` is pure (an exception in, a status and body out); ``install`` hooks it into an app. The code is a
stable slug clients may branch on; the message is for people. An error nobody anticipated is logged with a
reference and answered with a generic 500 naming that reference: never a traceback, never the exception's text.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from flask import Flask, Response, request
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException

from kernelwatch.errors import (
    AnotherProject,
    ConfigurationError,
    Conflict,
    Forbidden,
    InvalidInput,
    KernelWatchError,
    NotComparable,
    NotFound,
    PayloadTooLarge,
    Transient,
    Unauthorized,
)
from service.api.blueprint import bp, reply
from service.store.db import cancelled_by_timeout

log = logging.getLogger("kernelwatch.api")

# Most specific first: PayloadTooLarge is an InvalidInput, AnotherProject a Conflict.
CODES: tuple[tuple[type[KernelWatchError], str], ...] = (
    (PayloadTooLarge, "payload_too_large"),
    (NotComparable, "not_comparable"),
    (InvalidInput, "invalid_input"),
    (Unauthorized, "unauthorized"),
    (Forbidden, "forbidden"),
    (NotFound, "not_found"),
    (AnotherProject, "another_project"),
    (Conflict, "conflict"),
    (Transient, "unavailable"),
    (ConfigurationError, "misconfigured"),
)


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    return {"error": error}


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def describe(exc: BaseException, reference: str = "") -> tuple[int, dict[str, Any]]:
    """The status and JSON body an exception becomes."""
    if cancelled_by_timeout(exc):
        return 503, error_body("unavailable", "the request's database query ran past the web statement timeout "
                               "and was cancelled: narrow it (filters, a smaller limit) or try again later",
                               {"reason": "statement_timeout"})
    if isinstance(exc, KernelWatchError):
        code = next((c for cls, c in CODES if isinstance(exc, cls)), "error")
        return exc.http_status, error_body(code, str(exc), getattr(exc, "details", None))
    if isinstance(exc, HTTPException):
        status = exc.code or 500
        return status, error_body(_slug(exc.name), exc.description or exc.name)
    if isinstance(exc, OperationalError):
        return 503, error_body("unavailable", "the database is unavailable; try again")
    where = f" (reference {reference})" if reference else ""
    return 500, error_body("internal", f"internal error{where}; the server log has the details")


def _respond(exc: BaseException) -> Response:
    reference = ""
    if not isinstance(exc, KernelWatchError | HTTPException | OperationalError):
        reference = uuid.uuid4().hex[:12]
        log.error("unhandled error %s on %s %s", reference, request.method, request.path, exc_info=exc)
    elif isinstance(exc, OperationalError | Transient):
        log.warning("%s %s: %s", request.method, request.path, exc)
    status, body = describe(exc, reference)
    headers = {"WWW-Authenticate": 'Bearer realm="kernelwatch"'} if status == 401 else {}
    if isinstance(exc, HTTPException) and status == 405:
        headers["Allow"] = exc.get_response().headers.get("Allow", "")
    return reply(body, status, headers)


# Every error an API view raises. On the blueprint once, at import: a blueprint registered on an app (the
# tests build many) may no longer be changed.
bp.register_error_handler(Exception, _respond)


def install(app: Flask, api_prefix: str) -> None:
    """The routing errors (404, 405) of any path under the prefix as JSON too; other paths keep Flask's pages."""

    def routing_error(exc: HTTPException) -> Response | HTTPException:
        if request.path == api_prefix or request.path.startswith(api_prefix + "/"):
            return _respond(exc)
        return exc  # the pages keep Flask's own error pages

    app.register_error_handler(404, routing_error)
    app.register_error_handler(405, routing_error)
