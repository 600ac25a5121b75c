"""Reads: health, repositories, commits, series, findings, alerts. Stored results only: nothing is analysed here
(compare, which computes statistics over two stored points, lives in its own module)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from flask import Response, request
from sqlalchemy.exc import SQLAlchemyError

from service.api.auth import public, readable
from service.api.blueprint import bp, context, int_arg, reply
from service.errors import InvalidInput, NotFound, Transient
from service.pipeline.alerts import list_alerts
from service.report.alerts_text import alerts_to_json
from service.store.api_queries import repositories
from service.store.queries import all_findings, recent_commits, series_view

FINDING_KINDS = ("time", "static", "numerics")
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
    return reply({"status": "ok", "schema_revision": revision, "schema_head": head,
                  "schema_current": revision == head, "version": package_version()})


@bp.get("/repositories")
@readable
def get_repositories() -> Response:
    with context().sessions() as session:
        return reply({"repositories": repositories(session)})


@bp.get("/commits")
@readable
def get_commits() -> Response:
    limit = int_arg("limit", 100, 1, 1000)
    repository = request.args.get("repository") or None
    with context().sessions() as session:
        return reply({"commits": recent_commits(session, limit=limit, repository=repository)})


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
    kind = _choice("kind", FINDING_KINDS)
    direction = _choice("direction", FINDING_DIRECTIONS)
    with context().sessions() as session:
        found = [f for f in all_findings(session)
                 if (kind is None or f.kind == kind) and (direction is None or f.direction == direction)]
    return reply({"findings": found})


@bp.get("/alerts")
@readable
def get_alerts() -> Response:
    with context().sessions() as session:
        alerts = list_alerts(session, repository=request.args.get("repository") or None,
                             state=request.args.get("state") or None)
    return reply(alerts_to_json(alerts))
