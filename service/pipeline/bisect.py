"""Follow-up runs for time regressions: bisect a change point across commits that were never measured, then
confirm it by re-running base and head interleaved on the same hardware.

Called after detection wrote its findings (in the same worker, in a transaction of its own). It reads the
findings, opens or advances ``bisect_job`` rows, and returns the runs to schedule; the caller hands them to its
queue after commit (in-process in the embedded default, the ``runner.<hardware>`` Celery queue otherwise). When
those runs are ingested, detection runs again, the change point moves to the side the new commit belongs to, and
this is called again: a job is a small state machine driven by results arriving, never by waiting.

The decisions themselves are pure (``service.detect.confirmation``).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from sqlalchemy.orm import Session

from kernelwatch.vocabulary import JobState
from runners.gitrepo import GitError, ensure_repository, first_parent_range
from service.detect.confirmation import ConfirmParams, decide, next_to_measure
from service.store import bisect_jobs as stored
from service.store.commits import commit_of
from service.store.locks import lock_series
from service.store.models import BisectJob, Commit, Finding, Series
from service.store.run_noise import run_noise
from service.store.runs import run_ids_at
from service.store.times import utc

OPEN_STATES = ("pending", "running")
# A job the follow-up stopped because its change point moved or went: no verdict on that change, so a change
# detection finds there again is followed anew (a finished job's verdict, done or failed, stands).
CANCELLED = "cancelled"
MAX_FOLLOW_UP_SAMPLES = 30
BISECT, CONFIRM = "bisect", "confirm"


@dataclass(frozen=True)
class RunOrder:
    """Runs a runner must make: ``shas`` interleaved benchmark by benchmark when there are several."""

    job_id: int
    repo: str  # the repository's URL or local path, as stored at ingest
    shas: list[str]
    suite: str  # "suite/name" of the one benchmark concerned
    params: str  # "k=v,..." selecting its instance
    samples: int
    branch: str
    trigger: str  # bisect | confirm
    hardware: str
    quick: bool = False
    extra: dict[str, str] = field(default_factory=dict)
    # The queue's task id, from which the runner derives the run ids it stores (runners/worker.py: the id without
    # dashes, "-c1" for the second commit): a confirmation names its rounds' tasks, so it knows its own runs.
    task_id: str = field(default_factory=lambda: uuid.uuid4().hex)


class CommitLister(Protocol):
    def between(self, repo: str, good: str, bad: str) -> list[str]:
        """First-parent commits strictly between ``good`` and ``bad``, oldest first."""
        ...


class GitCommitLister:
    """Lists commits from the repository itself (a local path, or a clone kept under ``cache_dir``)."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir

    def between(self, repo: str, good: str, bad: str) -> list[str]:
        try:
            path = ensure_repository(repo, self.cache_dir, bad)
            listed = first_parent_range(path, good, bad)
        except GitError:
            return []  # the repository is gone or rewritten: nothing can be bisected, nothing is guessed
        return listed[:-1] if listed and listed[-1] == bad else []


@dataclass(frozen=True)
class FollowUpPolicy:
    bisect: bool = True
    confirm: bool = True
    hardware: str = "cpu"
    max_bisect_runs: int = 12  # log2 of 4,096 commits: a longer unmeasured range is a scheduling problem
    confirm_params: ConfirmParams = ConfirmParams()


def _params_filter(params: dict[str, object]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(params.items()))


def confirm_task_id(job_id: int, round_index: int) -> str:
    """The task id of a confirmation's round: no dashes (the runner strips them to make run ids, and appends
    "-c1" and "-r..." after one), unique per job and round, the same again for a redelivered task."""
    return f"confirm_{job_id}_{round_index}"


def _job_runs(session: Session, series_id: int, job: BisectJob, rounds: int,
              commit_ids: Sequence[int]) -> dict[int, tuple[int, list[list[float]]]]:
    """Per commit of the job: how many of its rounds' runs landed there, and the samples of this series each of
    those runs measured (one list per run: the run is the unit of replication). A run that landed without a
    measurement of the series (its benchmark failed) counts as landed: it is not on its way any more."""
    tasks = {confirm_task_id(job.id, r) for r in range(rounds)}
    runs = stored.runs_at(session, CONFIRM, commit_ids)
    # Only this job's runs: those of a cancelled confirmation of the same commits, or of another change that
    # shares one of them, were neither asked for nor interleaved with this job's other side.
    mine = {run_id: (uid.split("-", 1)[0], commit_id) for run_id, uid, commit_id in runs
            if uid.split("-", 1)[0] in tasks}
    landed: dict[int, set[str]] = defaultdict(set)
    for task, commit_id in mine.values():
        landed[commit_id].add(task)
    samples: dict[int, list[list[float]]] = defaultdict(list)
    if mine:
        for run_id, values in stored.ok_samples(session, list(mine), series_id):
            if values:
                samples[mine[run_id][1]].append([float(v) for v in values])
    return {c: (len(landed[c]), samples[c]) for c in commit_ids}


