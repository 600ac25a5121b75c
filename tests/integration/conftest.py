from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from service.store.db import make_engine, make_session_factory, upgrade
from tests.api_client import Api, make_api


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    """Session factory over a database brought to head by the real migrations (SQLite and PostgreSQL)."""
    upgrade(database_url)
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
