"""Who is using the dashboard: log in by pasting an API token, log out; and the CSRF token of every form.

The session (Flask's signed cookie) holds the token's id, never its text: each request looks the token up again,
so revoking it (`kernelwatch token revoke`) ends every session that logged in with it on the next click, and a
scope taken away is taken away from the page too. Only a token that may triage can log in: triage is the one
thing the pages write.

Every form carries the session's CSRF token in a hidden field; a POST without the right one is refused with 400
before anything else is looked at. The cookie alone is not enough to write, so another site cannot post a triage
in a logged-in user's name.

With ``KERNELWATCH_READ_TOKEN_REQUIRED=1`` the pages are not public either (``require_reader``): a visitor with no
session is sent to log in, and any valid token logs in to read (triage still needs its scope). The setting gated the
HTTP API alone, while the pages beside it showed every result, trace, HLO and listing to anyone.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from flask import Blueprint, abort, current_app, g, redirect, render_template, request, session, url_for
from werkzeug.wrappers import Response

from kernelwatch.errors import NotFound
from service import tokens
from service.pipeline.tokens import authenticate, get_token
from service.store.db import unit_of_work

bp = Blueprint("auth", __name__, template_folder="templates")

REQUIRED_SCOPE = "triage"
_CSRF = "csrf"
_TOKEN_ID = "token_id"
_NO_USER = object()


@dataclass(frozen=True)
class User:
    token_id: int
    name: str  # the token's name: the author of the user's triage notes


def csrf_token() -> str:
    """The session's CSRF token, made on first use."""
    token = session.get(_CSRF)
    if not isinstance(token, str):
        token = session[_CSRF] = secrets.token_urlsafe(32)
    return token


def check_csrf() -> None:
    """Refuse (400) a form post whose hidden csrf_token is not the session's."""
    sent = request.form.get("csrf_token", "")
    expected = session.get(_CSRF)
    if not isinstance(expected, str) or not hmac.compare_digest(sent.encode(), expected.encode()):
        abort(400, "The form's security token is missing or stale (the session may have expired): reload the "
                   "page and send it again.")


def current_reader() -> User | None:
    """Whoever is logged in, with any scope, or None; a session whose token was revoked or is gone is ended here."""
    cached = g.get("kw_reader", _NO_USER)
    if cached is not _NO_USER:
        return cached  # type: ignore[return-value]
    reader: User | None = None
    scopes: list[str] = []
    token_id = session.get(_TOKEN_ID)
    if isinstance(token_id, int):
        with current_app.extensions["kernelwatch"].sessions() as db:
            try:
                view = get_token(db, token_id)
            except NotFound:
                view = None
        # Where the pages are public a session is for triage alone: one whose token lost the scope ends, as before.
        if view is not None and view.active and (_reads_gated() or tokens.grants(view.scopes, REQUIRED_SCOPE)):
            reader, scopes = User(token_id=view.id, name=view.name), list(view.scopes)
        else:
            session.pop(_TOKEN_ID, None)
    g.kw_reader, g.kw_scopes = reader, scopes
    return reader


def current_user() -> User | None:
    """The logged-in user who may triage, or None (a reader whose token lacks the scope, or nobody)."""
    reader = current_reader()
    return reader if reader is not None and tokens.grants(g.kw_scopes, REQUIRED_SCOPE) else None


def _reads_gated() -> bool:
    return bool(current_app.extensions["kernelwatch"].settings.read_token_required)


# What stays open where reads need a token: the login pages, the API (which checks its own token), the webhook (its
# signature), the static assets and the health check (no data). Every other route is gated, a page added later too.
UNGATED_BLUEPRINTS = frozenset({"auth", "api", "hooks"})
UNGATED_ENDPOINTS = frozenset({"health"})


def require_reader() -> Response | tuple[str, int] | None:
    """Before every page, where reads need a token: nobody logged in is sent to log in (a GET, coming back after),
    or refused (401) for anything else. An unknown path (no endpoint) goes on to its 404."""
    if (request.endpoint is None or request.endpoint in UNGATED_ENDPOINTS or request.blueprint in UNGATED_BLUEPRINTS
            or request.path.startswith("/static/") or not _reads_gated()):
        return None
    if current_reader() is not None:
        return None
    if request.method in ("GET", "HEAD"):
        return redirect(url_for("auth.login_form", next=request.full_path.rstrip("?")), 302)
    return render_template("error.html", status=401, message="Log in first: this service's pages need a token."), 401


@bp.app_context_processor
def _template_globals() -> dict[str, object]:
    return {"current_user": current_user, "current_reader": current_reader, "csrf_token": csrf_token,
            "reads_gated": _reads_gated}


def _safe_next(raw: str | None) -> str:
    """Where to go after logging in: a path of this site only (``//host`` and ``http:`` would leave it). Any
    control character refuses it too: browsers drop tabs and newlines from a URL, so ``/<TAB>/evil.example`` is
    ``//evil.example`` to them, and a newline in a header is an error rather than a redirect."""
    if (not raw or not raw.startswith("/") or raw.startswith("//") or "\\" in raw
            or any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw) or urlsplit(raw).netloc):
        return url_for("web.index")
    return raw


@bp.get("/login")
def login_form() -> str:
    return render_template("login.html", next=_safe_next(request.args.get("next")), error=None)


@bp.post("/login")
def login() -> Response | tuple[str, int]:
    check_csrf()
    target = _safe_next(request.form.get("next"))
    raw = request.form.get("token", "").strip()
    with unit_of_work(current_app.extensions["kernelwatch"].sessions) as db:
        view = authenticate(db, raw) if raw else None
    if view is None:
        # Unknown, malformed, wrong secret or revoked: one message, as the API gives, so it reveals nothing.
        return render_template("login.html", next=target,
                               error="That token is not valid: unknown, malformed or revoked."), 401
    if not tokens.grants(view.scopes, REQUIRED_SCOPE) and not _reads_gated():
        # Where the pages are public, logging in is for triage alone: a token that cannot triage gains nothing.
        return render_template("login.html", next=target,
                               error=f"Token {view.name!r} cannot triage (it has: {', '.join(view.scopes)}); "
                                     f"log in with a token that has the triage scope."), 403
    # A fresh session on login: a CSRF token (or anything else) planted before it is not carried over.
    session.clear()
    session[_TOKEN_ID] = view.id
    session.permanent = True
    csrf_token()
    return redirect(target, 303)


@bp.get("/logout")
def logout_form() -> str:
    # Logging out changes state, so it is a POST with the CSRF token; a typed /logout gets the button.
    return render_template("logout.html")


@bp.post("/logout")
def logout() -> Response:
    check_csrf()
    session.clear()
    return redirect(url_for("web.index"), 303)
