"""Tracked pull requests in the store (``pull_request``), as service/pipeline/pull_requests.py keeps them."""

from __future__ import annotations

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from service.store.models import PullRequest


def pull_request(session: Session, repository: str, number: int, lock: bool = False) -> PullRequest | None:
    """The pull request of this repository (owner/name) and number; with ``lock``, its row taken for the
    transaction."""
    query = select(PullRequest).filter_by(repository=repository, number=number)
    return session.scalars(query.with_for_update() if lock else query).first()


def by_clone_url(session: Session, clone_url: str, number: int) -> PullRequest | None:
    """The pull request a runner's task names (its clone URL and number: the task knows no owner/name), its row
    taken for the transaction."""
    query = select(PullRequest).filter_by(clone_url=clone_url, number=number).order_by(PullRequest.id.desc())
    return session.scalars(query.with_for_update()).first()


def locked(session: Session, pull_request_id: int) -> PullRequest | None:
    """The pull request, its row taken for the transaction."""
    return session.get(PullRequest, pull_request_id, with_for_update=True)


def with_commit(session: Session, sha: str, state: str) -> list[int]:
    """The pull requests in ``state`` whose head or merge-base is this commit, by id."""
    return list(session.scalars(select(PullRequest.id).where(
        PullRequest.state == state, or_(PullRequest.head_sha == sha, PullRequest.merge_base_sha == sha))
        .order_by(PullRequest.id)))
