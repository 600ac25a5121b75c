"""Reads: health, repositories, commits, series, findings, alerts. Stored results only: nothing is analysed here
(compare, which computes statistics over two stored points, lives in its own module)."""

from __future__ import annotations

from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from flask import Response, request
from sqlalchemy.exc import SQLAlchemyError

from kernelwatch.errors import InvalidInput, NotFound, Transient
from service.api.auth import public, readable
from service.api.blueprint import bp, context, reply
from service.api.paging import cursor_arg, encode_cursor, findings_limit_arg, limit_arg, read_filters
from service.detect.grouping import STATES
from service.pipeline.alerts import alerts_page
from service.report.alerts_text import alerts_to_json
from service.store.api_queries import repositories
from service.store.queries import commits_page, findings_page, series_view

FINDING_KINDS = ("time", "static", "numerics", "efficiency")
FINDING_DIRECTIONS = ("regression", "improvement")


def package_version() -> str:
    try:
        return version("kernelwatch")
    except PackageNotFoundError:
        return "unknown"


@bp.get("/health")
@public
def health() -> Response:
    from alembic.script import ScriptDirectory

    from service.store.db import alembic_config, current_revision

    ctx = context()
    try:
        revision = current_revision(ctx.engine)
    except SQLAlchemyError as exc:
        raise Transient(f"the database is unreachable ({type(exc).__name__})") from None
    head = ScriptDirectory.from_config(alembic_config(ctx.settings.effective_database_url)).get_current_head()
    body: dict[str, Any] = {"status": "ok", "schema_revision": revision, "schema_head": head,
                            "schema_current": revision == head, "version": package_version()}
    follow_up = ctx.follow_up_stats()
    if follow_up is not None:  # the embedded server: its follow-up work runs after the requests that set it off
        body["follow_up"] = follow_up
    return reply(body)


@bp.get("/repositories")
@readable
def get_repositories() -> Response:
    with context().sessions() as session:
        return reply({"repositories": repositories(session)})


@bp.get("/commits")
@readable
def get_commits() -> Response:
    """Measured commits, newest first, a page at a time, each with its worst ``findings_limit`` findings."""
    limit, findings_limit, filters = limit_arg(), findings_limit_arg(), read_filters()
    after = cursor_arg((datetime, int, int))  # authored_at, position, id
    with context().sessions() as session:
        page = commits_page(session, filters, limit=limit, findings_limit=findings_limit, after=after)
    return reply({"commits": page.items, "next": encode_cursor(page.next)})


@bp.get("/series/<int:series_id>")
@readable
def get_series(series_id: int) -> Response:
    with context().sessions() as session:
        view = series_view(session, series_id)
    if view is None:
        raise NotFound(f"no series {series_id}")
    return reply(view)


def _choice(name: str, allowed: tuple[str, ...]) -> str | None:
    value = request.args.get(name) or None
    if value is not None and value not in allowed:
        raise InvalidInput(f"{name} is one of {', '.join(allowed)}, got {value[:80]!r}")
    return value


@bp.get("/findings")
@readable
def get_findings() -> Response:
    """Findings newest first, a page at a time, filtered in SQL."""
    kind = _choice("kind", FINDING_KINDS)
    direction = _choice("direction", FINDING_DIRECTIONS)
    state = _choice("state", STATES)
    limit, filters = limit_arg(), read_filters()
    after = cursor_arg((datetime, int))  # created_at, id
    with context().sessions() as session:
        page = findings_page(session, filters, kind=kind, direction=direction, state=state, limit=limit,
                             after=after)
    return reply({"findings": page.items, "next": encode_cursor(page.next)})


@bp.get("/alerts")
@readable
def get_alerts() -> Response:
    """Alerts newest first, a page at a time, each with its worst ``findings_limit`` findings and its notes."""
    state = _choice("state", STATES)
    limit, findings_limit, filters = limit_arg(), findings_limit_arg(), read_filters()
    after = cursor_arg((int,))  # id
    with context().sessions() as session:
        page = alerts_page(session, filters, state=state, limit=limit, findings_limit=findings_limit,
                           after=None if after is None else after[0])
    return reply({**alerts_to_json(page.items), "total": page.total, "next": encode_cursor(page.next)})
