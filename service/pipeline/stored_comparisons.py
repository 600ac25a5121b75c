"""Comparisons made on write: when a run lands, its commit is compared with the measured commit before it and the
whole comparison (every row with its interval) is stored, so that reads of it (the commit page, GET /compare of
the same two points) only load it. Nothing is analysed on the read path where the question was foreseeable; a
comparison of two points nobody foresaw is still computed on request (service/pipeline/compare.py).

A stored comparison is found by what it compared: each side's run ids and the parameters, digested. Runs never
change once stored, so a comparison found by its key is never stale; when a commit gains a run (another
environment, a re-run), the next comparison has another key and replaces the one it supersedes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import NotComparable, NotFound
from service.detect.compare import CompareParams
from service.pipeline.compare import comparable_parent, compare_resolved, comparison_key, side_for_commit
from service.report.compare_table import to_json
from service.store import comparisons as stored_comparisons
from service.store.commit_compare import commit_info
from service.store.commits import commit_of
from service.store.db import unit_of_work
from service.store.locks import lock_commit
from service.store.models import Commit, Repository, Run, StoredComparison

DEFAULT_PARAMS = CompareParams()
SIZE_UNKNOWN = 1e300  # a change with no ratio (from a zero median, or a side missing): larger than any other


def change_size(ratio: float | None) -> float:
    """How large a change is, either way: |log ratio|, what "largest change first" orders by."""
    return abs(math.log(ratio)) if ratio is not None and ratio > 0 else SIZE_UNKNOWN


def store_comparison_for_run(session: Session, run_id: int,
                             params: CompareParams = DEFAULT_PARAMS) -> StoredComparison | None:
    """Compare the run's commit (all its runs) with the commit measured before it on its branch and store the
    result; None when there is nothing before it in a shared environment. Idempotent: the same runs on both sides are
    stored once, and the comparisons this one supersedes (the same two commits, fewer runs) are removed."""
    run = session.get(Run, run_id)
    if run is None:
        return None
    commit = session.get(Commit, run.commit_id)
    assert commit is not None
    lock_commit(session, commit.id)  # one comparison of a commit stored at a time: read, then insert, as one
    repository = session.get(Repository, commit.repository_id)
    assert repository is not None
    try:
        head = side_for_commit(session, commit.sha, commit, repository.name)
    except NotFound:
        return None  # a working copy's run, at a commit with no run of its own code: no point of its history
    # The parent the commit page shows (service/store/commit_compare.py), so that the page finds this one.
    info = commit_info(session, repository.name, commit.sha)
    assert info is not None
    parent_sha = comparable_parent(session, info, head)
    if parent_sha is None:
        return None
    base_commit = commit_of(session, repository.id, parent_sha)
    assert base_commit is not None  # the commit page's measured parent is a stored commit
    try:
        base = side_for_commit(session, base_commit.sha, base_commit, repository.name)
    except NotFound:
        return None
    key = comparison_key(base.run_ids, head.run_ids, params)
    existing = stored_comparisons.stored_comparison(session, key)
    if existing is not None:
        return existing
    try:
        outcome = compare_resolved(session, base, head, params, stored=False)
    except NotComparable:
        return None  # the parent ran this hardware under several toolchains, none of them the commit's own
    document = to_json(outcome.report, outcome.base, outcome.head, outcome.notes)
    stored_comparisons.delete_comparisons_of(session, base_commit.id, commit.id)
    stored = StoredComparison(key=key, base_commit_id=base_commit.id, head_commit_id=commit.id,
                              header={k: v for k, v in document.items() if k != "benchmarks"},
                              created_at=datetime.now(UTC))
    session.add(stored)
    session.flush()
    rows = [{"comparison_id": stored.id, "position": i, "verdict": r["verdict"], "size": change_size(r["ratio"]),
             "ratio": r["ratio"], "p_value": r["p_value"], "row": r} for i, r in enumerate(document["benchmarks"])]
    stored_comparisons.insert_rows(session, rows)
    session.flush()
    return stored


def store_comparisons(sessions: sessionmaker[Session], run_ids: Sequence[int]) -> int:
    """``store_comparison_for_run`` for each run, each in its own transaction (the task's body); returns how
    many were stored or found. A database that cannot be reached raises Transient (``unit_of_work``): the task
    retries, and what was stored before it stays stored."""
    done = 0
    for run_id in run_ids:
        with unit_of_work(sessions) as session:
            done += store_comparison_for_run(session, run_id) is not None
    return done
