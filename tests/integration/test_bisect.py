"""Bisection and confirmation with real runs: a planted slowdown inside a range of commits that were never
measured is isolated by measuring midpoints, the finding moves to it, and re-running base and head interleaved
confirms it. Embedded form (SQLite, in-process queue, local CPU runner): the code paths a worker runs."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from runners.local import RunRequest, run_commits
from service.context import Context
from service.contract import parse_manifest
from service.detect.confirmation import ConfirmParams
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.bisect import FollowUpPolicy, RunOrder, confirm_task_id
from service.pipeline.detection import detect_and_follow_up, follow_up
from service.pipeline.ingest import ingest_manifest
from service.pipeline.submit import submit_manifest
from service.settings import load_settings
from service.store.db import make_engine, make_session_factory, unit_of_work, upgrade
from service.store.models import BisectJob, Commit, Finding, Result, Run, Series
from service.store.queries import all_findings
from tests import builders
from tests.gitrepo import commit_all, suite_repo
from tests.scratch_database import at_head

# A kernel whose work is REPEAT chained matmuls: the planted commit makes it 32x (0.6 against 20 ms a call on a quiet
# host here), far beyond what a busy shared machine does to a run, so the test checks the bisection, not the weather.
# With 8x the work (5 ms) it failed once in CI on a host running twice as slow as usual: a run of the old code took
# 1.5 ms, runs of the new 4.0-4.2 ms, and three runs on each side were no change point.
KERNEL = '''
import jax
import jax.numpy as jnp
import numpy as np

from runners.suite import Case, benchmark

REPEAT = 1


@jax.jit
def work(x):
    return jax.lax.fori_loop(0, REPEAT * 8, lambda i, v: jnp.tanh(v @ x), x)


@benchmark(suite="planted", params=[{"n": 128}])
def chained(n: int) -> Case:
    x = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32) / n
    return Case(fn=work, args=(x,))
'''
PLANTED = 5




def make_repository(root: Path) -> tuple[Path, list[str]]:
    """Ten commits on main; the one at index PLANTED multiplies the kernel's work by 32."""
    repo = root / "planted"
    module = suite_repo(repo, KERNEL, module="work")
    shas = []
    for index in range(10):
        if index == PLANTED:
            module.write_text(KERNEL.replace("REPEAT = 1", "REPEAT = 32"))
        (repo / "NOTES").write_text(f"change {index}\n")
        shas.append(commit_all(repo, f"change {index}" + (" (planted)" if index == PLANTED else "")))
    return repo, shas


