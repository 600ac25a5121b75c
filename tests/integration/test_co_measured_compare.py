"""A comparison of two commits keeps the runs made in sessions both were measured in, on both databases: the demo's
A/A check once failed on a commit whose confirmation had added rounds made in other (faster) minutes than any run
of the commit before it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import NotComparable, NotFound
from service.contract.manifest import Manifest
from service.pipeline.compare import compare_refs
from service.pipeline.ingest import ingest_manifest
from service.pipeline.stored_comparisons import store_comparison_for_run
from service.store.db import unit_of_work
from service.store.models import Run
from tests import builders
from tests.api_client import Api


def run(position: int, level: float, session: str | None, index: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    samples = [float(level * (1 + 0.01 * v)) for v in rng.standard_normal(10)]
    overrides: dict[str, Any] = {"round": {"session": session, "index": index}} if session else {}
    return builders.manifest(position, [builders.result(samples=samples)], **overrides)


def ingest(sessions: sessionmaker[Session], docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        with sessions.begin() as session:
            ingest_manifest(session, Manifest.model_validate(doc))


def test_runs_made_apart_from_the_other_side_are_left_out(sessions: sessionmaker[Session], api: Api) -> None:
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
    # The page reads the same sides: 3 runs each, not every run of each commit (it said 3 and 7).
    page = api.client.get(f"/compare?base={base_sha}&head={head_sha}").get_data(as_text=True)
    assert page.count("· 3 runs</span>") == 2 and "· 7 runs" not in page, page
    assert "4 of head&#39;s 7 runs" in page or "4 of head's 7 runs" in page
    assert '<td class="num muted runs">3+3</td>' in page  # the runs=B+H the note speaks of, on the row
    commit_page = api.client.get(f"/commits/{head_sha}").get_data(as_text=True)
    assert "(3 + 3 runs compared)" in commit_page, commit_page

    # The runs a user names are compared as named: here every run of the head, the confirmation's included, which
    # is a comparison across the host's minutes, so each session counts as one run (the demo's three rounds one,
    # each confirmation round one: five for the head, one for the base) and the note says so.
    named = ",".join(doc["run_id"] for doc in head + confirm)
    with sessions() as session:
        everything = compare_refs(session, base_sha, named)
    assert everything.report.rows[0].head.estimate.runs == 5  # type: ignore[union-attr]
    assert everything.report.rows[0].base.estimate.runs == 1  # type: ignore[union-attr]
    [apart] = [n for n in everything.notes if "measured apart" in n]
    assert "base 1 session(s) of 3 run(s), head 5 session(s) of 7 run(s)" in apart


def test_sides_measured_apart_are_compared_session_by_session(sessions: sessionmaker[Session]) -> None:
    """Each commit of a range run (`run --commits A..B --rounds 2`) is a session of its own, whose runs agree among
    themselves more than with the next commit's. Read as runs, a docstring-only commit measured that way was
    +11 % slower (p = 0.010): on runs shaped like those (each session's two runs 1 % apart, the sessions 11 %
    apart, the history's commits one session each) the comparison is now of one session a side, which on a host
    whose sessions vary is no evidence; it says why and how to measure the two together. Sides that share a
    session are compared run by run, without the note."""
    history = [run(10 + c, level * (1 + 0.01 * i), f"history{c:09d}", i, seed=40 + 2 * c + i)
               for c, level in enumerate((1.0e-3, 1.1e-3, 0.95e-3, 1.05e-3)) for i in range(2)]
    base = [run(0, level, "rangebase0000001", i, seed=i) for i, level in enumerate((1.00e-3, 1.01e-3))]
    head = [run(1, level, "rangehead0000001", i, seed=10 + i) for i, level in enumerate((1.11e-3, 1.12e-3))]
    together = [run(2, 1e-3, "together00000001", i % 2, seed=20 + i) for i in range(2)] + [
        run(3, 1e-3, "together00000001", i % 2, seed=30 + i) for i in range(2)]
    ingest(sessions, history + base + head + together)
    with sessions() as session:
        apart = compare_refs(session, base[0]["commit"]["sha"], head[0]["commit"]["sha"])
        shared = compare_refs(session, together[0]["commit"]["sha"], together[2]["commit"]["sha"])
    [row] = apart.report.rows
    assert row.verdict == "inconclusive" and 1.09 < (row.ratio or 0) < 1.13, row
    assert row.base.estimate.runs == row.head.estimate.runs == 1  # type: ignore[union-attr]
    [note] = [n for n in apart.notes if "measured apart" in n]
    assert "base 1 session(s) of 2 run(s)" in note and "--commit BASE --commit HEAD" in note
    assert not [n for n in shared.notes if "measured apart" in n]
    assert shared.report.rows[0].base.estimate.runs == 2  # type: ignore[union-attr]


def test_a_change_measured_apart_is_found_against_the_spread_between_sessions(
        sessions: sessionmaker[Session]) -> None:
    """Sessions measured apart still decide where there are enough of them and the history shows how far sessions
    of one commit land apart: three sessions a side of a 2x slowdown, against a commit measured in four sessions
    10 % apart at most, is a regression, and the spread it was judged by is the sessions' (their runs, 1 % apart
    inside each session, would have been a floor ten times too low)."""
    history = [run(20, level * (1 + 0.01 * i), f"again{s:011d}", i, seed=60 + 2 * s + i)
               for s, level in enumerate((1.0e-3, 1.1e-3, 0.97e-3, 1.04e-3)) for i in range(2)]
    base = [run(0, level * (1 + 0.01 * i), f"base{s:012d}", i, seed=80 + 2 * s + i)
            for s, level in enumerate((1.0e-3, 1.08e-3, 0.96e-3)) for i in range(2)]
    head = [run(1, 2 * level * (1 + 0.01 * i), f"head{s:012d}", i, seed=90 + 2 * s + i)
            for s, level in enumerate((1.02e-3, 0.95e-3, 1.06e-3)) for i in range(2)]
    ingest(sessions, history + base + head)
    with sessions() as session:
        outcome = compare_refs(session, base[0]["commit"]["sha"], head[0]["commit"]["sha"])
    [row] = outcome.report.rows
    assert row.verdict == "regression" and 1.8 < (row.ratio or 0) < 2.2, row
    assert row.base.estimate.runs == row.head.estimate.runs == 3  # type: ignore[union-attr]


def test_where_sessions_agree_as_their_runs_do_runs_are_compared(sessions: sessionmaker[Session]) -> None:
    """A history whose sessions of one commit land no farther apart than their runs (runs 8 % apart inside each
    session, sessions about as far) shows no session effect: sides measured apart are compared run by run there,
    and the note says so, so a 30 % slowdown measured in one session of three runs a side is still found."""
    pairs = ((1.00e-3, 1.08e-3), (1.08e-3, 1.00e-3), (0.97e-3, 1.11e-3))  # each session's two runs, 8-14 % apart
    history = [run(30 + c, level, f"h{c:03d}s{s:010d}", i, seed=100 + 10 * c + 3 * s + i)
               for c in range(3) for s, levels in enumerate(pairs) for i, level in enumerate(levels)]
    base = [run(0, level, "samebase00000001", i, seed=200 + i) for i, level in enumerate((1.0e-3, 0.93e-3, 1.07e-3))]
    head = [run(1, 1.3 * level, "samehead00000001", i, seed=210 + i)
            for i, level in enumerate((1.02e-3, 0.95e-3, 1.05e-3))]
    ingest(sessions, history + base + head)
    with sessions() as session:
        outcome = compare_refs(session, base[0]["commit"]["sha"], head[0]["commit"]["sha"])
    [row] = outcome.report.rows
    assert row.base.estimate.runs == row.head.estimate.runs == 3  # type: ignore[union-attr]
    assert row.verdict == "regression", row
    [note] = [n for n in outcome.notes if "measured apart" in n]
    assert "the runs are compared as replicates" in note



def test_a_confirmation_of_one_benchmark_leaves_every_other_benchmark_compared(
        sessions: sessionmaker[Session]) -> None:
    """A range run makes each commit a session of its own, and a confirmation then measures the flagged benchmark
    alone, for the commit and its parent, in a session of both. Compared, the flagged benchmark is compared on the
    confirmation's runs (the one session both sides share), and every other benchmark on its own runs, measured
    apart. Deciding that for the sides as a whole once kept only the confirmation's runs, which hold no matmul:
    the matmul row vanished from the table, neither compared nor said missing."""
    def both(position: int, level: float, session: str, index: int, seed: int) -> dict[str, Any]:
        rng = np.random.default_rng(seed)
        results = [builders.result(suite=suite, name=name, samples=[float(level * scale * (1 + 0.01 * v))
                                                                    for v in rng.standard_normal(10)])
                   for suite, name, scale in (("softmax", "softmax_rows", 1.0), ("matmul", "matmul_dense", 3.0))]
        return builders.manifest(position, results, round={"session": session, "index": index})

    base = [both(0, 1.0e-3, "rangebase0000002", i, seed=300 + i) for i in range(2)]
    head = [both(1, 1.0e-3, "rangehead0000002", i, seed=310 + i) for i in range(2)]
    confirm = [run(position, 1e-3 * (2.0 if position else 1.0), "confirmboth00001", i, seed=320 + 2 * i + position)
               for i in range(3) for position in (0, 1)]  # softmax alone, 2x slower in the head
    ingest(sessions, base + head + confirm)
    with sessions() as session:
        outcome = compare_refs(session, base[0]["commit"]["sha"], head[0]["commit"]["sha"])
    rows = {row.key.suite: row for row in outcome.report.rows}
    assert set(rows) == {"softmax", "matmul"}, outcome.report.rows
    softmax, matmul = rows["softmax"], rows["matmul"]
    assert softmax.base.estimate.runs == softmax.head.estimate.runs == 3  # type: ignore[union-attr]
    assert softmax.verdict == "regression" and 1.9 < (softmax.ratio or 0) < 2.1, softmax
    # matmul: the range's runs, one session a side (each commit's two runs are one replicate there).
    assert matmul.base is not None and matmul.head is not None and matmul.verdict != "regression", matmul
    assert len(outcome.base.runs) == 5 and len(outcome.head.runs) == 5  # every run compares some benchmark
    [note] = [n for n in outcome.notes if "measured apart" in n]
    assert note.startswith("for 1 of 2 benchmarks, base and head were measured apart"), note
    # The sides' totals (5+5 runs) are no row's: the note says which rows were narrowed, not a count of its own.
    [narrowed] = [n for n in outcome.notes if "interleaved in the sessions both sides share" in n]
    assert narrowed.startswith("for 1 of 2 benchmarks some runs were made in sessions"), narrowed
    assert "each row's runs=B+H" in narrowed and "5+5" not in narrowed


def test_a_working_copy_is_compared_with_its_commit(sessions: sessionmaker[Session], api: Api) -> None:
    """`run --working-tree` (uncommitted edits, stored under HEAD's sha in an environment of its own) against runs of
    the commit itself: the same hardware and toolchain with other code, so compared, where it was refused as
    "base and head ran in different environments"; the edit's 1.5x is a regression."""
    rng = np.random.default_rng(7)

    def runs(level: float, working_tree: str, position: int = 0) -> list[dict[str, Any]]:
        return [builders.manifest(position, [builders.result(samples=[float(level * (1 + 0.01 * v))
                                                                      for v in rng.standard_normal(10)])],
                                  environment=builders.environment(working_tree=working_tree))
                for level in (level, level * 1.01, level * 0.99)]

    clean, edited = runs(1e-3, ""), runs(1.5e-3, "ab" * 32)
    ingest(sessions, clean + edited)
    with sessions() as session:
        outcome = compare_refs(session, ",".join(d["run_id"] for d in clean), ",".join(d["run_id"] for d in edited))
    [row] = outcome.report.rows
    assert row.verdict == "regression" and 1.45 < (row.ratio or 0) < 1.55, row
    assert any("runs of a working copy" in note for note in outcome.notes), outcome.notes

    # A commit's runs hold its working copy's too (stored under its sha): a commit names its own code's runs, so
    # those are never pooled with the commit's own runs, nor said to be another environment of the commit.
    parent = runs(1e-3, "", position=1)
    ingest(sessions, parent)
    with sessions() as session:
        by_commit = compare_refs(session, parent[0]["commit"]["sha"], clean[0]["commit"]["sha"])
    [row] = by_commit.report.rows
    assert row.head is not None and row.head.estimate is not None and row.head.estimate.runs == 3, row
    assert row.verdict != "regression" and 0.95 < (row.ratio or 0) < 1.05, row
    assert len(by_commit.head.runs) == 3 and not any("also ran on" in n for n in by_commit.notes), by_commit.notes
    # The commit against its working copy's runs, by their ids: the edit against the commit. (The commit's side held
    # the working copy's runs, and its environment was the one both sides shared: the edit against itself.)
    with sessions() as session:
        edit = compare_refs(session, clean[0]["commit"]["sha"], ",".join(d["run_id"] for d in edited))
    [row] = edit.report.rows
    assert set(edit.base.runs) == {d["run_id"] for d in clean}, edit.base.runs
    assert row.verdict == "regression" and 1.45 < (row.ratio or 0) < 1.55, row
    # A commit whose only runs are of working copies has no side by commit: said, with the runs to name instead.
    lone = runs(2e-3, "cd" * 32, position=2)
    ingest(sessions, lone)
    with sessions() as session, pytest.raises(NotFound, match="no runs of its own code, only of working copies"):
        compare_refs(session, parent[0]["commit"]["sha"], lone[0]["commit"]["sha"])
    # Nor is it a measured commit on the commits page, whose link to it was a 404; and a commit's runs there are its
    # own code's (3, not the 6 stored under its sha).
    listed = {c["sha"]: c["runs"] for c in api.client.get("/api/v1/commits").get_json()["commits"]}
    assert listed == {parent[0]["commit"]["sha"]: 3, clean[0]["commit"]["sha"]: 3}, listed
    page = api.client.get("/commits").get_data(as_text=True)
    assert lone[0]["commit"]["sha"][:10] not in page and clean[0]["commit"]["sha"][:10] in page


def test_a_commit_measured_only_by_follow_ups_has_its_other_benchmarks_unmeasured_not_missing(
        sessions: sessionmaker[Session]) -> None:
    """A bisection or confirmation measures the benchmark it follows alone: at a culprit whose only runs are those,
    the suite's other benchmarks read as "missing" (and `--fail-on any` failed on them), or "new" on the commit
    after it. They are left out, and said to be unmeasured."""
    rng = np.random.default_rng(3)

    def result(name: str, level: float) -> dict[str, Any]:
        return builders.result(name=name, samples=[float(level * (1 + 0.01 * v)) for v in rng.standard_normal(10)])

    base = [builders.manifest(0, [result("a", 1e-3), result("b", 2e-3)]) for _ in range(3)]
    follow_ups = [builders.manifest(1, [result("a", 1.5e-3)], trigger=trigger) for trigger in ("bisect", "confirm")]
    ingest(sessions, base + follow_ups)
    with sessions() as session:
        outcome = compare_refs(session, base[0]["commit"]["sha"], follow_ups[0]["commit"]["sha"])
    assert [row.key.name for row in outcome.report.rows] == ["a"], outcome.report.rows
    assert outcome.report.count("missing") == 0
    [note] = [n for n in outcome.notes if "were not measured" in n]
    assert note.startswith("1 benchmark(s) were not measured at the head"), note
    # A commit with a run of the whole suite as well: a benchmark absent there is missing, as before.
    ingest(sessions, [builders.manifest(1, [result("a", 1.5e-3)])])
    with sessions() as session:
        outcome = compare_refs(session, base[0]["commit"]["sha"], follow_ups[0]["commit"]["sha"])
    assert outcome.report.count("missing") == 1 and not any("were not measured" in n for n in outcome.notes)


def test_a_pull_requests_rounds_are_counted_in_its_newest_session_per_environment(
        sessions: sessionmaker[Session]) -> None:
    """A rerun at the same head (`/kernelwatch run`) found the earlier scheduling's four rounds landed and reported
    after its own first run (then edited the report as the rest came): the hook counts the newest session's."""
    from service.pipeline.compare import resolve
    from service.pipeline.pull_requests import _rounds_landed
    from service.store.runs import run_origins

    def rounds(session_name: str, count: int, env: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return [builders.manifest(0, [builders.result()], round={"session": session_name, "index": i},
                                  **({"environment": env} if env else {}))
                for i in range(count)]

    ingest(sessions, rounds("first-scheduling", 4))
    sha = builders.sha_for("demo-0")
    with sessions() as session:
        assert _rounds_landed(run_origins(session, resolve(session, sha).run_ids)) == 4
    ingest(sessions, rounds("rerun-scheduling", 1))
    with sessions() as session:
        assert _rounds_landed(run_origins(session, resolve(session, sha).run_ids)) == 1  # was 5: reported at once
    ingest(sessions, rounds("rerun-scheduling", 3))
    other = builders.environment(device_kind="other host")
    ingest(sessions, rounds("on-other-hardware", 2, other))  # another hardware's task, halfway
    with sessions() as session:
        assert _rounds_landed(run_origins(session, resolve(session, sha).run_ids)) == 2


def test_a_toolchain_change_on_the_same_hardware_is_compared_and_said(sessions: sessionmaker[Session],
                                                                      api: Api) -> None:
    """A pull request that moves its JAX pin (environment = "commit"): base and head share the hardware and settings,
    not the toolchain. Compared (the question its author asks), with what changed named; refused as "different
    environments" before, and a `ci` gate passed it unmeasured. Another CPU is still another machine: refused."""
    rng = np.random.default_rng(11)

    def runs(level: float, position: int, **environment: Any) -> list[dict[str, Any]]:
        return [builders.manifest(position, [builders.result(samples=[float(level * (1 + 0.01 * v))
                                                                      for v in rng.standard_normal(10)])],
                                  environment=builders.environment(**environment))
                for level in (level, level * 1.01, level * 0.99)]

    old = runs(1e-3, 0)
    new = runs(1.5e-3, 1, jax_version="0.10.3", jaxlib_version="0.10.3")
    elsewhere = runs(1e-3, 2, cpu_model="Other CPU")
    ingest(sessions, old + new + elsewhere)
    with sessions() as session:
        outcome = compare_refs(session, old[0]["commit"]["sha"], new[0]["commit"]["sha"])
        [row] = outcome.report.rows
        assert row.verdict == "regression" and 1.45 < (row.ratio or 0) < 1.55, row
        [note] = [n for n in outcome.notes if "toolchain" in n]
        assert "jax 0.10.2 → 0.10.3" in note and "jaxlib 0.10.2 → 0.10.3" in note, note
        assert "of the code and the toolchain together" in note and "working" not in note
        with pytest.raises(NotComparable, match="CPU Test CPU → Other CPU"):
            compare_refs(session, old[0]["commit"]["sha"], elsewhere[0]["commit"]["sha"])
    # Two toolchains at the head against one at the base: which is the base's counterpart would be a guess, so
    # neither is paired (the head's runs of the base's own toolchain, where there are any, are compared instead).
    both = runs(1e-3, 3, jax_version="0.10.4", jaxlib_version="0.10.4") + runs(1e-3, 3, jax_version="0.10.5",
                                                                                 jaxlib_version="0.10.5")
    ingest(sessions, both)
    with sessions() as session, pytest.raises(NotComparable, match="different environments"):
        compare_refs(session, old[0]["commit"]["sha"], both[0]["commit"]["sha"])

    # On write and on the commit page, the commit that moved the pin is compared with the one before it (which ran
    # the old toolchain), as its page said "the first commit measured" before; the ambiguous one says why not.
    with sessions() as session:
        run_ids = {doc["run_id"]: run.id for doc in new + both
                   for run in session.scalars(select(Run).where(Run.run_uid == doc["run_id"]))}
    with unit_of_work(sessions) as session:
        stored = store_comparison_for_run(session, run_ids[new[0]["run_id"]])
        assert stored is not None and "toolchain" in " ".join(stored.header["notes"]), stored
        assert store_comparison_for_run(session, run_ids[both[0]["run_id"]]) is None
    page = api.client.get(f"/commits/{new[0]['commit']['sha']}").get_data(as_text=True)
    assert "Against its measured parent" in page and old[0]["commit"]["sha"][:10] in page
    assert "jax 0.10.2 → 0.10.3" in page and "regression" in page
    page = api.client.get(f"/commits/{both[0]['commit']['sha']}").get_data(as_text=True)
    assert "Not compared with the commit before it: base and head ran in different environments" in page, page
