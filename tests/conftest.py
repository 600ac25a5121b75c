"""Shared fixtures: database URLs for the real PostgreSQL (a throwaway database per test session) and SQLite."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.scratch_database import PG_ADMIN_URL, scratch_database

# The suite starts benchmark processes by the hundred; each would spend half a second calibrating its host. Off
# here (benchmark processes inherit it), on in the tests of the calibration itself.
os.environ.setdefault("KERNELWATCH_CALIBRATE", "0")
# Where a calibration is measured (those tests, `kernelwatch predict` on uncalibrated results) it is kept in a file
# of this test process's, never the developer's own (runners/calibration_cache.py).
# One file for every worker of a test run (xdist names the run), so the host is measured once per environment.
os.environ.setdefault("KERNELWATCH_CALIBRATION_CACHE", str(
    Path(tempfile.gettempdir()) / f"kw-calibrations-{os.environ.get('PYTEST_XDIST_TESTRUNUID', os.getpid())}.json"))

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The admin URL of the real server; fails loudly (never skips) when PostgreSQL does not answer."""
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=5) as conn:
            conn.execute("select 1")
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is not answering at {PG_ADMIN_URL}: {exc}. Start it (see .ci/run).")
    yield PG_ADMIN_URL


@pytest.fixture
def pg_database(pg_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh PostgreSQL database for one test, dropped afterwards; yields its SQLAlchemy URL. Empty, except
    for a test that asks for ``sessions`` (a database at head): then it is made at head at once, as a copy of
    the migrated template (tests/scratch_database.py), rather than made empty and then replaced by one."""
    with scratch_database("kw_test", pg_server, at_head="sessions" in request.fixturenames) as url:
        yield url


@pytest.fixture
def sqlite_database(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'kernelwatch.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Runs a test on both backends the product supports."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_database")
    return request.getfixturevalue("pg_database")


def fresh_redis(url: str) -> str:
    """An emptied Redis database for one test; fails loudly (never skips) when Redis does not answer."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=3)
    try:
        client.flushdb()
    except redis.exceptions.ConnectionError as exc:
        pytest.fail(f"Redis is not answering at {url}: {exc}. Start it (see .ci/run).")
    return url

