"""Token authentication for the API: ``Authorization: Bearer kw_<prefix>_<secret>``.

Every view is marked with what it needs (``required_scope``): a scope for writes, ``READ`` for reads (public
unless KERNELWATCH_READ_TOKEN_REQUIRED=1, then any valid token), ``PUBLIC`` for health and the OpenAPI document.
A test walks the URL map and refuses any write route without a scope, so none can be added unguarded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from flask import g, request

from kernelwatch.errors import Forbidden, Unauthorized
from service import tokens
from service.api.blueprint import context
from service.pipeline.tokens import TokenView, authenticate
from service.store.db import unit_of_work

READ = "read"
PUBLIC = "public"
F = TypeVar("F", bound=Callable[..., Any])


def bearer(header: str | None) -> str | None:
    """The token of an Authorization header, or None when there is no bearer token in it."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def _caller() -> TokenView:
    header = request.headers.get("Authorization")
    raw = bearer(header)
    if raw is None and header and header.strip():
        # A header was sent, in another scheme (`Token ...`, `Basic ...`) or without its value: saying "no token"
        # to a caller who sent one sends them looking for the wrong mistake.
        scheme = header.strip().partition(" ")[0]
        # Named back only where it reads as a scheme: a bare token sent without one would be echoed into a log.
        named = f"the {scheme!r} scheme" if scheme.isalpha() and len(scheme) <= 20 else "no scheme this API knows"
        raise Unauthorized(f"the Authorization header's scheme is {scheme!r}, with no token after it"
                           if scheme.lower() == "bearer" else
                           f"the Authorization header uses {named}: send Authorization: Bearer <token>")
    if raw is None:
        raise Unauthorized("this needs a token: send Authorization: Bearer <token> "
                           "(make one with `kernelwatch token create NAME --scope SCOPE`)")
    with unit_of_work(context().sessions) as session:
        token = authenticate(session, raw)
    if token is None:
        raise Unauthorized("the token is not valid: unknown, malformed or revoked")
    return token


def _mark(view: F, scope: str, check: Callable[[], None]) -> F:
    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        check()
        return view(*args, **kwargs)

    wrapped.required_scope = scope  # type: ignore[attr-defined]
    return cast(F, wrapped)


def requires(scope: str) -> Callable[[F], F]:
    if scope not in tokens.SCOPES:
        raise ValueError(f"unknown scope {scope!r}")

    def check() -> None:
        token = _caller()
        if not tokens.grants(token.scopes, scope):
            raise Forbidden(f"token {token.name!r} lacks the {scope!r} scope (it has: {', '.join(token.scopes)})")
        g.api_token = token

    return lambda view: _mark(view, scope, check)


def readable(view: F) -> F:
    def check() -> None:
        if context().settings.read_token_required:
            g.api_token = _caller()

    return _mark(view, READ, check)


def public(view: F) -> F:
    return _mark(view, PUBLIC, lambda: None)


def caller_name() -> str:
    token: TokenView = g.api_token
    return token.name