# timing: its verdicts come from real runs, so it runs alone, not beside the parallel tests (Makefile). The tests
# below it play the runner with seeded samples: they run with the parallel ones.
@pytest.mark.timing
def test_bisection_isolates_the_planted_commit_and_confirmation_agrees(tmp_path: Path) -> None:
    repo, shas = make_repository(tmp_path)
    settings = dataclasses.replace(load_settings({"KERNELWATCH_HOME": str(tmp_path / "home")}),
                                   follow_up=("bisect", "confirm"))
    ctx = Context.create(settings)  # creates the home
    upgrade(settings.effective_database_url)
    try:
        # Measure three commits before the planted one and three after it, interleaved; 3 to 6 never are.
        measured_first = (0, 1, 2, 7, 8, 9)
        requests = [RunRequest(repo=repo, rev=shas[i], samples=10, branch="main", capture_dir=None)
                    for i in measured_first]
        for manifests in run_commits(requests, settings.worktree_dir):
            for manifest in manifests:
                ctx.submit(manifest)  # detection and every follow-up run happen inside this call

        with ctx.sessions() as s:
            history = [(shas.index(sha), trigger, status, median) for sha, trigger, status, median in s.execute(
                select(Commit.sha, Run.trigger, Result.status, Result.median).join(Run, Run.commit_id == Commit.id)
                .join(Result, Result.run_id == Run.id).order_by(Run.id))]
            jobs = {j.purpose: j for j in s.scalars(select(BisectJob))}
            findings = s.scalars(select(Finding).where(Finding.kind == "time")).all()
            culprits = {s.get(Commit, f.commit_id).sha for f in findings}  # type: ignore[union-attr]
        evidence = (history, {p: j.message for p, j in jobs.items()})

        assert set(jobs) == {"bisect", "confirm"}, evidence
        bisect, confirm = jobs["bisect"], jobs["confirm"]
        assert bisect.state == "done" and bisect.culprit_sha == shas[PLANTED], evidence
        # Midpoints only: commit 4 (old level), then 5 (new): two runs; 3 and 6 are never needed.
        assert bisect.runs_requested == [shas[4], shas[5]], evidence
        assert {i for i, *_ in history} == {0, 1, 2, 4, 5, 7, 8, 9}
        assert culprits == {shas[PLANTED]}, evidence
        (finding,) = findings
        assert s.get(Commit, finding.previous_commit_id).sha == shas[4]  # type: ignore[union-attr]
        assert finding.direction == "regression" and finding.magnitude > 2
        assert confirm.state == "done" and confirm.culprit_sha == shas[PLANTED], evidence
        assert confirm.message is not None and confirm.message.startswith("confirmed"), evidence
        with ctx.sessions() as s:
            (view,) = [f for f in all_findings(s) if f.kind == "time"]
        assert view.confirmation == "confirmed" and view.flags_commit and view.confidence_label == "confirmed"
        triggers = [t for _, t, *_ in history]
        assert triggers.count("bisect") == 2 and triggers.count("confirm") >= 2
        # The verdict counts runs, one per round a side, every round landed whole before it was decided.
        rounds = [i for i, t, *_ in history if t == "confirm"].count(PLANTED)
        assert [i for i, t, *_ in history if t == "confirm"].count(4) == rounds, evidence
        assert confirm.message.endswith(f"runs={rounds}+{rounds}"), evidence
        assert len(confirm.runs_requested) == 2 * rounds, evidence
    finally:
        ctx.close()


# --- The confirmation's bookkeeping, with the runner played by the test (fast, both database backends) ---------

FAKE_POSITIONS = 12
FAKE_STEP = 6  # the commit at this position is twice as slow as those before it


class PlayedQueue:
    """Detection and its follow-ups as the in-process queue runs them (detection.detect_and_follow_up), with the run
    orders kept for the test to play the runner with."""

    def __init__(self, sessions: sessionmaker[Session], repos_dir: Path) -> None:
        self.sessions, self.repos_dir = sessions, repos_dir
        self.policy = FollowUpPolicy(bisect=False, confirm=True)
        self.orders: list[RunOrder] = []
        self.detecting = True

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        if self.detecting:
            detect_and_follow_up(self.sessions, self, series_ids, EDivisiveDetector(), None, self.policy,
                                 self.repos_dir)

    def enqueue_runs(self, orders: Sequence[RunOrder]) -> None:
        self.orders += orders

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        pass

    def enqueue_compare(self, run_ids: Sequence[int]) -> None:
        pass

    def enqueue_github_delivery(self, delivery_id: int) -> None:
        pass

    def enqueue_suite_runs(self, runs: Sequence[Any]) -> None:
        pass

    def enqueue_pr_reports(self, pull_request_ids: Sequence[int]) -> None:
        pass


def _run_samples(level: float, rng: np.random.Generator) -> list[float]:
    """One run's 15 samples: the run's own offset (10 % between runs) shared by samples that agree to 1 %."""
    return list(level * 1e-3 * math.exp(0.1 * rng.standard_normal()) * np.exp(0.01 * rng.standard_normal(15)))


def _level(position: int) -> float:
    return 2.0 if position >= FAKE_STEP else 1.0


def _submit(sessions: sessionmaker[Session], queue: PlayedQueue, position: int, rng: np.random.Generator,
            run_id: str, trigger: str = "push") -> None:
    submit_manifest(sessions, queue, builders.manifest(
        position, [builders.result(samples=_run_samples(_level(position), rng))], run_id=run_id, trigger=trigger))


