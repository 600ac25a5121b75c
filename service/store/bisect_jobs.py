"""Follow-up jobs (``bisect_job``: bisections and confirmations) in the store, and what deciding them reads: the
findings they follow, the samples their runs measured. service/pipeline/bisect.py decides; these answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session, aliased

from service.store.models import Benchmark, BisectJob, Commit, Finding, Result, Run, Series


def followed_findings(session: Session, series_id: int) -> Sequence[Finding]:
    """The series' findings a follow-up is owed: time regressions with a commit before them."""
    return session.scalars(select(Finding).where(
        Finding.series_id == series_id, Finding.kind == "time", Finding.direction == "regression",
        Finding.previous_commit_id.is_not(None))).all()


def open_job(session: Session, series_id: int, purpose: str, states: Sequence[str]) -> BisectJob | None:
    """The newest job of this purpose on the series in one of ``states``."""
    return session.scalars(select(BisectJob).where(BisectJob.series_id == series_id, BisectJob.purpose == purpose,
                                                   BisectJob.state.in_(states))
                           .order_by(BisectJob.id.desc())).first()


def job_of_change(session: Session, series_id: int, purpose: str, good_sha: str, bad_sha: str,
                  excluded_states: Sequence[str]) -> BisectJob | None:
    """A job of this purpose on the series for exactly this change (good and bad commit), in a state other than
    ``excluded_states``."""
    return session.scalars(select(BisectJob).where(
        BisectJob.series_id == series_id, BisectJob.purpose == purpose, BisectJob.good_commit_sha == good_sha,
        BisectJob.bad_commit_sha == bad_sha, BisectJob.state.not_in(excluded_states))).first()


def samples_per_run(session: Session, series_id: int, commit_id: int) -> int:
    """The most samples one run at this commit took of the series (0: none measured it)."""
    rows = session.scalars(select(Result.samples).join(Run, Run.id == Result.run_id)
                           .where(Result.series_id == series_id, Run.commit_id == commit_id, Result.status == "ok"))
    return max((len(samples or ()) for samples in rows), default=0)


def runs_at(session: Session, trigger: str, commit_ids: Sequence[int]) -> list[tuple[int, str, int]]:
    """(run id, run uid, commit id) of the runs of this trigger at these commits."""
    return [(run_id, uid, commit_id) for run_id, uid, commit_id in session.execute(
        select(Run.id, Run.run_uid, Run.commit_id).where(Run.trigger == trigger,
                                                         Run.commit_id.in_(list(commit_ids))))]


def ok_samples(session: Session, run_ids: Sequence[int], series_id: int) -> list[tuple[int, list[float] | None]]:
    """(run id, samples) of the series' ok results in these runs, by run."""
    return [(run_id, values) for run_id, values in session.execute(select(Result.run_id, Result.samples).where(
        Result.run_id.in_(list(run_ids)), Result.series_id == series_id, Result.status == "ok")
        .order_by(Result.run_id))]


def jobs_of_alert(session: Session, alert_id: int) -> list[tuple[BisectJob, str, str, dict[str, Any]]]:
    """(job, benchmark suite, name, params) of every job following a finding of the alert, by id; a confirmation
    only where it re-ran the finding's range as it stands. A finding whose range narrowed (a bisection moved it, a
    later run split it) keeps the confirmation of its old range in the store, and the alert's Slack message listed
    it beside the current one: "confirmed the change at 5fd2381c95b7: +216.9 %" of f3a577cd..5fd2381c, then the same
    of 3b60c2a0..5fd2381c at +280.3 %."""
    commit, previous = aliased(Commit), aliased(Commit)
    current = and_(BisectJob.good_commit_sha == previous.sha, BisectJob.bad_commit_sha == commit.sha)
    return [(job, suite, name, params) for job, suite, name, params in session.execute(
        select(BisectJob, Benchmark.suite, Benchmark.name, Benchmark.params)
        .join(Series, Series.id == BisectJob.series_id).join(Benchmark, Benchmark.id == Series.benchmark_id)
        .join(Finding, Finding.id == BisectJob.finding_id)
        .join(commit, commit.id == Finding.commit_id).outerjoin(previous, previous.id == Finding.previous_commit_id)
        .where(Finding.alert_id == alert_id, or_(BisectJob.purpose != "confirm", current))
        .order_by(BisectJob.id))]
