"""API tokens, the pure part: minting, parsing, hashing, comparing, and what a scope allows. No database here.

A token reads ``kw_<prefix>_<secret>``: the prefix (12 hex digits) finds the stored row and names the token in
listings; the secret (256 random bits) authenticates and is never stored, only its sha256. A leaked database
therefore yields no usable token, and a listing shows nothing that authenticates.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

SCOPES = ("submit", "triage", "admin")
TOKEN_PREFIX = "kw"
PREFIX_HEX = 12
_PREFIX = re.compile(rf"^[0-9a-f]{{{PREFIX_HEX}}}$")
_SECRET = re.compile(r"^[A-Za-z0-9_\-]{20,200}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,199}$")
# A digest that matches no secret: compared against when no row has the prefix, so that an unknown prefix and
# a wrong secret take the same path.
_NO_HASH = "0" * 64


@dataclass(frozen=True)
class MintedToken:
    token: str  # shown once to whoever created it
    prefix: str
    secret_hash: str


class TokenFormatError(ValueError):
    pass


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def mint() -> MintedToken:
    prefix = secrets.token_hex(PREFIX_HEX // 2)
    secret = secrets.token_urlsafe(32)
    return MintedToken(token=f"{TOKEN_PREFIX}_{prefix}_{secret}", prefix=prefix, secret_hash=hash_secret(secret))


def parse(token: str) -> tuple[str, str]:
    """(prefix, secret) of a well-formed token; TokenFormatError otherwise (the secret may hold ``_``)."""
    parts = token.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not _PREFIX.match(parts[1]) or not _SECRET.match(parts[2]):
        raise TokenFormatError("not a KernelWatch token (kw_<prefix>_<secret>)")
    return parts[1], parts[2]


def matches(secret: str, stored_hash: str | None) -> bool:
    """Constant-time: how long this takes says nothing about how much of the secret was right."""
    return hmac.compare_digest(hash_secret(secret), stored_hash or _NO_HASH) and stored_hash is not None


def check_scopes(scopes: Iterable[str]) -> list[str]:
    """The scopes, deduplicated in a stable order; ValueError naming an unknown one or an empty set."""
    given = list(scopes)
    unknown = sorted(set(given) - set(SCOPES))
    if unknown:
        raise ValueError(f"unknown scope {unknown[0]!r}; scopes are {', '.join(SCOPES)}")
    if not given:
        raise ValueError(f"give a token at least one scope: {', '.join(SCOPES)}")
    return [s for s in SCOPES if s in given]


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):  # fullmatch: "$" alone lets a trailing newline through
        raise ValueError("a token name is 1 to 200 letters, digits, '_', '.', '@' or '-', starting with a letter "
                         "or digit")
    if name.isdigit():  # `token revoke 3` names token id 3: a token named "3" would be revoked in its place
        raise ValueError(f"a token name of digits alone ({name!r}) reads as a token id; add a letter")
    return name


def grants(scopes: Iterable[str], required: str) -> bool:
    """``admin`` may do everything; otherwise a scope grants only itself."""
    held = set(scopes)
    return required in held or "admin" in held
