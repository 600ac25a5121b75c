"""API tokens in the store: create (the token is returned once), list, revoke, and authenticate a request's."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from kernelwatch.errors import Conflict, InvalidInput, NotFound
from service import tokens
from service.store import tokens as stored_tokens
from service.store.models import ApiToken
from service.store.times import utc

# last_used_at is for people deciding what to revoke; minute precision spares a write on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class TokenView:
    id: int
    name: str
    scopes: list[str]
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def _view(row: ApiToken) -> TokenView:
    return TokenView(id=row.id, name=row.name, scopes=list(row.scopes), prefix=row.prefix, created_at=row.created_at,
                     last_used_at=row.last_used_at, revoked_at=row.revoked_at)


def create_token(session: Session, name: str, scopes: Iterable[str]) -> tuple[TokenView, str]:
    """A new token and its text, which exists nowhere else afterwards. One active token per name."""
    try:
        name = tokens.check_name(name)
        scope_list = tokens.check_scopes(scopes)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    taken = stored_tokens.active_token_named(session, name)
    if taken is not None:
        raise Conflict(f"an active token named {name!r} exists (id {taken}); revoke it first or pick another name")
    for _ in range(3):  # 48 random bits of prefix: a collision is rare, and then another draw settles it
        minted = tokens.mint()
        row = ApiToken(name=name, scopes=scope_list, prefix=minted.prefix, secret_hash=minted.secret_hash,
                       created_at=datetime.now(UTC))
        if not stored_tokens.add_token(session, row):
            continue
        return _view(row), minted.token
    raise Conflict("could not draw an unused token prefix; try again")


def list_tokens(session: Session) -> list[TokenView]:
    return [_view(t) for t in stored_tokens.all_tokens(session)]


def get_token(session: Session, token_id: int) -> TokenView:
    row = session.get(ApiToken, token_id)
    if row is None:
        raise NotFound(f"no token {token_id}")
    return _view(row)


def revoke_token(session: Session, ref: str | int) -> TokenView:
    """Revoke by id, or by the name of an active token. Revoking a revoked token changes nothing. A reference that
    is both one token's id and another's name (names of digits alone are refused now, but were taken before) is
    refused rather than guessed: revoking the wrong one leaves a leaked token working."""
    row: ApiToken | None = None
    by_id = isinstance(ref, int) or re.fullmatch(r"[0-9]{1,18}", ref) is not None  # an id a column can hold
    if by_id:
        row = session.get(ApiToken, int(ref))
    if isinstance(ref, str):
        named = stored_tokens.token_named(session, ref)
        if row is not None and named is not None and named.id != row.id:
            raise InvalidInput(f"{ref!r} is token {row.id}'s id and token {named.id}'s name; give the id of the one "
                               f"to revoke")
        row = row or named
    if row is None:
        raise NotFound(f"no token {ref!r} (give its id or its name)")
    if row.revoked_at is None:
        row.revoked_at = datetime.now(UTC)
        session.flush()
    return _view(row)


def authenticate(session: Session, raw: str) -> TokenView | None:
    """The active token ``raw`` is, or None (malformed, unknown, wrong secret or revoked: the caller cannot tell
    which, and need not)."""
    try:
        prefix, secret = tokens.parse(raw)
    except tokens.TokenFormatError:
        return None
    row = stored_tokens.token_with_prefix(session, prefix)
    if not tokens.matches(secret, row.secret_hash if row is not None else None):
        return None
    assert row is not None
    if row.revoked_at is not None:
        return None
    now = datetime.now(UTC)
    last = None if row.last_used_at is None else utc(row.last_used_at)  # SQLite hands back naive datetimes
    if last is None or now - last >= LAST_USED_RESOLUTION:
        row.last_used_at = now
        session.flush()
    return _view(row)
