"""The pure parts of API auth and errors: tokens minted, parsed, hashed and compared; exceptions to JSON."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import MethodNotAllowed

from kernelwatch.errors import Conflict, Forbidden, InvalidInput, NotFound, PayloadTooLarge, Transient, Unauthorized
from service import tokens
from service.api.auth import bearer
from service.api.errors import describe


def test_a_minted_token_parses_back_and_only_its_hash_is_kept() -> None:
    minted = tokens.mint()
    prefix, secret = tokens.parse(minted.token)
    assert prefix == minted.prefix and minted.token == f"kw_{prefix}_{secret}"
    assert secret not in minted.secret_hash and minted.secret_hash == tokens.hash_secret(secret)
    assert tokens.matches(secret, minted.secret_hash)
    assert not tokens.matches(secret + "x", minted.secret_hash)
    assert not tokens.matches(secret, None)
    assert tokens.mint().token != minted.token


@pytest.mark.parametrize("text", ["", "kw", "kw_abc_def", "xx_0123456789ab_" + "a" * 43, "kw_0123456789AB_" + "a" * 43,
                                  "kw_0123456789ab_short", "kw_0123456789ab_" + "a" * 42 + "!"])
def test_malformed_tokens_are_refused(text: str) -> None:
    with pytest.raises(tokens.TokenFormatError):
        tokens.parse(text)


def test_a_secret_may_hold_underscores() -> None:
    assert tokens.parse("kw_0123456789ab_a_b-c_" + "d" * 30) == ("0123456789ab", "a_b-c_" + "d" * 30)


def test_scopes() -> None:
    assert tokens.check_scopes(["triage", "submit", "triage"]) == ["submit", "triage"]
    with pytest.raises(ValueError, match="unknown scope 'root'"):
        tokens.check_scopes(["root"])
    with pytest.raises(ValueError, match="at least one"):
        tokens.check_scopes([])
    assert tokens.grants(["submit"], "submit") and not tokens.grants(["submit"], "triage")
    assert all(tokens.grants(["admin"], s) for s in tokens.SCOPES)


def test_bearer_header() -> None:
    assert bearer("Bearer kw_x") == "kw_x" and bearer("bearer  kw_x ") == "kw_x"
    assert bearer(None) is None and bearer("Basic abc") is None and bearer("Bearer ") is None


@pytest.mark.parametrize(("exc", "status", "code"), [
    (InvalidInput("bad"), 400, "invalid_input"), (PayloadTooLarge("big"), 413, "payload_too_large"),
    (Unauthorized("who"), 401, "unauthorized"), (Forbidden("no"), 403, "forbidden"),
    (NotFound("gone"), 404, "not_found"), (Conflict("clash"), 409, "conflict"),
    (Transient("later"), 503, "unavailable"), (MethodNotAllowed(), 405, "method_not_allowed"),
])
def test_errors_map_to_a_status_and_a_stable_code(exc: Exception, status: int, code: str) -> None:
    got_status, body = describe(exc)
    assert got_status == status and body["error"]["code"] == code and body["error"]["message"]


def test_an_unexpected_error_says_nothing_of_itself() -> None:
    status, body = describe(KeyError("SELECT secret FROM vault"), reference="abc123")
    assert status == 500 and body == {"error": {"code": "internal", "message":
                                                "internal error (reference abc123); the server log has the details"}}
    status, body = describe(OperationalError("SELECT 1", {}, Exception("host=db password=x")))
    assert status == 503 and "password" not in str(body)
