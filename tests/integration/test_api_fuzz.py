"""The web process under hostile input, as bench/api_fuzz.py checks it at full size: a small sample of its three
phases against the real web process on PostgreSQL. /api/v1 against its own OpenAPI document (schemathesis's valid
and invalid data, some with a wrong token or none); every dashboard page from the app's URL map with generated
path segments and query arguments, anonymous and logged in; the GitHub webhook with validly signed deliveries of
every kind. No answer is a 5xx, every API and webhook 4xx carries the stable error shape, every page error is a
page without a traceback, and each delivery the hook stored is handled without raising."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import requests

from bench.api_fuzz import (
    WEBHOOK_SECRET,
    check_stored_deliveries,
    error_shape_problem,
    fuzz_api,
    fuzz_pages,
    fuzz_token,
    fuzz_webhook,
    handle_stored_deliveries,
    hook_payload,
    page_problem,
    seed_history,
    stored_page_values,
    stored_values,
    table,
)
from tests.conftest import fresh_redis
from tests.processes import clean_env, start_web
from tests.scratch_database import at_head

REDIS_URL = "redis://127.0.0.1:6379/2"  # this test's alone (test_soak_sample has 8, bench/api_fuzz.py 5)


def test_generated_requests_get_no_5xx_and_errors_of_one_shape(pg_database: str, tmp_path: Path) -> None:
    at_head(pg_database)
    run_ids = seed_history(pg_database, tmp_path)
    token = fuzz_token(pg_database)
    # The distributed form: enqueueing a run is accepted (202) there, where the embedded form answers 503.
    env = clean_env(tmp_path, KERNELWATCH_DATABASE_URL=pg_database, KERNELWATCH_REDIS_URL=fresh_redis(REDIS_URL),
                    KERNELWATCH_FOLLOW_UP="none", KERNELWATCH_GITHUB_WEBHOOK_SECRET=WEBHOOK_SECRET)
    with start_web(env, tmp_path) as web:
        api_url = f"{web.url}/api/v1"
        known = {**stored_values(api_url), "run_uid": run_ids[-1]}
        assert {"alert_id", "series_id", "base", "head"} <= set(known)
        tallies = fuzz_api(api_url, token, max_examples=3, known=known)
        values = stored_page_values(known, pg_database)
        assert values.ids["result_id"] and values.ids["finding_id"] and len(values.queries) > 3
        pages = fuzz_pages(web.url, token, max_examples=3, values=values)
        hooks, stored = fuzz_webhook(web.url, WEBHOOK_SECRET, max_examples=15)
        pinned = pinned_regressions(web.url, known)
        log = web.process.output()
    first_hook = next(iter(hooks.values()))
    check_stored_deliveries(pg_database, stored, first_hook)
    handle_stored_deliveries(pg_database, first_hook)

    failures = {label: t.failures for label, t in {**tallies, **pages, **hooks}.items() if t.failed}
    assert not failures, f"{table({**tallies, **pages, **hooks})}\n{failures}"
    assert sum(t.requests for t in tallies.values()) >= 100, table(tallies)
    assert sum(t.ok for t in tallies.values()) >= 10, table(tallies)  # the stored values got past the lookups
    assert len(tallies) >= 18  # every operation of the document
    assert len(pages) >= 10 and all(t.requests >= 3 for t in pages.values()), table(pages)  # every page route
    assert sum(t.ok for t in pages.values()) >= 20, table(pages)
    outcomes = sum((t.outcomes for t in hooks.values()), Counter())
    assert outcomes["ping"] and outcomes["ignored"] and outcomes["refused 400 invalid_input"], outcomes
    assert outcomes["refused 401 unauthorized"], outcomes  # every tenth signature wrong or missing
    assert not [problem for problem in pinned if problem], "\n".join(p for p in pinned if p)
    assert "unhandled error" not in log and "Traceback" not in log, log[-3000:]


def _signed(base_url: str, event: str, body: bytes, delivery: str | None = None) -> requests.Response:
    signature = "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return requests.post(f"{base_url}/hooks/github", data=body, timeout=30, headers={
        "X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": signature, "Content-Type": "application/json"})


def _with(event: str, path: str, value: Any) -> bytes:
    payload = hook_payload(event)
    node = payload
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return json.dumps(payload).encode()


def pinned_regressions(base_url: str, known: dict[str, Any]) -> list[str | None]:
    """The 5xx the fuzzing found (issue 18), each asked exactly: a problem string per one that is back, else None."""
    problems: list[str | None] = []
    # Pages: a query argument named like one of url_for's own keywords, handed on to url_for in a link.
    for url in (f"/commits/{known['head']}?_method=x", f"/commits/{known['head']}?endpoint=x",
                f"/compare?base={known['base']}&head={known['head']}&endpoint=x&_method=x"):
        page = requests.get(base_url + url, timeout=30)
        problem = page_problem(page.headers.get("content-type", ""), page.content, page.status_code)
        problems.append(f"{url}: {page.status_code}" if page.status_code != 200 or problem else None)
    # The webhook: the fields ``relevant`` reads of another type; NaN; a NUL in the delivery id; values in the
    # shape that no column holds (they were a 500 in the embedded form, where the handler runs before answering).
    cases = [("pull_request", _with("pull_request", "action", ["opened"]), None),
             ("pull_request", _with("pull_request", "label", ["x"]), None),
             ("issue_comment", _with("issue_comment", "comment", ["/kernelwatch run"]), None),
             ("issue_comment", _with("issue_comment", "issue", 7), None),
             ("pull_request", _with("pull_request", "pull_request.state", float("nan")), None),
             ("pull_request", json.dumps(hook_payload("pull_request")).encode(), "ab\x00c"),
             ("pull_request", _with("pull_request", "pull_request.head.sha", "a" * 41), None),
             ("pull_request", _with("pull_request", "pull_request.base.ref", "x\x00y"), None),
             ("pull_request", _with("pull_request", "pull_request.number", 2**31), None),
             ("pull_request", _with("pull_request", "installation.id", 2**63), None),
             ("pull_request", _with("pull_request", "pull_request.head.repo.full_name", ["acme/kernels"]), None)]
    for event, body, delivery in cases:
        answer = _signed(base_url, event, body, delivery)
        shape = error_shape_problem(answer.headers.get("content-type", ""), answer.content)
        problems.append(f"{event} {body[:120]!r}: {answer.status_code} {answer.content[:200]!r}"
                        if answer.status_code != 400 or shape else None)
    return problems


def test_the_error_shape_check_refuses_what_clients_could_not_parse() -> None:
    assert error_shape_problem("application/json", b'{"error":{"code":"not_found","message":"no run"}}') is None
    assert error_shape_problem("application/json",
                               b'{"error":{"code":"x","message":"y","details":{"missing_artifacts":[]}}}') is None
    assert error_shape_problem("text/html", b"<h1>Not Found</h1>") is not None
    assert error_shape_problem("application/json", b'{"message":"no"}') is not None
    assert error_shape_problem("application/json", b'{"error":{"code":1,"message":"y"}}') is not None
    assert error_shape_problem("application/json", b'{"error":{"code":"x","message":"y"},"extra":1}') is not None
    assert error_shape_problem("application/json", b'{"error":{"code":"x","message":"Traceback (most"}}') is not None


def test_the_page_check_refuses_tracebacks_and_errors_that_are_no_page() -> None:
    assert page_problem("text/html; charset=utf-8", b"<p>No series 7.</p>", 404) is None
    assert page_problem("text/html; charset=utf-8", b"<pre>Traceback (most recent call last):", 200) is not None
    assert page_problem("application/json", b'{"error": {}}', 400) is not None
    assert page_problem("application/json", b'{"status": "ok"}', 200) is None
