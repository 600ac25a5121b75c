"""Commits and repositories in the store, found by what people name them with: a repository's name, a sha or a
prefix of one."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.store.models import Commit, Repository, Run


def repository_named(session: Session, name: str) -> Repository | None:
    return session.scalars(select(Repository).filter_by(name=name)).first()


def repositories_sharing_roots(session: Session, roots: Sequence[str]) -> list[str]:
    """The names of the stored repositories whose histories share a root commit with ``roots`` (the same project
    under another name: a clone in a folder of its own name)."""
    wanted = set(roots)
    return sorted(r.name for r in session.scalars(select(Repository)) if wanted & set(r.first_commits or ()))


def commit_of(session: Session, repository_id: int, sha: str) -> Commit | None:
    """The repository's commit of this (full, lower-case) sha."""
    return session.scalars(select(Commit).filter_by(repository_id=repository_id, sha=sha)).first()


def commits_with_prefix(session: Session, prefix: str, repository_id: int | None,
                        limit: int) -> list[tuple[Commit, str]]:
    """(commit, its repository's name) of the commits whose sha starts with ``prefix`` (in one repository, if
    given), by repository name and sha, at most ``limit``."""
    stmt = (select(Commit, Repository.name).join(Repository, Commit.repository_id == Repository.id)
            .where(Commit.sha.startswith(prefix)).order_by(Repository.name, Commit.sha)
            .limit(limit))
    if repository_id is not None:
        stmt = stmt.where(Commit.repository_id == repository_id)
    return [(commit, name) for commit, name in session.execute(stmt)]


def sha_of_run(session: Session, run_id: int) -> str | None:
    """The sha of the commit the run measured."""
    return session.scalar(select(Commit.sha).join(Run, Run.commit_id == Commit.id).where(Run.id == run_id))


def repositories_holding(session: Session, shas: Sequence[str]) -> list[tuple[str, str]]:
    """(sha, repository name) of every stored commit of these shas."""
    return [(sha, name) for sha, name in session.execute(
        select(Commit.sha, Repository.name).join(Repository, Repository.id == Commit.repository_id)
        .where(Commit.sha.in_(list(shas))))]


def measured_commit_count(session: Session, repository: str) -> int:
    """How many of the repository's commits have a run stored (0 where no repository has that name)."""
    found = repository_named(session, repository)
    if found is None:
        return 0
    return session.scalar(select(func.count(func.distinct(Run.commit_id))).join(Commit, Commit.id == Run.commit_id)
                          .where(Commit.repository_id == found.id)) or 0


def repository_of_run(session: Session, run_id: int) -> str | None:
    """The name of the repository a stored run measured."""
    return session.scalar(select(Repository.name).join(Commit, Commit.repository_id == Repository.id)
                          .join(Run, Run.commit_id == Commit.id).where(Run.id == run_id))
