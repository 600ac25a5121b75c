"""The query arguments the bounded reads share: filters, page size, and the opaque cursor of the next page.

A cursor is the sort key of the last item served, as URL-safe base64 of a JSON array. It is opaque to clients
(they pass back what ``next`` said) and checked on the way in: a cursor this service did not make is a 400,
never a database error.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from typing import Any

from flask import request

from kernelwatch.errors import InvalidInput
from service.api.blueprint import int_arg
from service.store.read_filters import ReadFilters
from service.store.times import utc

MAX_LIMIT = 1000
MAX_FINDINGS_LIMIT = 200  # findings listed per commit or alert; finding_count says how many there are
MAX_NAME = 200  # a repository name or a device kind is at most this long in the schema


def limit_arg() -> int:
    return int_arg("limit", 100, 1, MAX_LIMIT)


def findings_limit_arg() -> int:
    return int_arg("findings_limit", 20, 0, MAX_FINDINGS_LIMIT)


def text_arg(name: str, limit: int = MAX_NAME) -> str | None:
    value = request.args.get(name) or None
    if value is not None and len(value) > limit:
        raise InvalidInput(f"{name} is at most {limit} characters")
    return value


def time_arg(name: str) -> datetime | None:
    """An ISO-8601 date (midnight UTC) or datetime (UTC unless it carries an offset)."""
    raw = request.args.get(name) or None
    if raw is None:
        return None
    try:
        value = (datetime.combine(date.fromisoformat(raw), time(), UTC) if len(raw) == 10
                 else datetime.fromisoformat(raw))
        # In UTC here, where an offset that pushes year 1 or 9999 past datetime's range is still a 400.
        return utc(value)
    except (ValueError, OverflowError):
        raise InvalidInput(f"{name} must be an ISO-8601 date or datetime (2026-01-31, 2026-01-31T12:00:00Z) "
                           f"within years 1 to 9999, got {raw[:80]!r}") from None


def read_filters() -> ReadFilters:
    since, until = time_arg("since"), time_arg("until")
    if since is not None and until is not None and since >= until:
        raise InvalidInput("since must be before until (since is inclusive, until exclusive)")
    return ReadFilters(repository=text_arg("repository"), hardware=text_arg("hardware"), since=since, until=until)


def encode_cursor(key: Sequence[Any] | int | None) -> str | None:
    if key is None:
        return None
    values = [key] if isinstance(key, int) else list(key)
    text = json.dumps([v.isoformat() if isinstance(v, datetime) else v for v in values], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def cursor_arg(shape: Sequence[type]) -> tuple[Any, ...] | None:
    """The ``cursor`` argument decoded to values of ``shape`` (datetime or int, in order); None when absent."""
    raw = request.args.get("cursor") or None
    if raw is None:
        return None
    try:
        values = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        if not isinstance(values, list) or len(values) != len(shape):
            raise ValueError("wrong length")
        out: list[Any] = []
        for kind, value in zip(shape, values, strict=True):
            if kind is datetime and isinstance(value, str):
                parsed = datetime.fromisoformat(value)
                out.append(utc(parsed))
            elif kind is int and isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63:
                out.append(value)
            else:
                raise ValueError("wrong type")
    except (ValueError, OverflowError, RecursionError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput("cursor is not one this endpoint gave out: pass back the 'next' of the previous page, "
                           "with the same filters") from None
    return tuple(out)
