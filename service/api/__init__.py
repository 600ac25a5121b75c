"""The HTTP API under /api/v1: JSON in and out, token auth with scopes, errors of one shape, an OpenAPI document.

``install(app)`` registers it; importing this package builds nothing beyond the blueprint object.
"""

from __future__ import annotations

from flask import Flask


def install(app: Flask) -> None:
    # The view modules attach their routes to the blueprint as they are imported.
    from service.api import artifacts, compare, deliveries, openapi, reads, runs, writes  # noqa: F401
    from service.api.blueprint import API_PREFIX, bp
    from service.api.errors import install as install_errors

    install_errors(app, API_PREFIX)
    app.register_blueprint(bp)
