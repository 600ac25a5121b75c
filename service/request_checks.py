"""What no database column can hold, checked where a request comes in (the API's blueprint, the dashboard's
pages): PostgreSQL's text refuses NUL, UTF-8 has no encoding of a lone surrogate, and ids are BIGINT. Such input
is the caller's mistake, a 400 (a 404 for a page's id), never a 500 from the driver. Pure: no Flask here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MAX_ID = 2**63 - 1  # ids are BIGINT (SQLite's INTEGER is as wide): a larger number names nothing and overflows


def unstorable(text: str) -> str | None:
    """Why a string cannot be stored or compared as text by the database, or None when it can."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (a lone surrogate)"
    return None


def request_problem(args: Iterable[tuple[str, str]], view_args: Mapping[str, Any] | None) -> str | None:
    """Why a request's query arguments or path segments cannot be looked up, or None when they can."""
    for name, value in args:
        problem = unstorable(value)
        if problem:
            return f"the query argument {name[:40]!r} {problem}"
    for name, value in (view_args or {}).items():
        if isinstance(value, str):
            problem = unstorable(value)
            if problem:
                return f"{name} {problem}"
        elif isinstance(value, int) and not 0 <= value <= MAX_ID:
            return f"{name} must be a whole number from 0 to {MAX_ID}, got {str(value)[:40]}"
    return None
