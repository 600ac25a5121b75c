"""The Flask application factory. Building an app is explicit; importing this module builds nothing."""

from __future__ import annotations

from flask import Flask

from service.context import Context
from service.settings import Settings, load_settings


def create_app(settings: Settings | None = None, context: Context | None = None) -> Flask:
    settings = settings or (context.settings if context else load_settings())
    ctx = context or Context.create(settings)
    app = Flask("kernelwatch")
    app.config["SECRET_KEY"] = settings.secret_key or None
    app.extensions["kernelwatch"] = ctx

    from service.api import install as install_api
    from web.views import bp as web_bp

    app.register_blueprint(web_bp)
    install_api(app)

    @app.get("/healthz")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
