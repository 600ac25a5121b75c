"""An API app over a real database with one token per scope, for the tests of /api/v1 through Flask's client."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from service.app import create_app
from service.context import Context
from service.pipeline.tokens import create_token
from service.settings import load_settings
from service.store.db import unit_of_work

SCOPES = ("submit", "triage", "admin")


@dataclass
class Api:
    app: Flask
    ctx: Context
    client: FlaskClient
    tokens: dict[str, str]  # scope -> token holding only that scope

    def auth(self, scope: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[scope]}"}

    def upload(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        response = self.client.put(f"/api/v1/artifacts/{digest}", data=data, headers=self.auth("submit"))
        assert response.status_code in (200, 201), response.json
        return digest


def make_api(database_url: str, home: Path, background: bool = False, **env: str) -> Api:
    """The database must be at head already (the ``sessions`` fixture does that). ``background``: as
    `kernelwatch serve` builds it, follow-up work on a thread of its own after the request has answered."""
    settings = load_settings({"KERNELWATCH_HOME": str(home), "KERNELWATCH_DATABASE_URL": database_url, **env})
    ctx = Context.create(settings)
    if background:
        ctx = ctx.with_background_queue()
    app = create_app(settings, context=ctx)
    tokens = {}
    with unit_of_work(ctx.sessions) as session:
        for scope in SCOPES:
            tokens[scope] = create_token(session, f"{scope}-bot", [scope])[1]
    return Api(app=app, ctx=ctx, client=app.test_client(), tokens=tokens)


def error_of(response: Any) -> dict[str, str]:
    """The error object of a response, checking the stable shape on the way."""
    body = response.get_json()
    assert response.mimetype == "application/json", response.data[:200]
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"]), body
    assert "Traceback" not in response.get_data(as_text=True)
    return dict(body["error"])