def _order(job: BisectJob, series: Series, shas: list[str], trigger: str, samples: int,
           policy: FollowUpPolicy, task_id: str | None = None) -> RunOrder:
    benchmark = series.benchmark
    return RunOrder(job_id=job.id, repo=series.repository.url, shas=shas, suite=f"{benchmark.suite}/{benchmark.name}",
                    params=_params_filter(benchmark.params), samples=samples,
                    branch=series.repository.default_branch, trigger=trigger, hardware=policy.hardware,
                    task_id=task_id or uuid.uuid4().hex)


def _open_job(session: Session, series_id: int, purpose: str) -> BisectJob | None:
    return stored.open_job(session, series_id, purpose, OPEN_STATES)


def _finish(job: BisectJob, state: str, message: str, culprit: str | None = None) -> None:
    job.state, job.message, job.updated_at = JobState(state), message, datetime.now(UTC)
    if culprit is not None:
        job.culprit_sha = culprit


def advance_follow_ups(session: Session, series_ids: Sequence[int], lister: CommitLister,
                       policy: FollowUpPolicy) -> list[RunOrder]:
    """Open, advance or close the bisect and confirm jobs of these series; the runs to schedule next."""
    # One advance of a series at a time (PostgreSQL; SQLite writes one transaction at a time): a round's two runs
    # land as two uploads, each detected and followed up in a worker of its own, and two advances that both read
    # the round complete both ordered the next one (the runner measured it twice; one job update was lost).
    lock_series(session, series_ids)
    orders: list[RunOrder] = []
    for series_id in series_ids:
        series = session.get(Series, series_id)
        if series is None:
            continue
        findings = stored.followed_findings(session, series_id)
        # One change per series is followed at a time: the newest, which is what a person will ask about first.
        target = max(findings, key=lambda f: session.get(Commit, f.commit_id).position, default=None)  # type: ignore[union-attr]
        orders += _advance_series(session, series, target, lister, policy)
    session.flush()
    return orders


def _advance_series(session: Session, series: Series, finding: Finding | None, lister: CommitLister,
                    policy: FollowUpPolicy) -> list[RunOrder]:
    bisect_job = _open_job(session, series.id, BISECT)
    confirm_job = _open_job(session, series.id, CONFIRM)
    if finding is None:
        for job in (bisect_job, confirm_job):
            if job is not None:
                _finish(job, CANCELLED, "the change point no longer stands")
        return []
    good = session.get(Commit, finding.previous_commit_id)
    bad = session.get(Commit, finding.commit_id)
    assert good is not None and bad is not None
    # As many samples as one run at the head took, within reason: not the head's samples pooled over its runs,
    # which grew with every confirmation round landed there.
    samples = min(MAX_FOLLOW_UP_SAMPLES, max(10, stored.samples_per_run(session, series.id, bad.id)))
    if policy.bisect:
        between = lister.between(series.repository.url, good.sha, bad.sha)
        if between or bisect_job is not None:
            order = _bisect_step(session, series, finding, good, bad, between, bisect_job, samples, policy)
            if order is not None or (bisect_job is not None and bisect_job.state in OPEN_STATES):
                return [order] if order is not None else []
    if policy.confirm:
        order = _confirm_step(session, series, finding, good, bad, confirm_job, samples, policy)
        return [order] if order is not None else []
    return []


def _new_job(session: Session, series: Series, finding: Finding, good: Commit, bad: Commit, purpose: str,
             policy: FollowUpPolicy) -> BisectJob:
    now = datetime.now(UTC)
    job = BisectJob(series_id=series.id, finding_id=finding.id, repository_id=series.repository_id,
                    good_commit_sha=good.sha, bad_commit_sha=bad.sha, hardware=policy.hardware, state="running",
                    purpose=purpose, runs_requested=[], created_at=now, updated_at=now)
    session.add(job)
    session.flush()  # its id goes into the run order
    return job


def _bisect_step(session: Session, series: Series, finding: Finding, good: Commit, bad: Commit,
                 between: list[str], job: BisectJob | None, samples: int, policy: FollowUpPolicy) -> RunOrder | None:
    now = datetime.now(UTC)
    if job is None:
        job = _new_job(session, series, finding, good, bad, BISECT, policy)
    job.finding_id = finding.id  # the finding moves (a new row) as the range narrows
    job.updated_at = now
    if not between:
        _finish(job, "done", f"isolated {bad.sha[:12]} ({bad.subject[:80]}) after {len(job.runs_requested)} "
                             f"runs; it follows {good.sha[:12]}", culprit=bad.sha)
        return None
    untried = [sha for sha in between if sha not in job.runs_requested]
    if len(job.runs_requested) >= policy.max_bisect_runs:
        _finish(job, "failed", f"{len(between)} commits still between {good.sha[:12]} and {bad.sha[:12]} after "
                               f"{len(job.runs_requested)} runs")
        return None
    # A requested commit still between has not come back yet (or failed, and never will): measure around it
    # rather than wait forever; the range still narrows.
    sha = next_to_measure(untried)
    if sha is None:
        if _on_their_way(session, series, job, between) and now - utc(job.created_at) < MAX_BISECT_WAIT:
            # Every commit left is scheduled and some runs are not in yet (another run's upload stepped the job
            # meanwhile): wait for them, whose upload steps it again. Failing here posted the alert with "gave up"
            # while the run that would have decided it was landing. A run that cannot be made ends the job
            # through follow_up_failed.
            return None
        _finish(job, "failed", "every commit in the range was scheduled and none came back with results")
        return None
    job.runs_requested = [*job.runs_requested, sha]
    return _order(job, series, [sha], BISECT, samples, policy)


