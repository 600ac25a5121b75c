"""Stored times as aware UTC datetimes: one normaliser for every reader (issue 19: it was copied three times)."""

from __future__ import annotations

from datetime import UTC, datetime


def utc(value: datetime) -> datetime:
    """A time as an aware UTC datetime: SQLite hands back the naive UTC wall clock it was given, and a naive
    time is read as UTC; an aware one is converted."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
