"""A series' measured history on its repository's default branch, as detection reads it."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.store.models import Commit, Repository, Result, Run


def default_branch_samples(session: Session, series_id: int,
                           limit: int | None = None) -> tuple[list[tuple[int, int, int, list[float] | None]], bool]:
    """(commit id, commit position, run id, samples) of every ok result of the series in a run on its repository's
    default branch: at the newest ``limit`` measured commits, or all of them; and whether older ones were left
    out."""
    measured = (Result.series_id == series_id, Result.status == "ok", Run.branch == Repository.default_branch)
    query = (select(Commit.id, Commit.position, Run.id, Result.samples)
             .join(Run, Run.id == Result.run_id)
             .join(Commit, Commit.id == Run.commit_id)
             .join(Repository, Repository.id == Commit.repository_id)
             .where(*measured))
    cut = False
    if limit is not None:
        older = session.scalar(  # the newest commit left out, if any is
            select(Commit.position).join(Run, Run.commit_id == Commit.id).join(Result, Result.run_id == Run.id)
            .join(Repository, Repository.id == Commit.repository_id).where(*measured)
            .group_by(Commit.position).order_by(Commit.position.desc()).offset(limit).limit(1))
        if older is not None:
            query, cut = query.where(Commit.position > older), True
    return [(commit_id, position, run_id, samples)
            for commit_id, position, run_id, samples in session.execute(query)], cut
