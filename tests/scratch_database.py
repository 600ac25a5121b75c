"""A throwaway PostgreSQL database on the machine's server: tests, and the benches that start real processes."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

PG_ADMIN_URL = os.environ.get("KERNELWATCH_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")


def sqlalchemy_url(admin_url: str, name: str) -> str:
    """The SQLAlchemy URL (psycopg 3) of database ``name`` on the admin URL's server."""
    return f"{admin_url.rsplit('/', 1)[0]}/{name}".replace("postgresql://", "postgresql+psycopg://", 1)


@contextmanager
def scratch_database(prefix: str, admin_url: str = PG_ADMIN_URL, *, migrate: bool = False,
                     keep: bool = False) -> Iterator[str]:
    """A new database named ``<prefix>_<random>``; yields its SQLAlchemy URL (brought to head by the real
    migrations with ``migrate``) and drops it on leaving, connections and all, unless ``keep``."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        url = sqlalchemy_url(admin_url, name)
        if migrate:
            from service.store.db import upgrade

            upgrade(url)
        yield url
    finally:
        if not keep:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
