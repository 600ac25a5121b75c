"""What every /api/v1 client relies on: the error shape (404, 405, 500 without a traceback), health, the
OpenAPI document covering every route, reads gated by a setting, and enqueueing a run."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import redis
from sqlalchemy.orm import Session, sessionmaker

from service.api.openapi import document
from service.app import create_app
from service.context import Context
from service.settings import load_settings
from tests.api_client import Api, error_of, make_api
from tests.conftest import fresh_redis

REDIS_URL = "redis://127.0.0.1:6379/14"


def test_routing_errors_are_json_under_the_api_and_html_elsewhere(api: Api) -> None:
    c = api.client
    missing = c.get("/api/v1/no/such/thing")
    assert missing.status_code == 404 and error_of(missing)["code"] == "not_found"
    wrong = c.delete("/api/v1/health")
    assert wrong.status_code == 405 and error_of(wrong)["code"] == "method_not_allowed"
    assert "GET" in wrong.headers["Allow"]
    page = c.get("/no/such/page")
    assert page.status_code == 404 and page.mimetype == "text/html"


def test_an_unexpected_error_is_logged_and_answered_without_its_details(
        api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def explode(*_: object, **__: object) -> None:
        raise RuntimeError("password=hunter2 in a connection string")

    monkeypatch.setattr("service.api.reads.repositories", explode)
    with caplog.at_level(logging.ERROR, logger="kernelwatch.api"):
        response = api.client.get("/api/v1/repositories")
    error = error_of(response)
    assert response.status_code == 500 and error["code"] == "internal"
    assert "hunter2" not in response.get_data(as_text=True)
    reference = re.search(r"reference (\w+)", error["message"])
    assert reference is not None
    logged = [r for r in caplog.records if reference.group(1) in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback is in the log, for whoever runs the service


def test_health_reports_schema_and_version(api: Api) -> None:
    health = api.client.get("/api/v1/health")
    assert health.status_code == 200
    assert health.json["status"] == "ok" and health.json["schema_current"] is True
    assert health.json["schema_revision"] == health.json["schema_head"] and health.json["version"]


def test_health_is_503_when_the_database_is_unreachable(tmp_path: Path) -> None:
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path),
                              "KERNELWATCH_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nothing"})
    ctx = Context.create(settings)
    try:
        response = create_app(settings, context=ctx).test_client().get("/api/v1/health")
        assert response.status_code == 503 and error_of(response)["code"] == "unavailable"
        response = create_app(settings, context=ctx).test_client().get("/api/v1/repositories")
        assert response.status_code == 503 and error_of(response)["code"] == "unavailable"
    finally:
        ctx.close()


def openapi_path(rule: str) -> str:
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.removeprefix("/api/v1"))


def test_the_openapi_document_covers_every_route_and_nothing_else(api: Api) -> None:
    served = api.client.get("/api/v1/openapi.json").json
    assert served["openapi"].startswith("3.0") and served == json.loads(json.dumps(document()))
    documented = {(path, method.upper()) for path, ops in served["paths"].items() for method in ops}
    routed = set()
    for rule in api.app.url_map.iter_rules():
        if rule.rule.startswith("/api/v1/"):
            for method in (rule.methods or set()) - {"OPTIONS", "HEAD"}:
                routed.add((openapi_path(rule.rule), method))
    assert routed - documented == set(), "routes missing from the OpenAPI document"
    assert {(p, m) for p, m in documented if m != "HEAD"} - routed == set(), "documented routes that do not exist"
    assert ("/artifacts/{sha256}", "HEAD") in documented
    for path, ops in served["paths"].items():
        for method, op in ops.items():
            if method in ("post", "put", "delete", "patch"):
                assert op["security"] == [{"bearer": []}] and op["x-required-scope"], (method, path)


def test_reads_need_a_token_when_the_setting_says_so(sessions: sessionmaker[Session], database_url: str,
                                                      tmp_path: Path) -> None:
    api = make_api(database_url, tmp_path, KERNELWATCH_READ_TOKEN_REQUIRED="1")
    try:
        c = api.client
        assert c.get("/api/v1/repositories").status_code == 401
        assert c.get("/api/v1/artifacts/" + "0" * 64).status_code == 401
        assert c.get("/api/v1/repositories", headers={"Authorization": "Bearer kw_nope"}).status_code == 401
        assert c.get("/api/v1/repositories", headers=api.auth("triage")).status_code == 200  # any valid token
        assert c.get("/api/v1/health").status_code == 200 and c.get("/api/v1/openapi.json").status_code == 200
    finally:
        api.ctx.close()


def test_pages_need_a_logged_in_token_when_reads_do(sessions: sessionmaker[Session], database_url: str,
                                                   tmp_path: Path) -> None:
    """KERNELWATCH_READ_TOKEN_REQUIRED gated /api/v1 alone: the pages beside it showed every result, trace, HLO and
    listing to anyone. Now nobody logged in is sent to log in (and back), any valid token logs in to read, triage
    still needs its scope, and a revoked token's session reads nothing more."""
    from service.pipeline.tokens import revoke_token
    from service.store.db import unit_of_work
    from tests.integration.test_dashboard_pages import csrf_of, log_in

    api = make_api(database_url, tmp_path, KERNELWATCH_READ_TOKEN_REQUIRED="1")
    try:
        c = api.client
        for path in ("/", "/commits", "/compare", "/model", "/results/1", "/series/1", "/results/1/trace.xplane.pb"):
            answer = c.get(path)
            assert answer.status_code == 302 and answer.headers["Location"].startswith("/login?next="), path
        assert c.post("/alerts/1/triage", data={"state": "fixed"}).status_code == 401
        assert c.get("/static/favicon.svg").status_code == 200 and c.get("/healthz").status_code == 200
        login_page = c.get("/login").get_data(as_text=True)
        assert 'id="reads-gated"' in login_page
        # A token that may only submit logs in to read (where reads are public it is refused: nothing to gain).
        reader = log_in(c, api.tokens["submit"], "/commits")
        assert reader.status_code == 303 and reader.headers["Location"] == "/commits"  # back where it was going
        page = c.get("/commits")
        assert page.status_code == 200 and "submit-bot" in page.get_data(as_text=True)
        assert c.get("/model").status_code == 200
        # Reading is not triaging.
        csrf = csrf_of(c.get("/").get_data(as_text=True))
        assert c.post("/alerts/1/triage", data={"state": "fixed", "csrf_token": csrf}).status_code == 403
        with unit_of_work(api.ctx.sessions) as s:
            revoke_token(s, "submit-bot")
        assert c.get("/commits").status_code == 302  # the revoked token's session ends at once
    finally:
        api.ctx.close()


