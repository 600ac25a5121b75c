"""PostgreSQL at scale: ingest through the real path against COPY, and the dashboard's API latency against the bare
SQL it runs (issue 6).

Data: --series series x --commits commits, --samples samples per result (default 5,000 x 200 x 10: 1,000,000
results). A runner runs the suite at one commit on one kind of hardware and uploads one manifest, so the series
are split over --environments environments (default 5: a fleet with five hardware kinds, each running a suite of
1,000 benchmark configurations): one run per commit and environment, 1,000 runs of 1,000 results each.

1. A scratch database ``kw_bench_<random>`` (dropped at the end unless --keep), brought to head by the real
   migrations (``service.store.db.upgrade``).
2. Ingest: every manifest, as the JSON bytes a runner POSTs, through ``submit_manifest`` (validation, one
   transaction per run, the same code as ``POST /api/v1/runs`` and ``Context.submit``) with a queue that drops
   the follow-up tasks: detection is deferred, not timed. Against it, the same rows (the ``result`` table's
   columns, summaries computed beforehand) ``COPY``-ed into a bare table of the same shape (no index, no key).
3. Findings planted on a fifth of the series at --alert-commits commits and grouped into alerts by the real
   grouping (``group_findings``), so the alerts inbox is not empty.
4. Latency: --requests requests per endpoint through Flask's test client against ``create_app``: series,
   alerts inbox (untriaged), commit list (limit 50), compare (two adjacent commits). Each request's SQL is
   captured once (SQLAlchemy's ``before_cursor_execute``), and the same statements with the same parameters are
   replayed with psycopg on one connection, timed the same way: the bare SQL. Target: p95 < 150 ms each.

    python bench/ingest_and_query.py [--series 5000] [--commits 200] [--samples 10] [--environments 5]
                                     [--requests 50] [--quick] [--keep] [--admin-url URL]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import timing
from sqlalchemy import text
from timing import COMPUTED, STORED, Timed, capture_on, compared_heads, comparisons_stored, time_requests

from service.app import create_app
from service.pipeline.alerts import group_findings
from service.pipeline.submit import submit_manifest
from service.settings import Settings
from service.store.db import make_engine, make_session_factory, unit_of_work, upgrade
from service.store.models import Commit, Finding, Series

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
TARGET_P95_MS = 150.0
REPOSITORY = "kw-bench"


class DeferredQueue:
    """Drops follow-up tasks: detection and parsing are deferred, outside what is timed."""

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        pass

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        pass

    def enqueue_runs(self, orders: Sequence[Any]) -> None:
        pass

    def enqueue_compare(self, run_ids: Sequence[int]) -> None:
        pass

    def enqueue_github_delivery(self, delivery_id: int) -> None:
        pass

    def enqueue_suite_runs(self, runs: Sequence[Any]) -> None:
        pass

    def enqueue_pr_reports(self, pull_request_ids: Sequence[int]) -> None:
        pass


def sha_of(position: int) -> str:
    return hashlib.sha1(f"kw-bench commit {position}".encode()).hexdigest()


def environment(index: int) -> dict[str, Any]:
    return {"backend": "gpu", "device_kind": f"bench-accelerator-{index}", "device_count": 1,
            "jax_version": "0.4.35", "jaxlib_version": "0.4.35", "xla_flags": "", "cpu_model": "bench",
            "host_isa": "x86_64", "python_version": "3.11"}


def benchmark(index: int) -> tuple[str, str, dict[str, Any]]:
    kernels = ("matmul", "softmax", "attention", "layernorm", "conv", "reduce", "scan", "gather", "rmsnorm",
               "topk")
    return "bench", kernels[index % len(kernels)], {"size": 64 * (1 + index // len(kernels)), "dtype": "bf16"}


def manifests(args: argparse.Namespace) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(commit position, environment, manifest) in the order runners would upload them: commit by commit."""
    per_env = args.series // args.environments
    rng = np.random.default_rng(args.seed)
    base = rng.uniform(1e-4, 1e-2, size=(args.environments, per_env))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for position in range(args.commits):
        authored = start + timedelta(hours=position)
        commit = {"sha": sha_of(position), "parents": [sha_of(position - 1)] if position else [],
                  "author": "bench <bench@example.com>", "authored_at": authored.isoformat(),
                  "subject": f"commit {position}", "position": position}
        for env in range(args.environments):
            samples = base[env][:, None] * (1 + 0.01 * rng.standard_normal((per_env, args.samples)))
            results = []
            for b, row in enumerate(samples.tolist()):
                suite, name, params = benchmark(b)
                results.append({"suite": suite, "name": name, "params": params, "metric": "wall_time", "unit": "s",
                                "direction": "lower_is_better", "status": "ok", "samples": row,
                                "compile_time_s": 0.5, "flops": 1e9, "bytes_accessed": 1e6})
            yield position, env, {
                "format_version": 1, "run_id": f"bench-{position:05d}-{env:02d}",
                "repository": {"name": REPOSITORY, "url": "https://example.com/kw-bench.git"},
                "commit": commit, "branch": "main", "trigger": "push", "status": "complete",
                "started_at": authored.isoformat(), "finished_at": (authored + timedelta(minutes=10)).isoformat(),
                "environment": environment(env), "results": results,
            }