def _play(sessions: sessionmaker[Session], queue: PlayedQueue, order: RunOrder, rng: np.random.Generator,
          runs: slice = slice(None)) -> None:
    """What a runner does with an order (its ``runs``): a run per commit, named after the task id
    (runners/worker.py), each uploaded (and detected, and followed up) as it comes."""
    positions = {builders.sha_for(f"demo-{p}"): p for p in range(FAKE_POSITIONS)}
    uid = order.task_id.replace("-", "")
    for index, sha in list(enumerate(order.shas))[runs]:
        _submit(sessions, queue, positions[sha], rng, uid if index == 0 else f"{uid}-c{index}", "confirm")


def _history(sessions: sessionmaker[Session], queue: PlayedQueue, rng: np.random.Generator) -> int:
    """One push run per commit (no commit run twice: no stored spread between runs), detected once."""
    queue.detecting = False
    for position in range(FAKE_POSITIONS):
        _submit(sessions, queue, position, rng, f"push{position:04d}")
    queue.detecting = True
    with sessions() as s:
        (series_id,) = s.scalars(select(Series.id).where(Series.metric == "wall_time")).all()
    queue.enqueue_detect([series_id])
    return series_id


def _confirm_jobs(sessions: sessionmaker[Session]) -> list[tuple[int, str, str | None, list[str]]]:
    with sessions() as s:
        return [(j.id, j.state, j.message, list(j.runs_requested)) for j in
                s.scalars(select(BisectJob).where(BisectJob.purpose == "confirm").order_by(BisectJob.id))]


def _play_to_the_end(sessions: sessionmaker[Session], queue: PlayedQueue, rng: np.random.Generator,
                     job_id: int) -> int:
    """Play the job's orders until it asks for none; each time its round's first run alone lands, the job must
    wait for the second (no decision, no order). Returns the rounds played."""
    good, bad = builders.sha_for(f"demo-{FAKE_STEP - 1}"), builders.sha_for(f"demo-{FAKE_STEP}")
    played = 0
    while queue.orders:
        (order,) = queue.orders
        queue.orders = []
        assert order.job_id == job_id and order.trigger == "confirm"
        assert order.task_id == confirm_task_id(job_id, played)
        # ABBA: base first in even rounds, head first in odd ones.
        assert order.shas == ([good, bad] if played % 2 == 0 else [bad, good]), (played, order.shas)
        _play(sessions, queue, order, rng, slice(0, 1))
        assert queue.orders == [] and _confirm_jobs(sessions)[-1][1] == "running", "decided on half a round"
        _play(sessions, queue, order, rng, slice(1, None))
        played += 1
    return played


