from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from service.store.db import make_engine, make_session_factory, upgrade


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    """Session factory over a database brought to head by the real migrations (SQLite and PostgreSQL)."""
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()
