"""/api/v1 against its own OpenAPI document, as bench/api_fuzz.py checks it at full size: a small sample of
schemathesis's generated requests (valid and invalid data, some with a wrong token or none) to the real web
process on PostgreSQL; no answer is a 5xx, and every 4xx carries the stable error shape."""

from __future__ import annotations

from pathlib import Path

from bench.api_fuzz import error_shape_problem, fuzz_api, fuzz_token, seed_history, stored_values, table
from service.store.db import upgrade
from tests.conftest import fresh_redis
from tests.processes import clean_env, start_web

REDIS_URL = "redis://127.0.0.1:6379/2"  # this test's alone (test_soak_sample has 8, bench/api_fuzz.py 5)


def test_generated_requests_get_no_5xx_and_errors_of_one_shape(pg_database: str, tmp_path: Path) -> None:
    upgrade(pg_database)
    run_ids = seed_history(pg_database, tmp_path)
    token = fuzz_token(pg_database)
    # The distributed form: enqueueing a run is accepted (202) there, where the embedded form answers 503.
    env = clean_env(tmp_path, KERNELWATCH_DATABASE_URL=pg_database, KERNELWATCH_REDIS_URL=fresh_redis(REDIS_URL),
                    KERNELWATCH_FOLLOW_UP="none")
    with start_web(env, tmp_path) as web:
        api_url = f"{web.url}/api/v1"
        known = {**stored_values(api_url), "run_uid": run_ids[-1]}
        assert {"alert_id", "series_id", "base", "head"} <= set(known)
        tallies = fuzz_api(api_url, token, max_examples=3, known=known)
        assert "unhandled error" not in web.process.output()

    failures = {label: t.failures for label, t in tallies.items() if t.failed}
    assert not failures, f"{table(tallies)}\n{failures}"
    assert sum(t.requests for t in tallies.values()) >= 100, table(tallies)
    assert sum(t.ok for t in tallies.values()) >= 10, table(tallies)  # the stored values got past the lookups
    assert len(tallies) >= 18  # every operation of the document


def test_the_error_shape_check_refuses_what_clients_could_not_parse() -> None:
    assert error_shape_problem("application/json", b'{"error":{"code":"not_found","message":"no run"}}') is None
    assert error_shape_problem("application/json",
                               b'{"error":{"code":"x","message":"y","details":{"missing_artifacts":[]}}}') is None
    assert error_shape_problem("text/html", b"<h1>Not Found</h1>") is not None
    assert error_shape_problem("application/json", b'{"message":"no"}') is not None
    assert error_shape_problem("application/json", b'{"error":{"code":1,"message":"y"}}') is not None
    assert error_shape_problem("application/json", b'{"error":{"code":"x","message":"y"},"extra":1}') is not None
    assert error_shape_problem("application/json", b'{"error":{"code":"x","message":"Traceback (most"}}') is not None
