"""Request latency against the bare SQL each request ran: shared by ingest_and_query.py (API endpoints) and
page_latency.py (dashboard pages), with the comparisons both store on write for their compare requests.

Each request goes through Flask's test client with the statements SQLAlchemy sends captured
(``before_cursor_execute``); afterwards the same statements with the same parameters are replayed with psycopg on
one connection, timed the same way (``fetchall``, JSON columns decoded as psycopg does). The replay is the peer:
what the database alone costs for that request, so the ratio is what the application adds on top.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from flask.testing import FlaskClient
from sqlalchemy import Engine, delete, event, func, select
from sqlalchemy.orm import Session, sessionmaker

from service.pipeline.stored_comparisons import store_comparisons
from service.store.models import Commit, Run, StoredComparison


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


class Capture:
    """The statements (and parameters) SQLAlchemy sends while ``on`` is set."""

    def __init__(self) -> None:
        self.on = False
        self.statements: list[tuple[str, Any]] = []

    def __call__(self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                 executemany: bool) -> None:
        if self.on:
            self.statements.append((statement, parameters))


def capture_on(engine: Engine) -> Capture:
    capture = Capture()
    event.listen(engine, "before_cursor_execute", capture)
    return capture


@dataclass
class Timed:
    """One label's requests: the app's milliseconds and the bare SQL's, per request, in request order."""

    label: str
    app_ms: list[float]
    sql_ms: list[float]
    statements: list[list[tuple[str, Any]]]
    last_body: bytes


def time_requests(client: FlaskClient, capture: Capture, bare: psycopg.Connection[Any], label: str,
                  paths: Sequence[str], warmup: int) -> Timed:
    """GET every path (after ``warmup`` untimed GETs of the first ones), then replay each request's SQL.

    Anything but 200 ends the benchmark: a timed error page says nothing about the page."""
    for path in paths[:warmup]:
        client.get(path)
    # Each request timed with its SQL captured (appending to a list: noise next to a request).
    captured: list[list[tuple[str, Any]]] = []
    app_ms = []
    body = b""
    for path in paths:
        capture.statements, capture.on = [], True
        started = time.perf_counter()
        response = client.get(path)
        body = response.get_data()
        app_ms.append((time.perf_counter() - started) * 1e3)
        capture.on = False
        if response.status_code != 200:
            sys.exit(f"{path}: HTTP {response.status_code}: {response.get_data(as_text=True)[:500]}")
        captured.append(capture.statements)
    sql_ms = []
    for statements in captured:
        started = time.perf_counter()
        with bare.cursor() as cur:
            for statement, parameters in statements:
                cur.execute(statement, parameters)
                if cur.description is not None:
                    cur.fetchall()
        bare.rollback()
        sql_ms.append((time.perf_counter() - started) * 1e3)
    return Timed(label, app_ms, sql_ms, captured, body)


def _ratio(app: float, sql: float) -> float:
    return app / sql if sql > 0 else float("inf")  # a request that ran no SQL at all


COMPUTED = " (computed)"  # a label's mark: a comparison nobody stored, computed on request
STORED = " (stored)"  # the same requests once the write path has stored their comparisons


def report(timings: Sequence[Timed], target_ms: float, what: str = "endpoint", side: str = "API",
           width: int = 38) -> bool:
    """The p50/p95 table against the bare SQL and the target; True when every p95 is under it. Requests marked
    COMPUTED are judged apart: they are what an ad-hoc comparison costs when nothing was stored for it, not a
    read of stored data, which is what the target is about."""
    print()
    print(f"{what:{width}} {side + ' p50':>8} {side + ' p95':>8} {'SQL p50':>8} {'SQL p95':>8} {'p50 x':>6} "
          f"{'p95 x':>6}  p95 < {target_ms:.0f} ms")
    met, computed_met, computed = True, True, False
    for timed in timings:
        a50, a95 = percentile(timed.app_ms, 50), percentile(timed.app_ms, 95)
        s50, s95 = percentile(timed.sql_ms, 50), percentile(timed.sql_ms, 95)
        ok = a95 < target_ms
        if timed.label.endswith(COMPUTED):
            computed, computed_met = True, computed_met and ok
        else:
            met &= ok
        print(f"{timed.label:{width}} {a50:8.1f} {a95:8.1f} {s50:8.1f} {s95:8.1f} {_ratio(a50, s50):6.1f} "
              f"{_ratio(a95, s95):6.1f}  "
              f"{'met' if ok else 'MISSED'}")
    print(f"(milliseconds; x: {side} time over the bare SQL's)")
    plural = {"endpoint": "Every endpoint's", "page": "Every page's"}.get(what, f"Every {what}'s")
    print(f"{plural} p95 under {target_ms:.0f} ms, reading what is stored: {'met' if met else 'NOT met'}")
    if computed:
        print(f"Comparisons nobody stored, computed on request{COMPUTED}: "
              f"{'met' if computed_met else 'NOT met'}")
    return met


def compared_heads(paths: Sequence[str]) -> set[str]:
    """The head commits the commit and compare pages' requests compare (with the measured commit before)."""
    return {m.group(1) for p in paths for m in [re.search(r"(?:/commits/|head=)([0-9a-f]{40})", p)] if m}


@contextmanager
def comparisons_stored(sessions: sessionmaker[Session], heads: set[str]) -> Iterator[int]:
    """Each head commit compared with the measured commit before it and stored, by the write path's own task
    body (``store_comparisons``), as it would have been had these runs landed after comparisons-on-write
    existed; untimed. The rows this adds are deleted afterwards, so the database is left as it was found."""
    with sessions() as session:
        before = set(session.scalars(select(StoredComparison.id)))
        runs = list(session.scalars(select(func.min(Run.id)).join(Commit, Commit.id == Run.commit_id)
                                    .where(Commit.sha.in_(heads)).group_by(Run.commit_id)))
    started = time.perf_counter()
    store_comparisons(sessions, runs)
    with sessions() as session:
        added = set(session.scalars(select(StoredComparison.id))) - before
    print(f"  stored the comparisons of {len(runs)} commits with their measured parents in "
          f"{time.perf_counter() - started:.0f} s (untimed; {len(added)} rows, deleted at the end)", flush=True)
    try:
        yield len(added)
    finally:
        with sessions.begin() as session:
            session.execute(delete(StoredComparison).where(StoredComparison.id.in_(added)))
