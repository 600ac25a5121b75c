from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from service.store.db import make_engine, make_session_factory
from tests.api_client import Api, make_api
from tests.scratch_database import at_head


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    """Session factory over a database at head (SQLite and PostgreSQL): a copy of one brought there by the real
    migrations (tests/scratch_database.py ``at_head``)."""
    at_head(database_url)
    engine = make_engine(database_url)
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


@pytest.fixture
def api(sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> Iterator[Api]:
    """The Flask app over a migrated database (SQLite and PostgreSQL), with an in-process context."""
    api = make_api(database_url, tmp_path)
    try:
        yield api
    finally:
        api.ctx.close()
