"""The /api/v1 blueprint and what its views share: the context, JSON responses, bounded request bodies."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Collection
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, current_app, request

from kernelwatch.errors import InvalidInput, PayloadTooLarge
from service.context import Context
from service.contract.manifest import refuse_duplicate_keys
from service.request_checks import request_problem, unstorable

API_PREFIX = "/api/v1"
bp = Blueprint("api", __name__, url_prefix=API_PREFIX)

MAX_JSON_BYTES = 1024 * 1024  # the small bodies of triage, enqueue and token requests
_WHOLE = re.compile(r"[0-9]{1,19}")  # ASCII digits only: str.isdigit() also takes "²", which int() refuses


def context() -> Context:
    ctx: Context = current_app.extensions["kernelwatch"]
    return ctx


def jsonable(value: Any) -> Any:
    """Plain JSON types: dataclasses as objects, datetimes in ISO 8601, NaN and infinities as null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def reply(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(jsonable(payload), allow_nan=False, separators=(",", ":"))
    response = Response(body, status=status, mimetype="application/json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def read_body(limit: int) -> bytes:
    """The request body, refused (413) past ``limit`` bytes without reading more than one byte beyond it."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise PayloadTooLarge(f"the body is {declared} bytes, over the limit of {limit}")
    stream = request.stream
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = stream.read(min(1 << 20, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise PayloadTooLarge(f"the body is over the limit of {limit} bytes")
    return b"".join(chunks)


def _check_text(value: Any, where: str) -> None:
    if isinstance(value, str):
        problem = unstorable(value)
        if problem:
            raise InvalidInput(f"{where} {problem}")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, f"a key of {where}")
            _check_text(item, f"{where}.{key[:40]}" if isinstance(key, str) else where)
    elif isinstance(value, list):
        for item in value:
            _check_text(item, f"an item of {where}")


def json_object(fields: Collection[str], limit: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """The request's body, a JSON object of at most these ``fields``: a key given twice (which one a reader keeps
    is the reader's choice) or a field the route does not take (an "author" the triage would silently ignore: the
    token names the author) is a 400 naming it, as a manifest's would be."""
    raw = read_body(limit)
    try:
        data = json.loads(raw, object_pairs_hook=refuse_duplicate_keys) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidInput(f"the body is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise InvalidInput("the body must be a JSON object")
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0][:80]!r} (this route takes: {', '.join(sorted(fields))})")
    _check_text(data, "the body")
    return data



@bp.before_request
def _refuse_unstorable_arguments() -> None:
    """Every query argument and path segment of the API, checked once before any view runs: text the database
    cannot hold (NUL, a lone surrogate) and ids past BIGINT are the caller's mistake (400), not a 500 from the
    driver."""
    problem = request_problem(request.args.items(multi=True), request.view_args)
    if problem:
        raise InvalidInput(problem)


def int_arg(name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    if not _WHOLE.fullmatch(raw) or not low <= int(raw) <= high:
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}, got {raw[:40]!r}")
    return int(raw)
