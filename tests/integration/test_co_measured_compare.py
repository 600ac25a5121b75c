"""A comparison of two commits keeps the runs made in sessions both were measured in, on both databases: the demo's
A/A check once failed on a commit whose confirmation had added rounds made in other (faster) minutes than any run
of the commit before it."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from service.contract.manifest import Manifest
from service.pipeline.compare import compare_refs
from service.pipeline.ingest import ingest_manifest
from tests import builders


def run(position: int, level: float, session: str | None, index: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    samples = [float(level * (1 + 0.01 * v)) for v in rng.standard_normal(10)]
    overrides: dict[str, Any] = {"round": {"session": session, "index": index}} if session else {}
    return builders.manifest(position, [builders.result(samples=samples)], **overrides)


def ingest(sessions: sessionmaker[Session], docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        with sessions.begin() as session:
            ingest_manifest(session, Manifest.model_validate(doc))


def test_runs_made_apart_from_the_other_side_are_left_out(sessions: sessionmaker[Session]) -> None:
    demo = "demo0000session"
    # The same code, measured in the demo's three rounds at the host's usual level (the runs a little apart) ...
    levels = (1.00e-3, 1.12e-3, 0.93e-3)
    base = [run(0, level, demo, i, seed=i) for i, level in enumerate(levels)]
    head = [run(1, level * 1.01, demo, i, seed=10 + i) for i, level in enumerate(levels)]
    # ... and then four more rounds of the head alone (with its own child, as a confirmation makes them), in
    # minutes when the host ran twice as fast.
    confirm = [run(1, 0.5e-3 * f, f"confirm{i}aaaaaaa", 0, seed=20 + i) for i, f in enumerate((1.0, 1.03, 0.98, 1.01))]
    ingest(sessions, base + head + confirm)
    base_sha, head_sha = base[0]["commit"]["sha"], head[0]["commit"]["sha"]

    with sessions() as session:
        outcome = compare_refs(session, base_sha, head_sha)
    [row] = outcome.report.rows
    assert row.verdict not in ("regression", "improvement"), row
    assert row.head is not None and row.head.estimate is not None and row.head.estimate.runs == 3
    assert row.base is not None and row.base.estimate is not None and row.base.estimate.runs == 3
    assert 0.9 < row.ratio < 1.1
    assert len(outcome.head.runs) == 3 and len(outcome.base.runs) == 3
    [note] = [n for n in outcome.notes if "sessions the other side was not measured in" in n]
    assert "4 of head's 7 runs" in note and "3+3 runs" in note

    # The runs a user names are compared as named: here every run of the head, the confirmation's included, which
    # is a comparison across the host's minutes and says so by its verdict.
    named = ",".join(doc["run_id"] for doc in head + confirm)
    with sessions() as session:
        everything = compare_refs(session, base_sha, named)
    assert everything.report.rows[0].head.estimate.runs == 7  # type: ignore[union-attr]


def test_sides_measured_apart_are_compared_with_a_warning(sessions: sessionmaker[Session]) -> None:
    """Each commit of a range run (`run --commits A..B --rounds 2`) is a session of its own: its rounds agree among
    themselves more than with the next commit's (an unchanged softmax read +11 %, p = 0.010, that way). The
    comparison says the sides were measured apart, and how to measure them together; sides that share a session
    get no such note."""
    base = [run(0, level, "rangebase0000001", i, seed=i) for i, level in enumerate((1.00e-3, 1.01e-3))]
    head = [run(1, level, "rangehead0000001", i, seed=10 + i) for i, level in enumerate((1.11e-3, 1.12e-3))]
    together = [run(2, 1e-3, "together00000001", i % 2, seed=20 + i) for i in range(2)] + [
        run(3, 1e-3, "together00000001", i % 2, seed=30 + i) for i in range(2)]
    ingest(sessions, base + head + together)
    with sessions() as session:
        apart = compare_refs(session, base[0]["commit"]["sha"], head[0]["commit"]["sha"])
        shared = compare_refs(session, together[0]["commit"]["sha"], together[2]["commit"]["sha"])
    [note] = [n for n in apart.notes if "measured apart" in n]
    assert "--commit BASE --commit HEAD" in note
    assert not [n for n in shared.notes if "measured apart" in n]

