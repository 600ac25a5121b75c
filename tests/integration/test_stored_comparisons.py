"""Comparisons made on write, on both databases: a commit against the measured commit before it, stored whole and
found again by exactly what it compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from service.contract.manifest import Manifest
from service.pipeline.compare import compare_refs, compare_resolved, resolve
from service.pipeline.compare_page import SORTS, ComparePage, compare_page, compare_page_for
from service.pipeline.ingest import ingest_manifest
from service.pipeline.stored_comparisons import DEFAULT_PARAMS, store_comparison_for_run
from service.report.compare_table import from_json, to_json
from service.store.models import Commit, StoredComparison
from tests import builders

LEVELS = {"a": 1e-3, "b": 2e-3, "c": 4e-3}


def doc(position: int, slower: str | None = None, seed: int = 0, **overrides: Any) -> dict[str, Any]:
    rng = np.random.default_rng(seed * 100 + position)
    results = []
    for name, level in LEVELS.items():
        factor = 1.25 if name == slower else 1.0
        results.append(builders.result(name=name, samples=[float(level * factor * (1 + 0.005 * v))
                                                           for v in rng.standard_normal(10)]))
    return builders.manifest(position, results, **overrides)


def ingest(sessions: sessionmaker[Session], manifest: dict[str, Any]) -> int:
    with sessions.begin() as session:
        return ingest_manifest(session, Manifest.model_validate(manifest)).run_id


def ingest_rounds(sessions: sessionmaker[Session], manifest: dict[str, Any]) -> int:
    """Three runs of the manifest's commit (the replicates a verdict counts); the last run's id."""
    return [ingest(sessions, m) for m in builders.replicated(manifest)][-1]


def count(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count(StoredComparison.id))) or 0


def test_a_commit_is_stored_against_the_one_before_and_read_back_whole(sessions: sessionmaker[Session]) -> None:
    first = ingest_rounds(sessions, doc(0))
    with sessions.begin() as session:
        assert store_comparison_for_run(session, first) is None  # nothing before it
    second_doc = doc(1, slower="b")
    second = ingest_rounds(sessions, second_doc)
    with sessions.begin() as session:
        stored = store_comparison_for_run(session, second)
        assert stored is not None
        again = store_comparison_for_run(session, second)
        assert again is not None and again.id == stored.id  # the same runs: stored once
    assert count(sessions) == 1

    base_sha, head_sha = builders.commit(0)["sha"], second_doc["commit"]["sha"]
    with sessions() as session:
        base, head = resolve(session, base_sha[:8]), resolve(session, head_sha)
        read = compare_refs(session, base_sha[:8], head_sha)
        computed = compare_resolved(session, base, head, DEFAULT_PARAMS, stored=False)
        backwards = compare_resolved(session, head, base, DEFAULT_PARAMS)
    # Read, not computed (no pairs kept), and exactly what computing it gives, every interval included,
    # labelled with the reader's references.
    assert read.pairs == () and computed.pairs != ()
    document = to_json(read.report, read.base, read.head, read.notes)
    assert document == to_json(computed.report, computed.base, computed.head, computed.notes)
    assert document["base"]["ref"] == base_sha[:8] and document["summary"]["regression"] == 1
    assert all(row["ratio_ci_low"] is not None for row in document["benchmarks"])
    assert to_json(*from_json(document)[:1], read.base, read.head, from_json(document)[1]) == document
    assert backwards.pairs != ()  # the other way round was not stored: computed


def test_a_new_run_supersedes_and_the_parent_is_the_commit_measured_before(
        sessions: sessionmaker[Session]) -> None:
    ingest(sessions, doc(0))
    ingest(sessions, doc(1, branch="feature"))  # measured, but on another branch: not what main compares with
    head = doc(2, slower="c")
    run = ingest(sessions, head)
    with sessions.begin() as session:
        stored = store_comparison_for_run(session, run)
        assert stored is not None
        parent = session.scalars(select(Commit).filter_by(sha=builders.commit(0)["sha"])).one()
        assert stored.base_commit_id == parent.id
        old_key = stored.key
    rerun = ingest(sessions, doc(2, slower="c", seed=7))  # a second run of commit 2
    with sessions.begin() as session:
        newer = store_comparison_for_run(session, rerun)
        assert newer is not None and newer.key != old_key
        assert len(newer.header["head"]["runs"]) == 2
    assert count(sessions) == 1  # the comparison with fewer runs is gone


def test_the_commit_page_reads_what_was_stored_on_write(sessions: sessionmaker[Session], database_url: str,
                                                         tmp_path: Path) -> None:
    """Through the embedded pipeline: submitting runs stores each commit's comparison (the queue's follow-up),
    and the commit page and the API show that comparison, not one computed on request."""
    from service.app import create_app
    from service.settings import Settings

    app = create_app(Settings(home=tmp_path, database_url=database_url, follow_up=()))
    ctx = app.extensions["kernelwatch"]
    for position in range(3):
        for manifest in builders.replicated(doc(position, slower="a" if position == 2 else None)):
            ctx.submit(manifest)
    assert count(ctx.sessions) == 2  # commits 1 and 2, each against the one before
    head_sha = builders.commit(2)["sha"]
    with ctx.sessions() as session:
        base, head = resolve(session, builders.commit(1)["sha"]), resolve(session, head_sha)
        assert compare_resolved(session, base, head, DEFAULT_PARAMS).pairs == ()
    page = app.test_client().get(f"/commits/{head_sha}").get_data(as_text=True)
    assert "regression" in page
    api = app.test_client().get(f"/api/v1/compare?base={builders.commit(1)['sha']}&head={head_sha}").json
    assert api["summary"]["regression"] == 1 and api["benchmarks"][0]["ratio_ci_low"] is not None


def as_served(page: ComparePage) -> dict[str, Any]:
    out = page.outcome
    return to_json(page.report, out.base, out.head, out.notes, rows=page.rows)


def test_a_stored_page_is_the_computed_page(sessions: sessionmaker[Session]) -> None:
    """Every order and filter a page offers gives the same rows, intervals, counts and geomeans whether the
    comparison is read from its stored rows or computed on request."""
    rng = np.random.default_rng(3)
    docs = []
    for position in (0, 1):
        results = []
        for i in range(12):
            factor = {2: 1.3, 5: 0.7, 8: 1.1}.get(i, 1.0) if position else 1.0
            level = 1e-3 * (i + 1) * factor
            results.append(builders.result(name=f"k{i:02d}", samples=[float(level * (1 + 0.004 * v))
                                                                      for v in rng.standard_normal(10)]))
        docs.append(builders.manifest(position, results))
    ingest_rounds(sessions, docs[0])
    run = ingest_rounds(sessions, docs[1])
    with sessions.begin() as session:
        assert store_comparison_for_run(session, run) is not None
    with sessions() as session:
        base, head = resolve(session, docs[0]["commit"]["sha"]), resolve(session, docs[1]["commit"]["sha"])
        computed = compare_resolved(session, base, head, DEFAULT_PARAMS, stored=False)
        for sort in SORTS:
            for verdicts in (None, {"regression", "improvement"}, {"unchanged"}):
                for offset, limit in ((0, 5), (5, 5), (0, 100)):
                    stored = compare_page_for(session, base, head, DEFAULT_PARAMS, verdicts, sort, offset, limit)
                    fresh = compare_page(computed, verdicts, sort, offset, limit)
                    assert stored.outcome.pairs == ()  # read, not computed
                    what = (sort, verdicts, offset)
                    # As the API serves them (twelve significant digits, as stored).
                    assert as_served(stored) == as_served(fresh), what
                    assert (stored.total, stored.next_offset) == (fresh.total, fresh.next_offset), what
                    assert stored.report.compared == fresh.report.compared == 12


def test_runs_of_one_commit_compared_at_once_store_one_comparison(pg_database: str) -> None:
    """The runs of one commit land as several uploads, each compared on write in a worker of its own: two that found
    no stored comparison of the same runs both inserted it, and the second failed on its unique key (the soak's
    worker log, 2026-12-07). Four at once on PostgreSQL, each in its own transaction, as the workers run them."""
    import threading

    from service.pipeline.stored_comparisons import store_comparisons
    from service.store.db import make_engine, make_session_factory, upgrade

    upgrade(pg_database)
    engine = make_engine(pg_database)
    try:
        sessions = make_session_factory(engine)
        ingest_rounds(sessions, doc(0))
        runs = [ingest(sessions, m) for m in builders.replicated(doc(1, slower="b"))]
        start, failures = threading.Barrier(4), []

        def compare(run_id: int) -> None:
            start.wait()
            try:
                store_comparisons(sessions, [run_id])
            except Exception as exc:  # noqa: BLE001  (what a worker's task would have raised)
                failures.append(exc)

        threads = [threading.Thread(target=compare, args=(runs[i % len(runs)],)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert failures == [] and count(sessions) == 1
    finally:
        engine.dispose()
