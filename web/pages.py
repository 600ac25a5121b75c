"""What the page blueprints share: the running service's stores, and their template filters.

Filters are registered app-wide (``add_app_template_filter``): each blueprint names the ones its templates use.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from flask import Blueprint, current_app
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore

# The names Flask's url_for takes as its own keywords. A query argument of one of these names, handed on to url_for
# to keep it in a link, was a 500 (``?endpoint=x``, ``?_method=x``: issue 18's page fuzzing) or a link off the site
# (``?_external=1&_scheme=javascript``).
URL_FOR_KEYWORDS = frozenset({"endpoint", "_anchor", "_method", "_scheme", "_external"})


def link_args(args: Mapping[str, str], drop: Collection[str] = ()) -> dict[str, str]:
    """A request's query arguments (the first value of each) to hand on to url_for, less ``drop`` and any name
    url_for takes as its own."""
    return {k: v for k, v in args.items() if k not in URL_FOR_KEYWORDS and k not in drop}


def service_stores() -> tuple[sessionmaker[Session], ArtifactStore]:
    """The database sessions and the artifact store of the app serving this request."""
    ctx = current_app.extensions["kernelwatch"]
    return ctx.sessions, ctx.artifacts


def add_filters(bp: Blueprint, filters: Mapping[str, Callable[..., Any]], prefix: str = "") -> None:
    """Register each filter app-wide under ``prefix + name``."""
    for name, fn in filters.items():
        bp.add_app_template_filter(fn, prefix + name)
