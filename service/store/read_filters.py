"""What the bounded reads (findings, commits, alerts) filter on, and the page they return.

Filters become WHERE clauses here, once, so the three reads mean the same thing by "repository", "hardware" and a
time window. Repository names and hardware names are resolved to ids first: both tables are tiny, and a list of
ids lets the planner use its statistics where a join to a name would not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, func, literal, or_, select, tuple_
from sqlalchemy.orm import InstrumentedAttribute, Session

from kernelwatch.errors import NotFound
from service.store.models import Environment, Repository
from service.store.times import utc

T = TypeVar("T")
K = TypeVar("K")


@dataclass(frozen=True)
class ReadFilters:
    repository: str | None = None  # a repository's name
    hardware: str | None = None  # an environment's device kind ("NVIDIA H200", "TPU v5 lite") or backend, any case
    since: datetime | None = None  # inclusive, timezone-aware
    until: datetime | None = None  # exclusive, timezone-aware


@dataclass(frozen=True)
class Page(Generic[T, K]):
    items: list[T]
    next: K | None = None  # the key of the last item when more follow; None on the last page
    total: int | None = None  # every item the filters match, where counting them is cheap


def repository_ids(session: Session, name: str | None) -> list[int] | None:
    """The ids a repository filter allows; None when there is no filter. An unknown name is NotFound, as the alerts'
    filter says it: an empty page for it read as a repository with nothing measured, which a typo is not."""
    if name is None:
        return None
    ids = list(session.scalars(select(Repository.id).where(Repository.name == name)))
    if not ids:
        raise NotFound(f"no repository named {name[:200]!r}")
    return ids


def environment_ids(session: Session, hardware: str | None) -> list[int] | None:
    """The environments a hardware filter allows: device kind or backend equal to it, ignoring case, so that
    ``tpu`` selects every TPU and ``TPU v5 lite`` one kind of them. None when there is no filter."""
    if hardware is None:
        return None
    wanted = hardware.strip().lower()
    return list(session.scalars(select(Environment.id).where(
        or_(func.lower(Environment.device_kind) == wanted, func.lower(Environment.backend) == wanted))))


def time_window(column: InstrumentedAttribute[datetime], filters: ReadFilters) -> list[ColumnElement[bool]]:
    """``since <= column < until``: half-open, so consecutive windows never count a row twice."""
    conditions: list[ColumnElement[bool]] = []
    # Converted to UTC before binding: SQLite stores the wall clock without its offset.
    if filters.since is not None:
        conditions.append(column >= utc(filters.since))
    if filters.until is not None:
        conditions.append(column < utc(filters.until))
    return conditions


def before(columns: Sequence[InstrumentedAttribute[Any]], key: Sequence[Any]) -> ColumnElement[bool]:
    """Rows after ``key`` in a newest-first (all columns descending) order: a row-value comparison, which both
    databases answer from an index on the same columns instead of re-reading the pages already served."""
    values = [utc(v) if isinstance(v, datetime) else v for v in key]
    return tuple_(*columns) < tuple_(*(_typed(c, v) for c, v in zip(columns, values, strict=True)))


def _typed(column: InstrumentedAttribute[Any], value: Any) -> Any:
    # Bound with the column's type, so SQLite gets a datetime in the format it stored, not sqlite3's own.
    return literal(value, type_=column.type)