def test_confirmation_groups_its_own_runs_and_waits_for_each_round(sessions: sessionmaker[Session],
                                                                    tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    queue = PlayedQueue(sessions, tmp_path / "repos")
    _history(sessions, queue, rng)
    ((job_id, state, _, _),) = _confirm_jobs(sessions)
    assert state == "running" and len(queue.orders) == 1
    # A confirmation run at the base commit that is not this job's (another job's task): never one of its runs.
    queue.detecting = False
    _submit(sessions, queue, FAKE_STEP - 1, rng, "confirm_999999_0", "confirm")
    queue.detecting = True
    rounds = _play_to_the_end(sessions, queue, rng, job_id)
    ((_, state, message, requested),) = _confirm_jobs(sessions)
    assert state == "done" and message is not None, message
    # One run a side and no stored spread cannot decide; a 2x change under 10 % noise takes a few rounds.
    assert 2 <= rounds <= ConfirmParams().max_rounds and message.startswith("confirmed"), message
    assert message.endswith(f"runs={rounds}+{rounds}") and "n=" not in message, message
    assert len(requested) == 2 * rounds


def test_a_finding_recreated_after_its_confirmation_was_cancelled_is_confirmed(sessions: sessionmaker[Session],
                                                                              tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    queue = PlayedQueue(sessions, tmp_path / "repos")
    series_id = _history(sessions, queue, rng)
    ((first, _, _, _),) = _confirm_jobs(sessions)
    (round_one,) = queue.orders
    queue.orders = []
    _play(sessions, queue, round_one, rng)  # one run a side, no spread known: a second round is ordered
    (in_flight,) = queue.orders
    queue.orders = []
    # The change point goes (what detection does when a change no longer stands: its finding is deleted), the
    # follow-up cancels the confirmation, and detection finds the change again.
    with unit_of_work(sessions) as s:
        s.execute(delete(Finding).where(Finding.series_id == series_id))
    follow_up(sessions, queue, [series_id], queue.policy, queue.repos_dir)
    assert [(j, state) for j, state, *_ in _confirm_jobs(sessions)] == [(first, "cancelled")] and not queue.orders
    queue.enqueue_detect([series_id])
    with sessions() as s:
        assert s.scalars(select(Finding).where(Finding.series_id == series_id, Finding.kind == "time")).all()
    jobs = _confirm_jobs(sessions)
    assert [state for _, state, *_ in jobs] == ["cancelled", "running"], jobs
    second = jobs[-1][0]
    assert [o.task_id for o in queue.orders] == [confirm_task_id(second, 0)]
    # The cancelled job's round still in flight lands now: those runs are not the new job's.
    pending, queue.orders = queue.orders, []
    _play(sessions, queue, in_flight, rng)
    assert queue.orders == [] and _confirm_jobs(sessions)[-1][1] == "running"
    queue.orders = pending
    rounds = _play_to_the_end(sessions, queue, rng, second)
    (_, state, message, _) = _confirm_jobs(sessions)[-1]
    assert state == "done" and message is not None and message.startswith("confirmed"), message
    assert message.endswith(f"runs={rounds}+{rounds}"), message


def test_an_open_confirmation_of_a_vanished_change_ends_when_the_series_newest_change_is_confirmed_already(
        sessions: sessionmaker[Session], tmp_path: Path) -> None:
    """A false alarm's confirmation was running when its change vanished; the series' newest change is then one
    confirmed before. That one's early return left the other confirmation "running" for good."""
    rng = np.random.default_rng(4)
    queue = PlayedQueue(sessions, tmp_path / "repos")
    series_id = _history(sessions, queue, rng)
    ((job_id, _, _, _),) = _confirm_jobs(sessions)
    _play_to_the_end(sessions, queue, rng, job_id)
    assert _confirm_jobs(sessions)[0][1] == "done"
    with unit_of_work(sessions) as s:  # the vanished change's confirmation, still open
        done = s.get(BisectJob, job_id)
        assert done is not None
        now = datetime.now(UTC)
        s.add(BisectJob(series_id=series_id, finding_id=None, repository_id=done.repository_id,
                        good_commit_sha=builders.sha_for("demo-1"), bad_commit_sha=builders.sha_for("demo-2"),
                        hardware=done.hardware, state="running", purpose="confirm", runs_requested=[],
                        created_at=now, updated_at=now))
    follow_up(sessions, queue, [series_id], queue.policy, queue.repos_dir)
    (_, first, _, _), (_, second, message, _) = _confirm_jobs(sessions)
    assert (first, second) == ("done", "cancelled") and "moved" in (message or ""), message
    assert not queue.orders


def _gapped_history(sessions: sessionmaker[Session], tmp_path: Path,
                    rng: np.random.Generator) -> tuple[PlayedQueue, int]:
    """Push runs of every commit but the three around the step, detected: a finding with three commits to bisect."""
    queue = PlayedQueue(sessions, tmp_path / "repos")
    queue.policy = FollowUpPolicy(bisect=False, confirm=False)  # detection alone; the test steps the bisection
    queue.detecting = False
    for position in [p for p in range(FAKE_POSITIONS) if not FAKE_STEP - 1 <= p <= FAKE_STEP + 1]:
        _submit(sessions, queue, position, rng, f"push{position:04d}")
    queue.detecting = True
    with sessions() as s:
        (series_id,) = s.scalars(select(Series.id).where(Series.metric == "wall_time")).all()
    queue.enqueue_detect([series_id])
    return queue, series_id


def _bisection(sessions: sessionmaker[Session], series_id: int) -> tuple[
        Callable[[], list[RunOrder]], Callable[[], tuple[str, str | None, list[str]]]]:
    """A step of the series' bisection (what an upload does), and the job's state, message and requested commits."""
    from service.pipeline.bisect import advance_follow_ups

    policy = FollowUpPolicy(bisect=True, confirm=False)

    def step() -> list[RunOrder]:
        with unit_of_work(sessions) as s:
            return advance_follow_ups(s, [series_id], _Between(), policy)

    def job() -> tuple[str, str | None, list[str]]:
        with sessions() as s:
            row = s.scalars(select(BisectJob).where(BisectJob.purpose == "bisect")).one()
            return row.state, row.message, list(row.runs_requested)

    return step, job


class _Between:
    """The played history's commits strictly between two of them, oldest first: what git would list."""

    def between(self, repo: str, good: str, bad: str) -> list[str]:
        positions = {builders.sha_for(f"demo-{p}"): p for p in range(FAKE_POSITIONS)}
        return [builders.sha_for(f"demo-{p}") for p in range(positions[good] + 1, positions[bad])]


def test_a_bisection_waits_for_its_runs_on_their_way_rather_than_give_up(sessions: sessionmaker[Session],
                                                                        tmp_path: Path) -> None:
    """Each upload steps the bisection; with every commit left already scheduled and their runs still on their
    way, it gave up ("none came back") and the alert went out saying so while the deciding run was landing."""
    rng = np.random.default_rng(3)
    queue, series_id = _gapped_history(sessions, tmp_path, rng)
    step, job = _bisection(sessions, series_id)

    orders = [o for _ in range(3) for o in step()]  # three uploads while none of its runs is in
    assert sorted(sha for o in orders for sha in o.shas) == sorted(
        builders.sha_for(f"demo-{p}") for p in range(FAKE_STEP - 1, FAKE_STEP + 2))
    assert step() == [] and job()[0] == "running", job()  # a fourth: all scheduled, none in: it waits

    # The runs land (each a bisection run, named after its task): the job goes on to its end.
    positions = {builders.sha_for(f"demo-{p}"): p for p in range(FAKE_POSITIONS)}
    for order in orders:
        queue.detecting = False
        _submit(sessions, queue, positions[order.shas[0]], rng, order.task_id, "bisect")
    queue.detecting = True
    queue.enqueue_detect([series_id])
    while step():
        pass
    state, message, _ = job()
    assert state == "done" and message is not None and builders.sha_for(f"demo-{FAKE_STEP}")[:12] in message, message


def test_a_bisection_stops_waiting_for_runs_that_never_came(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    """A run whose worker died with it sends no failure back: past MAX_BISECT_WAIT the job gives up, rather than
    hold the series' confirmation behind it for good."""
    from service.pipeline.bisect import MAX_BISECT_WAIT

    _, series_id = _gapped_history(sessions, tmp_path, np.random.default_rng(4))
    step, job = _bisection(sessions, series_id)
    for _ in range(3):
        step()
    assert step() == [] and job()[0] == "running"
    with unit_of_work(sessions) as s:
        row = s.scalars(select(BisectJob).where(BisectJob.purpose == "bisect")).one()
        row.created_at = row.created_at - MAX_BISECT_WAIT - timedelta(minutes=1)
    step()
    state, message, _ = job()
    assert state == "failed" and message is not None and "none came back" in message, message


def test_a_follow_up_holds_its_series_until_it_commits(pg_database: str) -> None:
    """A round's two runs land as two uploads, each followed up in a worker of its own: two advances that both read
    the round complete both ordered the next round (seen with a 2-process worker: the runner measured it twice). An
    advance holds its series' row, so the second waits for the first's job update."""
    import psycopg

    from service.pipeline.bisect import advance_follow_ups

    at_head(pg_database)
    engine = make_engine(pg_database)
    try:
        sessions = make_session_factory(engine)
        with unit_of_work(sessions) as s:
            ingest_manifest(s, parse_manifest(builders.manifest(0)))
            series_id = s.scalars(select(Series.id)).first()
        assert series_id is not None
        with sessions() as held:
            advance_follow_ups(held, [series_id], _Between(), FollowUpPolicy(bisect=True, confirm=True))
            plain = pg_database.replace("postgresql+psycopg://", "postgresql://")
            with psycopg.connect(plain) as other, pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("select id from series where id = %s for update nowait", (series_id,))
            held.rollback()
    finally:
        engine.dispose()
