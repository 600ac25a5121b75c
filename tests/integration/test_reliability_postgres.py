"""PostgreSQL goes away under a live `kernelwatch serve` while a runner submits: every submission made while it is
down gets a prompt 503 in the stable error shape (never a 500, never a hang), the same submission succeeds once
the database is back, and nothing is half-written: every stored run has all of its results, each run once.

The database is a private cluster of this test (the machine's PostgreSQL serves every other test)."""

from __future__ import annotations

import json
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from service.pipeline.tokens import create_token
from service.store.db import make_engine, make_session_factory, unit_of_work
from service.store.models import Result, Run
from tests import builders
from tests.private_servers import PrivatePostgres
from tests.processes import clean_env, kernelwatch, start_web

RESULTS_PER_RUN = 6


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    # Not under pytest's tmp_path: the postgres user must be able to reach the data directory.
    pg = PrivatePostgres(Path(tempfile.mkdtemp(prefix="kw-reliability-pg-")))
    pg.start()
    try:
        yield pg
    finally:
        pg.destroy()


def post(url: str, token: str, doc: dict[str, Any], timeout: float = 30) -> tuple[int, Any, float]:
    request = urllib.request.Request(url, data=json.dumps(doc).encode(), method="POST")
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw, status = response.read(), response.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    return status, json.loads(raw), time.monotonic() - start


def run_doc(position: int) -> dict[str, Any]:
    results = [builders.result(name=f"kernel_{i}", samples=[1e-3 * (1 + 0.01 * k) for k in range(10)])
               for i in range(RESULTS_PER_RUN)]
    return builders.manifest(position, results)


def assert_error_shape(body: Any) -> None:
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"]), body
    assert "Traceback" not in json.dumps(body)


def test_submissions_get_503_while_postgres_is_down_and_succeed_after(
    tmp_path: Path, private_pg: PrivatePostgres
) -> None:
    env = clean_env(tmp_path, KERNELWATCH_DATABASE_URL=private_pg.url)
    kernelwatch("db", "upgrade", env=env, timeout=120)
    engine = make_engine(private_pg.url)
    sessions = make_session_factory(engine)
    with unit_of_work(sessions) as s:
        token = create_token(s, "runner-cpu", ["submit"])[1]

    with start_web(env, tmp_path) as web:
        base = f"{web.url}/api/v1"
        first = run_doc(0)
        status, body, _ = post(f"{base}/runs", token, first)
        assert status == 201, body

        # A runner keeps submitting through the outage, retrying on 503 only, as the uploader does.
        docs = [run_doc(p) for p in range(1, 9)]
        seen: list[tuple[int, float, Any]] = []
        done = threading.Event()

        def runner() -> None:
            for doc in docs:
                for _ in range(200):
                    status, body, took = post(f"{base}/runs", token, doc)
                    seen.append((status, took, body))
                    if status != 503:
                        break
                    time.sleep(0.2)
                time.sleep(0.3)
            done.set()

        thread = threading.Thread(target=runner, daemon=True)
        thread.start()
        time.sleep(0.8)
        private_pg.stop()

        # While it is down, a submission is refused at once, as "unavailable", in the stable shape.
        pending = run_doc(20)
        for _ in range(3):
            status, body, took = post(f"{base}/runs", token, pending)
            assert status == 503, body
            assert body["error"]["code"] == "unavailable"
            assert_error_shape(body)
            assert took < 5, f"a 503 should be prompt, took {took:.1f} s"
        with pytest.raises(urllib.error.HTTPError) as health:
            urllib.request.urlopen(f"{base}/health", timeout=5)
        assert health.value.code == 503
        time.sleep(1.5)
        private_pg.start()

        # Back: the very submission that was refused is stored, on its first try after the restart.
        status, body, _ = post(f"{base}/runs", token, pending)
        assert status == 201, body
        assert done.wait(60), "the runner did not finish its submissions"
        thread.join()

    statuses = [status for status, _, _ in seen]
    assert set(statuses) <= {200, 201, 503}, [(s, b) for s, _, b in seen if s not in (200, 201, 503)]
    assert 503 in statuses, "the runner's submissions never met the outage"
    for status, took, body in seen:
        assert took < 10, f"a submission took {took:.1f} s ({status})"
        if status == 503:
            assert body["error"]["code"] == "unavailable"
            assert_error_shape(body)

    # Nothing lost, nothing doubled, nothing half-written.
    expected = {d["run_id"] for d in [first, *docs, pending]}
    with sessions() as s:
        runs = {uid: count for uid, count in s.execute(
            select(Run.run_uid, func.count(Result.id)).outerjoin(Result, Result.run_id == Run.id).group_by(Run.id))}
        assert set(runs) == expected
        assert all(count == RESULTS_PER_RUN for count in runs.values()), runs
        assert s.scalar(select(func.count(Result.id))) == RESULTS_PER_RUN * len(expected)
    engine.dispose()
