"""Runs in the store, looked up by what the pipeline knows of them: their commits, their run ids."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import Transient
from service.detect.run_stats import RunOrigin
from service.store.models import Commit, Environment, Repository, Result, Run


def run_ids_at(session: Session, commit_ids: Sequence[int]) -> Sequence[int]:
    """The ids of every run at these commits."""
    return session.scalars(select(Run.id).where(Run.commit_id.in_(commit_ids))).all()


def runs_of_commit(session: Session, commit_id: int) -> tuple[list[Run], list[Run]]:
    """The runs at the commit, in the order they started: those of the commit's own code, and those of working
    copies stored under its sha (``run --working-tree``), which are not the commit's code."""
    rows = session.execute(
        select(Run, Environment.details).join(Environment, Environment.id == Run.environment_id)
        .where(Run.commit_id == commit_id).order_by(Run.started_at, Run.id)).all()
    own: list[Run] = []
    working_copies: list[Run] = []
    for run, details in rows:
        (own if _of_the_commit(run.host_details, details) else working_copies).append(run)
    return own, working_copies


def _of_the_commit(host: dict[str, object] | None, details: dict[str, object] | None) -> bool:
    """A run of the commit itself: a working copy's run stored under it (its environment names a
    ``working_tree``; from runners before that field, its host details say dirty) is not one."""
    return not (details or {}).get("working_tree") and (host or {}).get("dirty") != "true"


def of_the_commit(session: Session) -> ColumnElement[bool]:
    """:func:`_of_the_commit` as a condition on Run, for queries that list measured commits: a commit whose only runs
    are of working copies is no measured commit (its page has no side to compare; the commits page listed it, and
    its link was a 404). The working copies' environments are few (one per edit measured), so they are looked up
    here rather than through each database's JSON operators."""
    working_copies = [env_id for env_id, details in session.execute(select(Environment.id, Environment.details))
                      if (details or {}).get("working_tree")]
    dirty = Run.host_details["dirty"].as_string()
    return and_(Run.environment_id.not_in(working_copies), or_(dirty.is_(None), dirty != "true"))


def of_working_copies(session: Session, runs: Sequence[Run]) -> bool:
    """Whether every one of ``runs`` measured a working copy stored under its commit's sha (``run --working-tree``,
    ``ci --working-tree``), not the commit's code (:func:`_of_the_commit`)."""
    details = {env_id: d for env_id, d in session.execute(
        select(Environment.id, Environment.details).where(Environment.id.in_({r.environment_id for r in runs})))}
    return bool(runs) and not any(_of_the_commit(r.host_details, details.get(r.environment_id)) for r in runs)


def commit_measured(session: Session, repository: str, sha: str) -> bool:
    """Whether the repository's commit holds a run of the commit itself (:func:`_of_the_commit`)."""
    rows = session.execute(
        select(Run.host_details, Environment.details).join(Environment, Environment.id == Run.environment_id)
        .join(Commit, Commit.id == Run.commit_id).join(Repository, Repository.id == Commit.repository_id)
        .where(Repository.name == repository, Commit.sha == sha))
    return any(_of_the_commit(host, details) for host, details in rows)


def runs_named(session: Session, run_uids: Sequence[str]) -> Sequence[Run]:
    """The runs of these run ids, in the order they started."""
    return session.scalars(select(Run).where(Run.run_uid.in_(list(run_uids))).order_by(Run.started_at, Run.id)).all()


def run_named(session: Session, run_uid: str) -> Run | None:
    return session.scalars(select(Run).filter_by(run_uid=run_uid)).first()


def runs_with_prefix(session: Session, prefix: str, limit: int) -> Sequence[Run]:
    """At most ``limit`` runs whose id starts with ``prefix`` (hex digits alone: no LIKE wildcard reaches here)."""
    return session.scalars(select(Run).where(Run.run_uid.startswith(prefix)).order_by(Run.run_uid).limit(limit)).all()


def results_of_run(session: Session, run_id: int) -> list[tuple[int, int, str]]:
    """(id, series id, status) of the run's results."""
    return [(id_, series_id, status) for id_, series_id, status in session.execute(
        select(Result.id, Result.series_id, Result.status).where(Result.run_id == run_id))]


def run_stored(sessions: sessionmaker[Session], run_uid: str) -> bool:
    """Whether the run of this run id is stored, as one of its environments' runs (ids after the first get
    ``-d<group>`` suffixes); Transient when the database cannot be reached."""
    try:
        with sessions() as session:
            found = session.scalar(select(Run.id).where(or_(Run.run_uid == run_uid,
                                                            Run.run_uid.like(f"{run_uid}-d%"))).limit(1))
    except OperationalError as exc:
        raise Transient(f"database unavailable: {exc.orig}") from exc
    return found is not None


def run_triggers(session: Session, run_ids: Sequence[int]) -> set[str]:
    """What made these runs (push, pr, bisect, confirm, ...), each trigger once."""
    return set(session.scalars(select(Run.trigger).where(Run.id.in_(list(run_ids))).distinct()))


def run_origins(session: Session, run_ids: Sequence[int]) -> dict[int, RunOrigin]:
    """Each run's environment and the interleaved session it was a round of (None: made on its own)."""
    rows = session.execute(select(Run.id, Run.environment_id, Run.round_session).where(Run.id.in_(list(run_ids))))
    return {run_id: RunOrigin(environment_id, round_session) for run_id, environment_id, round_session in rows}
