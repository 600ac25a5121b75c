"""The Flask application factory. Building an app is explicit; importing this module builds nothing."""

from __future__ import annotations

from flask import Flask, render_template, request
from sqlalchemy.exc import OperationalError

from kernelwatch.errors import InvalidInput, KernelWatchError, NotFound
from service.context import Context
from service.request_checks import request_problem
from service.secret_key import home_secret_key
from service.settings import Settings, load_settings
from service.store.db import cancelled_by_timeout, limit_statements


def create_app(settings: Settings | None = None, context: Context | None = None) -> Flask:
    settings = settings or (context.settings if context else load_settings())
    ctx = context or Context.create(settings)
    # A web request's SQL is cut off after a few seconds (PostgreSQL only): its engine alone, never a worker's.
    limit_statements(ctx.engine, settings.web_statement_timeout_ms)
    app = Flask("kernelwatch")
    # Signs the dashboard's session (login, CSRF token); a home without a configured key gets its own.
    app.config["SECRET_KEY"] = settings.secret_key or home_secret_key(settings.home)
    # The session cookie rides on same-site requests only: a second guard, beside the forms' CSRF token.
    app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    app.extensions["kernelwatch"] = ctx

    from service.api import install as install_api
    from web.compare_views import bp as compare_bp
    from web.diff import bp as diff_bp
    from web.drilldown import bp as drilldown_bp
    from web.model_page import bp as model_bp
    from web.session_auth import bp as auth_bp
    from web.session_auth import require_reader
    from web.views import bp as web_bp

    app.register_blueprint(web_bp)
    app.register_blueprint(auth_bp)
    app.register_blueprint(compare_bp)
    app.register_blueprint(drilldown_bp)
    app.register_blueprint(diff_bp)
    app.register_blueprint(model_bp)
    install_api(app)
    from service.hooks.github import bp as github_hook_bp

    app.register_blueprint(github_hook_bp)

    # A page whose query the statement timeout cancelled, or whose database is down: a 503 page that says
    # which, never Flask's bare 500 (the API's blueprint answers these in its JSON error shape first).
    app.register_error_handler(OperationalError, _database_error_page)
    # Every page's arguments checked before its view runs, as the API's are (service/request_checks.py): a NUL
    # in a query or path, or an id past BIGINT, was a 500 from the driver. An unknown repository in a filter, a
    # state that is not one: the caller's fault, said on a page of any blueprint, never a 500.
    app.before_request(_refuse_unstorable_page_arguments)
    # Where reads need a token (KERNELWATCH_READ_TOKEN_REQUIRED), the pages need a logged-in session.
    app.before_request(require_reader)
    app.register_error_handler(KernelWatchError, _error_page)

    @app.get("/healthz")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _refuse_unstorable_page_arguments() -> None:
    from service.api.blueprint import bp as api

    if request.blueprint == api.name:
        return  # the API checks its own, answering in its JSON error shape
    problem = request_problem(request.args.items(multi=True), request.view_args)
    if problem:
        # An id no row can have names no page: 404, as an id past the last row's does.
        raise (NotFound if "must be a whole number" in problem else InvalidInput)(problem)


def _error_page(exc: KernelWatchError) -> tuple[str, int]:
    return render_template("error.html", status=exc.http_status, message=str(exc)), exc.http_status


def _database_error_page(exc: OperationalError) -> tuple[str, int]:
    if cancelled_by_timeout(exc):
        message = ("This page's database query ran past the statement timeout and was cancelled: narrow it "
                   "(filters, a shorter range) or try again later.")
    else:
        message = "The database is unavailable; try again shortly."
    return render_template("error.html", status=503, message=message), 503
