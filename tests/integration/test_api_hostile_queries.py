"""Query, path and body arguments written to hurt: SQL fragments, regex bombs, huge numbers, garbage cursors, dates
past datetime's range, NUL bytes and lone surrogates. Each is answered at once, in the stable error shape where it
is invalid; none reaches the database as a driver error (a 500), none runs long. And the web process's statement
timeout: a query that runs past it is cancelled and answered 503 in the same shape.

No API argument is a regular expression (the CLI's `compare --filter` is one, on its user's own machine): names
are compared for equality as bound parameters, so a pattern is only an unknown name, and every text argument is
capped at 200 characters."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import text

from kernelwatch.errors import ConfigurationError
from service.app import create_app
from service.context import Context
from service.settings import load_settings
from service.store.db import limit_statements, make_engine
from tests import builders
from tests.api_client import Api, error_of
from tests.processes import clean_env, start_web
from tests.scratch_database import at_head

QUICK_S = 2.0  # generous on two loaded cores: each of these answers in milliseconds
SQL = "' OR 1=1 --"
BOMB = "(a+)+$"
HUGE = str(10**30)


def _cursor(values: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def _timed(api: Api, method: str, url: str, **kwargs: Any) -> Any:
    started = time.perf_counter()
    response = api.client.open(url, method=method, **kwargs)
    elapsed = time.perf_counter() - started
    assert elapsed < QUICK_S, f"{method} {url} took {elapsed:.1f} s"
    return response


@pytest.fixture
def seeded(api: Api) -> Api:
    for manifest in builders.step_series_manifests([1.0] * 6 + [1.2] * 6, seed=3):
        api.ctx.submit(manifest)
    return api


INVALID = [
    # SQL where a choice or a number is expected
    "/api/v1/findings?kind=" + SQL, "/api/v1/findings?state=" + SQL, "/api/v1/alerts?state=" + SQL,
    "/api/v1/findings?direction=" + SQL, "/api/v1/commits?limit=" + SQL, "/api/v1/commits?cursor=" + SQL,
    "/api/v1/compare?base=a&head=b&sort=" + SQL, "/api/v1/compare?base=a&head=b&verdict=" + SQL,
    "/api/v1/commits?since=" + SQL,
    # huge and odd numbers
    f"/api/v1/commits?limit={HUGE}", f"/api/v1/findings?limit={HUGE}", f"/api/v1/alerts?findings_limit={HUGE}",
    f"/api/v1/compare?base=a&head=b&offset={HUGE}", f"/api/v1/compare?base=a&head=b&limit={HUGE}",
    "/api/v1/commits?limit=" + "9" * 5000,  # past int()'s 4,300 digits
    "/api/v1/commits?limit=%C2%B2",  # "²": str.isdigit() says yes, int() says no
    "/api/v1/commits?limit=%D9%A1%D9%A2",  # Arabic-Indic "12"
    "/api/v1/commits?limit=-1", "/api/v1/commits?limit=0", "/api/v1/commits?limit=1e3",
    "/api/v1/compare?base=a&head=b&alpha=nan", "/api/v1/compare?base=a&head=b&alpha=1e400",
    "/api/v1/compare?base=a&head=b&min_effect=-inf",
    f"/api/v1/series/{HUGE}", f"/api/v1/series/{2**63}",
    # cursors this service never gave out
    "/api/v1/findings?cursor=" + _cursor(["2026-01-01T00:00:00", 2**70]),
    "/api/v1/findings?cursor=" + _cursor(["99999-01-01T00:00:00", 1]),
    "/api/v1/findings?cursor=" + _cursor(["0001-01-01T00:00:00+14:00", 1]),
    "/api/v1/commits?cursor=" + _cursor([1e308, 1, 1]), "/api/v1/alerts?cursor=" + _cursor([True]),
    "/api/v1/alerts?cursor=" + _cursor("x" * 100), "/api/v1/alerts?cursor=%%%%",
    "/api/v1/alerts?cursor=" + "W" * 3000,
    "/api/v1/alerts?cursor=" + base64.urlsafe_b64encode(b"[" * 100000).decode(),
    # dates past datetime's range, or the wrong way round
    "/api/v1/findings?since=99999-01-01", "/api/v1/alerts?until=+99999-01-01T00:00:00",
    "/api/v1/commits?since=0001-01-01T00:00:00%2B14:00", "/api/v1/commits?until=9999-12-31T23:59:59-14:00",
    "/api/v1/findings?since=2026-02-01&until=2026-01-01",
    # text the database cannot hold, and names past the cap
    "/api/v1/commits?repository=demo%00", "/api/v1/findings?hardware=%00", "/api/v1/alerts?repository=a%00b",
    "/api/v1/compare?base=abc%00&head=def", "/api/v1/runs/run%00id", "/api/v1/runs/run%00id/results",
    "/api/v1/commits?repository=" + "a" * 201, "/api/v1/compare?base=" + "a" * 5000 + "&head=b",
]


def test_each_hostile_argument_is_a_quick_400(api: Api) -> None:
    wrong = []
    for url in INVALID:
        response = _timed(api, "GET", url)
        if response.status_code != 400 or error_of(response)["code"] != "invalid_input":
            wrong.append((url[:120], response.status_code, response.get_data(as_text=True)[:200]))
    assert not wrong


def test_a_pattern_or_sql_in_a_name_filter_is_only_an_unknown_name(seeded: Api) -> None:
    for value in (SQL, BOMB, "a" * 199 + "!", "%", "_", "\\", "demo' --", "démo", "DEMO"):
        for url in ("/api/v1/commits", "/api/v1/findings", "/api/v1/alerts"):
            for name in ("repository", "hardware"):
                response = _timed(seeded, "GET", url, query_string={name: value})
                if response.status_code == 404:  # /alerts says so of an unknown repository
                    assert error_of(response)["code"] == "not_found"
                    continue
                assert response.status_code == 200, response.get_data(as_text=True)[:300]
                # Nothing matched: no filter was widened into "everything".
                assert response.json[url.rsplit("/", 1)[1]] == [], (url, name, value)
    for url in ("/api/v1/commits", "/api/v1/findings", "/api/v1/alerts"):
        assert _timed(seeded, "GET", url, query_string={"repository": "demo"}).json[url.rsplit("/", 1)[1]]


def test_a_hostile_compare_reference_names_nothing(api: Api) -> None:
    for ref in (SQL, BOMB, "%", "0" * 41, "abc%", "_" * 12, "a" * 200):
        response = _timed(api, "GET", "/api/v1/compare", query_string={"base": ref, "head": ref, "repo": SQL})
        assert response.status_code in (400, 404), response.get_data(as_text=True)[:300]
        error_of(response)


def test_a_huge_id_in_a_write_is_a_400(api: Api) -> None:
    for huge in (HUGE, str(2**63)):
        response = _timed(api, "POST", f"/api/v1/alerts/{huge}/triage", json={"state": "acknowledged"},
                          headers=api.auth("triage"))
        assert response.status_code == 400 and error_of(response)["code"] == "invalid_input"
        response = _timed(api, "DELETE", f"/api/v1/tokens/{huge}", headers=api.auth("admin"))
        assert response.status_code == 400 and error_of(response)["code"] == "invalid_input"


HOSTILE_BODIES = [
    b'{"state": "acknowledged", "note": "a\\u0000b"}',  # NUL: PostgreSQL's text refuses it
    b'{"state": "acknowledged", "note": "\\ud800"}',  # a lone surrogate: no UTF-8 for it
    b'{"state": "ack\\u0000"}',
    b'{"state": "acknowledged", "note": {"\\u0000": 1}}',
    b"[" * 100000 + b"]" * 100000,  # nested past the parser's recursion limit
    b"\xff\xfe{}",  # not UTF-8
]


def test_a_hostile_json_body_is_a_400(api: Api) -> None:
    for body in HOSTILE_BODIES:  # checked before the alert is looked up: none need exist
        response = _timed(api, "POST", "/api/v1/alerts/1/triage", data=body, content_type="application/json",
                          headers=api.auth("triage"))
        assert response.status_code == 400, (body[:60], response.get_data(as_text=True)[:300])
        assert error_of(response)["code"] == "invalid_input"
    response = _timed(api, "POST", "/api/v1/tokens", json={"name": "bot\x00", "scopes": ["submit"]},
                      headers=api.auth("admin"))
    assert response.status_code == 400 and error_of(response)["code"] == "invalid_input"
    # A suite run a runner could not act on: 202 "queued", then refused in the runner's log alone.
    for task in ({"repo": "ext::sh -c touch% /tmp/x", "commit": "main"}, {"repo": "fd::3", "commit": "main"},
                 {"repo": "https://example.com/k.git", "commit": "main", "params": {"n": 1}},
                 {"repo": "https://example.com/k.git", "commit": "main", "suite": "x" * 100_000}):
        response = _timed(api, "POST", "/api/v1/runs/enqueue", json=task, headers=api.auth("submit"))
        assert response.status_code == 400 and error_of(response)["code"] == "invalid_input", task


# --- the web process's statement timeout ------------------------------------------------------------------------

def test_the_statement_timeout_setting_is_checked() -> None:
    assert load_settings({}).web_statement_timeout_ms == 5000
    assert load_settings({"KERNELWATCH_WEB_STATEMENT_TIMEOUT_MS": "0"}).web_statement_timeout_ms == 0
    assert load_settings({"KERNELWATCH_WEB_STATEMENT_TIMEOUT_MS": " 250 "}).web_statement_timeout_ms == 250
    for bad in ("5s", "-1", "1e3", "²", "9" * 12):
        with pytest.raises(ConfigurationError, match="KERNELWATCH_WEB_STATEMENT_TIMEOUT_MS"):
            load_settings({"KERNELWATCH_WEB_STATEMENT_TIMEOUT_MS": bad})


def test_only_the_web_apps_engine_gets_the_statement_timeout(pg_database: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNELWATCH_WEB_STATEMENT_TIMEOUT_MS", raising=False)
    ctx = Context.create(load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": pg_database}))
    try:
        with ctx.engine.connect() as conn:  # a worker's context: no limit
            assert conn.scalar(text("SHOW statement_timeout")) == "0"
        create_app(ctx.settings, context=ctx)
        create_app(ctx.settings, context=ctx)  # twice on one engine: still the one setting
        with ctx.engine.connect() as conn:
            assert conn.scalar(text("SHOW statement_timeout")) == "5s"
    finally:
        ctx.close()


def test_the_statement_timeout_is_a_no_op_on_sqlite(sqlite_database: str) -> None:
    engine = make_engine(sqlite_database)
    try:
        limit_statements(engine, 1)
        with engine.connect() as conn:
            assert conn.scalar(text("SELECT 1")) == 1
    finally:
        engine.dispose()


def _get(url: str) -> tuple[int, Any, float]:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    return status, json.loads(raw), time.perf_counter() - started


def test_a_query_past_the_statement_timeout_is_a_503_in_the_error_shape(pg_database: str, tmp_path: Path) -> None:
    at_head(pg_database)
    env = clean_env(tmp_path, KERNELWATCH_DATABASE_URL=pg_database, KERNELWATCH_WEB_STATEMENT_TIMEOUT_MS="300")
    with start_web(env, tmp_path) as web:
        assert _get(f"{web.url}/api/v1/repositories")[0] == 200
        # A statement waiting on a lock runs as long as the lock is held: a slow query, without a test-only path.
        with psycopg.connect(pg_database.replace("postgresql+psycopg://", "postgresql://")) as holder:
            holder.execute("LOCK TABLE repository IN ACCESS EXCLUSIVE MODE")
            status, body, elapsed = _get(f"{web.url}/api/v1/repositories")
            try:  # a dashboard page over the same table: a 503 page that says why, not Flask's bare 500
                urllib.request.urlopen(f"{web.url}/commits", timeout=30)
                page_status, page = 200, ""
            except urllib.error.HTTPError as exc:
                page_status, page = exc.code, exc.read().decode()
            holder.rollback()
        assert page_status == 503 and "statement timeout" in page, page[-2000:]
        assert status == 503 and set(body) == {"error"}, body
        assert body["error"]["code"] == "unavailable" and body["error"]["details"] == {"reason": "statement_timeout"}
        assert "timeout" in body["error"]["message"] and elapsed < 10
        assert _get(f"{web.url}/api/v1/repositories")[0] == 200  # the connection went back to the pool usable
        assert "unhandled error" not in web.process.output()


def test_a_run_upload_outlasting_the_read_limit_is_stored_not_refused(pg_database: str, tmp_path: Path) -> None:
    """The read limit is for reads: a run's upload waiting behind a lock (a concurrent submission of the same run, a
    loaded database) past it is still stored, once, where a read in the same wait is cancelled. The soak saw an
    upload cancelled this way, answered 503 and sent again whole."""
    from tests.api_client import make_api

    at_head(pg_database)
    api = make_api(pg_database, tmp_path, KERNELWATCH_WEB_STATEMENT_TIMEOUT_MS="300")
    doc = builders.manifest(0)
    try:
        with psycopg.connect(pg_database.replace("postgresql+psycopg://", "postgresql://")) as holder:
            holder.execute("LOCK TABLE repository IN ACCESS EXCLUSIVE MODE")
            read = api.client.get("/api/v1/repositories")
            assert read.status_code == 503 and error_of(read)["code"] == "unavailable"
            release = threading.Timer(1.5, holder.rollback)  # five times the read limit, then the lock goes
            release.start()
            started = time.perf_counter()
            upload = api.client.post("/api/v1/runs", json=doc, headers=api.auth("submit"))
            waited = time.perf_counter() - started
            release.join()
        assert upload.status_code == 201, upload.get_json()
        assert waited >= 1.0  # it did wait behind the lock, well past the 300 ms a read gets
        stored = api.client.get(f"/api/v1/runs/{doc['run_id']}/results", headers=api.auth("submit"))
        assert stored.status_code == 200 and len(stored.get_json()["results"]) == len(doc["results"])
    finally:
        api.ctx.close()
