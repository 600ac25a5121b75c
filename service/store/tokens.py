"""API tokens in the store (only their hashes: see service/tokens.py), as service/pipeline/tokens.py keeps them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.store.models import ApiToken


def active_token_named(session: Session, name: str) -> int | None:
    """The id of the unrevoked token of this name, if there is one."""
    return session.scalars(select(ApiToken.id).where(ApiToken.name == name, ApiToken.revoked_at.is_(None))).first()


def add_token(session: Session, row: ApiToken) -> bool:
    """Store a new token, in a savepoint; False when its prefix is taken already (nothing stored)."""
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:
        return False
    return True


def all_tokens(session: Session) -> Sequence[ApiToken]:
    return session.scalars(select(ApiToken).order_by(ApiToken.id)).all()


def token_named(session: Session, name: str) -> ApiToken | None:
    """The token of this name: the active one, else the newest revoked one."""
    return session.scalars(select(ApiToken).where(ApiToken.name == name)
                           .order_by(ApiToken.revoked_at.is_(None).desc(), ApiToken.id.desc())).first()


def token_with_prefix(session: Session, prefix: str) -> ApiToken | None:
    return session.scalars(select(ApiToken).where(ApiToken.prefix == prefix)).first()