# How long a bisection waits for runs it scheduled that have not come in: a run whose worker died with it (no
# follow_up_failed was sent) would otherwise hold the job, and the series' confirmation behind it, for good.
MAX_BISECT_WAIT = timedelta(hours=24)


def _on_their_way(session: Session, series: Series, job: BisectJob, between: list[str]) -> bool:
    """Whether a commit of ``between`` the job scheduled has no bisection run stored yet (its commit not even
    stored, or no run of trigger bisect at it): one that landed and still lies between came back without a
    result of the series, and never will."""
    scheduled = [sha for sha in between if sha in job.runs_requested]
    stored_ids = {sha: commit.id for sha in scheduled
                  if (commit := commit_of(session, series.repository_id, sha)) is not None}
    landed = {commit_id for _, _, commit_id in stored.runs_at(session, BISECT, list(stored_ids.values()))}
    return any(stored_ids.get(sha) not in landed for sha in scheduled)


def _confirm_step(session: Session, series: Series, finding: Finding, good: Commit, bad: Commit,
                  job: BisectJob | None, samples: int, policy: FollowUpPolicy) -> RunOrder | None:
    now = datetime.now(UTC)
    # An open confirmation of another change first: it stops whatever comes next (before, a change already
    # confirmed returned first, and a confirmation of one that vanished stayed "running" for good).
    if job is not None and (job.good_commit_sha, job.bad_commit_sha) != (good.sha, bad.sha):
        _finish(job, CANCELLED, "the change point moved; a new confirmation follows")
        job = None
    # A cancelled confirmation of this same change gave no verdict: a change point that went and came back (a
    # finding detection re-created, under the same id or another) is confirmed anew.
    done = stored.job_of_change(session, series.id, CONFIRM, good.sha, bad.sha, (*OPEN_STATES, CANCELLED))
    if done is not None:
        return None  # this exact change was already confirmed or refuted
    if job is None:
        job = _new_job(session, series, finding, good, bad, CONFIRM, policy)
        job.runs_requested = [good.sha, bad.sha]
        return _order(job, series, [good.sha, bad.sha], CONFIRM, samples, policy, confirm_task_id(job.id, 0))
    job.finding_id, job.updated_at = finding.id, now
    requested = len(job.runs_requested) // 2
    runs = _job_runs(session, series.id, job, requested, (good.id, bad.id))
    (base_landed, base), (head_landed, head) = runs[good.id], runs[bad.id]
    if min(base_landed, head_landed) < requested:
        # The round's runs are still on their way: its two runs are uploaded one after the other, and each
        # upload is detected and followed up on its own; deciding on the first would test a round's head against
        # the rounds before (and order the next round while this one is still running).
        return None
    expect_increase = finding.value_after > finding.value_before
    # The spread between runs from the series' other replicated commits: the two compared commits' own runs
    # (this job's and any other) are what is being tested, not history.
    compared = run_ids_at(session, (good.id, bad.id))
    noise = run_noise(session, [series.id], [series.environment_id], compared).get(series.id)
    decision = decide(base, head, expect_increase, requested, noise, policy.confirm_params)
    if decision.verdict == "undecided":
        # The next round runs the two the other way round (ABBA): a confirmation runs one benchmark, so the
        # runner's per-benchmark alternation never swaps them, and whatever favours the side that runs first (a
        # warmer cache, a quieter minute) would otherwise land on the same side every round and read as a change.
        shas = [good.sha, bad.sha] if requested % 2 == 0 else [bad.sha, good.sha]
        job.runs_requested = [*job.runs_requested, *shas]
        return _order(job, series, shas, CONFIRM, samples, policy, confirm_task_id(job.id, requested))
    # The verdict lives on the job (a confirmed change names its culprit; a refuted one none), where the pages
    # read it: a finding's attribution is recomputed as results arrive, the job is not.
    _finish(job, "done", decision.describe(), culprit=bad.sha if decision.verdict == "confirmed" else None)
    return None


def fail_job(session: Session, job_id: int, message: str) -> None:
    job = session.get(BisectJob, job_id)
    if job is not None and job.state in OPEN_STATES:
        _finish(job, "failed", message[:2000])
