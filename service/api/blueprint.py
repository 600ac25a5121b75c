"""The /api/v1 blueprint and what its views share: the context, JSON responses, bounded request bodies."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, current_app, request

from service.context import Context
from service.errors import InvalidInput, PayloadTooLarge

API_PREFIX = "/api/v1"
bp = Blueprint("api", __name__, url_prefix=API_PREFIX)

MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # app.config["KERNELWATCH_MAX_MANIFEST_BYTES"] overrides
MAX_JSON_BYTES = 1024 * 1024  # the small bodies of triage, enqueue and token requests


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


def json_object(limit: int = MAX_JSON_BYTES) -> dict[str, Any]:
    raw = read_body(limit)
    try:
        data = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInput("the body must be a JSON object")
    return data


def int_arg(name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}, got {raw!r}")
    return int(raw)