@contextmanager
def scratch_database(admin_url: str, keep: bool) -> Iterator[str]:
    name = f"kw_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    print(f"Scratch database {name}" + (" (kept: --keep)" if keep else " (dropped at the end)"))
    try:
        yield name
    finally:
        if not keep:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_url(admin_url: str, name: str, driver: str = "") -> str:
    base = admin_url.rsplit("/", 1)[0]
    if driver:
        base = base.replace("postgresql://", f"postgresql+{driver}://", 1)
    return f"{base}/{name}"


def ingest(url: str, args: argparse.Namespace) -> tuple[float, float, int]:
    """Every manifest through submit_manifest; returns seconds in submit, seconds generating the manifests, and
    the number of results."""
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    queue = DeferredQueue()
    in_submit = generating = 0.0
    results = 0
    runs_per_commit = args.environments
    total_runs = args.commits * runs_per_commit
    mark = time.perf_counter()
    for index, (position, _env, manifest) in enumerate(manifests(args)):
        payload = json.dumps(manifest).encode()
        results += len(manifest["results"])
        started = time.perf_counter()
        generating += started - mark
        submit_manifest(sessions, queue, payload)
        mark = time.perf_counter()
        in_submit += mark - started
        if (index + 1) % max(1, total_runs // 10) == 0:
            print(f"  ingested {index + 1}/{total_runs} runs (commit {position}), {results:,} results, "
                  f"{results / in_submit:,.0f} results/s so far", flush=True)
    engine.dispose()
    return in_submit, generating, results


COPY_COLUMNS = ("id, run_id, series_id, status, message, samples, sample_count, median, mean, stddev, minimum, "
                "maximum, compile_time_s, flops, bytes_accessed, max_abs_error, cost")


def copy_baseline(url: str) -> float:
    """The stored result rows, read out with COPY TO (untimed), then COPY-ed into a bare table of the same
    shape (columns and types only: no key, no index, no constraint): the same rows, the floor of writing them."""
    with psycopg.connect(url) as conn:
        buffer: list[bytes] = []
        with conn.cursor() as cur, cur.copy(f"COPY result ({COPY_COLUMNS}) TO STDOUT") as copy:
            buffer.extend(bytes(block) for block in copy)
        conn.execute("CREATE TABLE bare_result (LIKE result)")
        conn.commit()
        started = time.perf_counter()
        with conn.cursor() as cur, cur.copy(f"COPY bare_result ({COPY_COLUMNS}) FROM STDIN") as copy:
            for block in buffer:
                copy.write(block)
        conn.commit()
        seconds = time.perf_counter() - started
        conn.execute("DROP TABLE bare_result")
        conn.commit()
    return seconds


def plant_findings(url: str, args: argparse.Namespace) -> tuple[int, int]:
    """A finding on every fifth series, at one of --alert-commits commits, grouped by the real grouping."""
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    rng = random.Random(args.seed)
    now = datetime.now(UTC)
    with unit_of_work(sessions) as session:
        commits = {c.position: c.id for c in session.query(Commit)}
        series_ids = [s for (s,) in session.query(Series.id).order_by(Series.id)]
        positions = sorted(rng.sample(range(5, args.commits - 5), min(args.alert_commits, args.commits - 10)))
        findings = []
        for n, sid in enumerate(series_ids[::5]):
            position = positions[n % len(positions)]
            regression = rng.random() < 0.8
            magnitude = rng.uniform(0.02, 0.3) * (1 if regression else -1)
            findings.append(Finding(
                series_id=sid, commit_id=commits[position], previous_commit_id=commits[position - 1],
                detector="bench", detector_version=1, kind="time",
                direction="regression" if regression else "improvement", magnitude=magnitude,
                confidence=rng.uniform(3, 20), value_before=1.0, value_after=1.0 + magnitude, created_at=now,
                attribution={}, p_value=rng.uniform(0, 0.005)))
        session.add_all(findings)
        session.flush()
        outcome = group_findings(session, [f.id for f in findings])
    engine.dispose()
    return len(findings), len(outcome.created)


def time_endpoints(url: str, sa_url: str, args: argparse.Namespace) -> list[Timed]:
    with tempfile.TemporaryDirectory(prefix="kw-bench-") as home:
        app = create_app(Settings(home=Path(home), database_url=sa_url, follow_up=()))
        gc.freeze()  # as service/wsgi.py does once the app is built
        ctx = app.extensions["kernelwatch"]
        capture = capture_on(ctx.engine)
        client = app.test_client()
        with ctx.engine.connect() as conn:
            series_ids = [r[0] for r in conn.execute(text("SELECT id FROM series ORDER BY id"))]
        rng = random.Random(args.seed + 1)
        n = args.requests
        pairs = [rng.randrange(args.commits - 1) for _ in range(n)]
        endpoints: list[tuple[str, Callable[[int], str]]] = [
            ("GET /api/v1/series/<id>", lambda i: f"/api/v1/series/{rng.choice(series_ids)}"),
            ("GET /api/v1/alerts?state=untriaged", lambda i: "/api/v1/alerts?state=untriaged"),
            ("GET /api/v1/commits?limit=50", lambda i: "/api/v1/commits?limit=50"),
            ("GET /api/v1/compare?base=&head=",
             lambda i: f"/api/v1/compare?base={sha_of(pairs[i])}&head={sha_of(pairs[i] + 1)}"),
        ]
        out = []
        with psycopg.connect(url) as bare:
            for label, path_of in endpoints:
                count = n if not label.startswith("GET /api/v1/compare") else min(n, args.compare_requests)
                paths = [path_of(i) for i in range(count)]
                computed = COMPUTED if label.startswith("GET /api/v1/compare") else ""
                timed = time_requests(client, capture, bare, label + computed, paths, warmup=1 if count < n else 3)
                queries = statistics.mean(len(s) for s in timed.statements)
                print(f"  {label}: {count} requests, {queries:.1f} statements per request, "
                      f"{len(timed.last_body):,} bytes of JSON", flush=True)
                out.append(timed)
                if label.startswith("GET /api/v1/compare"):
                    # Again with the comparisons stored on write, as the write path now stores every commit's
                    # against the one before (this database was loaded with that follow-up deferred).
                    with comparisons_stored(ctx.sessions, compared_heads(paths)):
                        stored = time_requests(client, capture, bare, label + STORED, paths, warmup=1)
                    print(f"  {stored.label}: {count} requests, {len(stored.last_body):,} bytes of JSON", flush=True)
                    out.append(stored)
        ctx.close()
    return out


def sample_storage(url: str) -> None:
    """What the samples cost per result as stored (json), against compact forms, on a sample of rows."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT avg(pg_column_size(samples)), "
            "avg(pg_column_size(ARRAY(SELECT json_array_elements_text(samples)::float8))), "
            "avg(pg_column_size(ARRAY(SELECT json_array_elements_text(samples)::float4))), count(*) "
            "FROM result TABLESAMPLE SYSTEM (1)").fetchone()
        assert row is not None
        table = conn.execute("SELECT pg_total_relation_size('result'), pg_relation_size('result'), "
                             "(SELECT count(*) FROM result)").fetchone()
        assert table is not None
    as_json, as_f8, as_f4, sampled = row
    total, heap, count = table
    print(f"Samples per result ({sampled:,} rows sampled): json {float(as_json):.0f} bytes, float8[] "
          f"{float(as_f8):.0f} bytes, float4[] {float(as_f4):.0f} bytes")
    print(f"result table: {count:,} rows, heap {heap / 2**20:,.0f} MiB ({heap / max(count, 1):.0f} bytes/row), "
          f"with indexes and TOAST {total / 2**20:,.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=5000)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--environments", type=int, default=5, help="hardware kinds; one run per commit each")
    parser.add_argument("--alert-commits", type=int, default=50, help="commits where findings are planted")
    parser.add_argument("--requests", type=int, default=50, help="requests per endpoint")
    parser.add_argument("--compare-requests", type=int, default=10,
                        help="requests to compare (each compares every benchmark of two commits)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="500 series x 40 commits, 20 requests")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument("--admin-url", default=ADMIN_URL)
    parser.add_argument("--reuse", metavar="DATABASE", default=None,
                        help="time the endpoints on a database kept by an earlier --keep run (same sizes and seed): "
                             "no ingest, no planting")
    args = parser.parse_args()
    if args.quick:
        args.series, args.commits, args.requests, args.alert_commits = 500, 40, 20, 10
    if args.series % args.environments:
        parser.error("--series must be a multiple of --environments")
    if args.commits < 20:
        parser.error("--commits must be at least 20")
    per_env = args.series // args.environments
    print(f"Data: {args.series:,} series ({args.environments} environments x {per_env:,} benchmarks) x "
          f"{args.commits} commits x {args.samples} samples = {args.series * args.commits:,} results in "
          f"{args.environments * args.commits:,} runs of {per_env:,} results")
    if args.reuse:
        url, sa_url = database_url(args.admin_url, args.reuse), database_url(args.admin_url, args.reuse, "psycopg")
        print(f"Reusing database {args.reuse}: latency only")
        upgrade(sa_url)  # a migration added since it was kept (an index) applies to it too
        report(time_endpoints(url, sa_url, args))
        return
    with scratch_database(args.admin_url, args.keep) as name:
        url = database_url(args.admin_url, name)
        sa_url = database_url(args.admin_url, name, "psycopg")
        started = time.perf_counter()
        upgrade(sa_url)
        print(f"Migrated to head in {time.perf_counter() - started:.1f} s")

        print("Ingest through submit_manifest (JSON -> validation -> one transaction per run; detection deferred)")
        ingest_s, generating_s, results = ingest(sa_url, args)
        copy_s = copy_baseline(url)
        ingest_rate, copy_rate = results / ingest_s, results / copy_s
        print(f"  (generating the manifests' JSON, untimed: {generating_s:.1f} s)")
        print(f"Ingest: {results:,} results in {ingest_s:.1f} s = {ingest_rate:,.0f} results/s "
              f"({ingest_rate * args.samples:,.0f} samples/s)")
        print(f"COPY into a bare table of the same shape: {copy_s:.1f} s = {copy_rate:,.0f} rows/s")
        print(f"Ingest is {copy_rate / ingest_rate:.1f}x slower than COPY "
              f"(ingest/COPY = {ingest_rate / copy_rate:.3f})")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        sample_storage(url)

        planted, alerts = plant_findings(sa_url, args)
        print(f"Planted {planted:,} findings at {args.alert_commits} commits, grouped into {alerts} alerts")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")

        print(f"Latency, {args.requests} requests per endpoint (Flask test client on create_app, then the same SQL "
              f"replayed with psycopg)")
        timings = time_endpoints(url, sa_url, args)
    report(timings)


def report(timings: list[Timed]) -> None:
    timing.report(timings, TARGET_P95_MS, width=49)


if __name__ == "__main__":
    main()
