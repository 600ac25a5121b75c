"""`kernelwatch token create|list|revoke` as a user types them, on both databases."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from service.pipeline.tokens import authenticate
from service.store.db import unit_of_work
from tests.cli_inprocess import run_cli


def kernelwatch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env)  # in this process (tests/cli_inprocess.py says why)


def test_create_list_revoke(sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url}
    made = kernelwatch(["token", "create", "ci-runner", "--scope", "submit", "--scope", "triage"], env)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("kw_") and len(token.splitlines()) == 1  # the token alone: `$(kernelwatch token ...)`
    assert "shown this once" in made.stderr and token not in made.stderr
    with unit_of_work(sessions) as s:
        view = authenticate(s, token)
    assert view is not None and view.name == "ci-runner" and view.scopes == ["submit", "triage"]

    listed = kernelwatch(["token", "list"], env)
    assert listed.returncode == 0 and "ci-runner" in listed.stdout and view.prefix in listed.stdout
    assert token.split("_", 2)[2] not in listed.stdout and "active" in listed.stdout
    as_json = kernelwatch(["token", "list", "--format", "json"], env)
    assert token.split("_", 2)[2] not in as_json.stdout and '"prefix"' in as_json.stdout

    twice = kernelwatch(["token", "create", "ci-runner", "--scope", "submit"], env)
    assert twice.returncode == 2 and "active token named 'ci-runner'" in twice.stderr
    bad = kernelwatch(["token", "create", "x", "--scope", "root"], env)
    assert bad.returncode == 2

    revoked = kernelwatch(["token", "revoke", "ci-runner"], env)
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    with unit_of_work(sessions) as s:
        assert authenticate(s, token) is None
    assert "revoked" in kernelwatch(["token", "list"], env).stdout
    assert kernelwatch(["token", "revoke", str(view.id)], env).returncode == 0  # again: nothing changes
    missing = kernelwatch(["token", "revoke", "nobody"], env)
    assert missing.returncode == 2 and "no token" in missing.stderr
    again = kernelwatch(["token", "create", "ci-runner", "--scope", "submit"], env)  # the name is free again
    assert again.returncode == 0 and again.stdout.strip() != token


def test_revoke_never_takes_one_token_for_another(sessions: sessionmaker[Session], database_url: str,
                                                  tmp_path: Path) -> None:
    """`token revoke 3` reads 3 as an id: a name of digits alone is refused, and where one was taken before (here
    planted in the store) and is another token's id, revoke refuses to guess. References no id can be are names
    (a superscript digit, an id past any column) and end in one line, exit 2."""
    from service.store.models import ApiToken

    env = {**os.environ, "KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url}
    digits = kernelwatch(["token", "create", "3", "--scope", "submit"], env)
    assert digits.returncode == 2 and "reads as a token id" in digits.stderr
    newline = kernelwatch(["token", "create", "ci\n", "--scope", "submit"], env)
    assert newline.returncode == 2
    first = kernelwatch(["token", "create", "first", "--scope", "submit"], env)
    assert first.returncode == 0, first.stderr
    with unit_of_work(sessions) as s:
        [row] = [t for t in s.query(ApiToken).all() if t.name == "first"]
        legacy = ApiToken(name=str(row.id), scopes=["submit"], prefix="legacy000001", secret_hash="0" * 64,
                          created_at=row.created_at)
        s.add(legacy)
        s.flush()
        legacy_id, first_id = legacy.id, row.id
    ambiguous = kernelwatch(["token", "revoke", str(first_id)], env)
    assert ambiguous.returncode == 2 and f"token {legacy_id}'s name" in ambiguous.stderr, ambiguous.stderr
    with unit_of_work(sessions) as s:
        assert all(t.revoked_at is None for t in s.query(ApiToken).all())  # neither was revoked
    for odd in ("²", "9" * 30):
        answer = kernelwatch(["token", "revoke", odd], env)
        assert answer.returncode == 2 and "no token" in answer.stderr and "Traceback" not in answer.stderr