def test_enqueue_in_the_embedded_form_is_503(api: Api) -> None:
    response = api.client.post("/api/v1/runs/enqueue", json={"repo": "/src/kernels", "commit": "main"},
                               headers=api.auth("submit"))
    assert response.status_code == 503 and "KERNELWATCH_REDIS_URL" in error_of(response)["message"]


def test_a_body_with_a_key_twice_or_a_field_the_route_does_not_take_is_400(api: Api) -> None:
    """Like a manifest: a duplicated key (which one a reader keeps is its choice) and an unknown field (an
    "author" the triage would have ignored: the token names the author) are refused, naming the field."""
    triage = api.auth("triage")
    unknown = api.client.post("/api/v1/alerts/1/triage", json={"state": "acknowledged", "author": "mallory"},
                              headers=triage)
    assert unknown.status_code == 400 and "unknown field 'author'" in error_of(unknown)["message"]
    twice = api.client.post("/api/v1/alerts/1/triage", data='{"state": "fixed", "state": "invalid"}',
                            headers={**triage, "Content-Type": "application/json"})
    assert twice.status_code == 400 and "appears twice" in error_of(twice)["message"]
    token = api.client.post("/api/v1/tokens", json={"name": "ci", "scopes": ["submit"], "expires": "never"},
                            headers=api.auth("admin"))
    assert token.status_code == 400 and "unknown field 'expires'" in error_of(token)["message"]
    enqueue = api.client.post("/api/v1/runs/enqueue", json={"repo": "r", "commit": "a", "priority": 4},
                              headers=api.auth("submit"))
    assert enqueue.status_code == 400 and "unknown field 'priority'" in error_of(enqueue)["message"]


def test_enqueue_sends_a_run_to_the_hardware_queue(sessions: sessionmaker[Session], database_url: str,
                                                   tmp_path: Path) -> None:
    url = fresh_redis(REDIS_URL)
    api = make_api(database_url, tmp_path, KERNELWATCH_REDIS_URL=url)
    try:
        submit = api.auth("submit")
        for bad in ({"repo": "r", "commit": "--upload-pack=evil"}, {"repo": "r"}, {"repo": "r", "commit": "a",
                    "hardware": "../x"}, {"repo": "r", "commit": "a", "samples": 0},
                    {"repo": "r", "commit": "a", "rounds": 0}, {"repo": "r", "commit": "a", "rounds": True},
                    {"repo": "r", "commit": "a", "capture": "yes"}):
            response = api.client.post("/api/v1/runs/enqueue", json=bad, headers=submit)
            assert response.status_code == 400, bad
        response = api.client.post("/api/v1/runs/enqueue", headers=submit, json={
            "repo": "https://example.com/kernels.git", "commit": "a" * 40, "hardware": "h200", "quick": True})
        assert response.status_code == 202 and response.json["queue"] == "runner.h200"
        client = redis.Redis.from_url(url)
        queued = [json.loads(m) for m in client.lrange("runner.h200", 0, -1)]
        assert [m["headers"]["id"] for m in queued] == [response.json["task_id"]]
        assert queued[0]["headers"]["task"] == "kernelwatch.run_suite"
    finally:
        api.ctx.close()
