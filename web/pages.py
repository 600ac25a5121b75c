"""What the page blueprints share: the running service's stores, and their template filters.

Filters are registered app-wide (``add_app_template_filter``): each blueprint names the ones its templates use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import Blueprint, current_app
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore


def service_stores() -> tuple[sessionmaker[Session], ArtifactStore]:
    """The database sessions and the artifact store of the app serving this request."""
    ctx = current_app.extensions["kernelwatch"]
    return ctx.sessions, ctx.artifacts


def add_filters(bp: Blueprint, filters: Mapping[str, Callable[..., Any]], prefix: str = "") -> None:
    """Register each filter app-wide under ``prefix + name``."""
    for name, fn in filters.items():
        bp.add_app_template_filter(fn, prefix + name)
