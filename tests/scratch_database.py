"""A throwaway PostgreSQL database on the machine's server: tests, and the benches that start real processes."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

PG_ADMIN_URL = os.environ.get("KERNELWATCH_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")


def sqlalchemy_url(admin_url: str, name: str) -> str:
    """The SQLAlchemy URL (psycopg 3) of database ``name`` on the admin URL's server."""
    return f"{admin_url.rsplit('/', 1)[0]}/{name}".replace("postgresql://", "postgresql+psycopg://", 1)


@contextmanager
def scratch_database(prefix: str, admin_url: str = PG_ADMIN_URL, *, migrate: bool = False,
                     keep: bool = False, at_head: bool = False) -> Iterator[str]:
    """A new database named ``<prefix>_<random>``; yields its SQLAlchemy URL (brought to head by the real
    migrations with ``migrate``; a copy of this process's migrated template with ``at_head``) and drops it on
    leaving, connections and all, unless ``keep``."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    template = f' TEMPLATE "{_pg_template(admin_url)}"' if at_head else ""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{template}')
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


# Bringing a new database to head through the real migrations costs about a second of CPU, and most tests start
# from an empty database at head: each test process migrates one template per backend, once, and copies it
# (a file copy; PostgreSQL's CREATE DATABASE ... TEMPLATE). The migrations themselves are tested from empty and
# from each revision in tests/integration/test_migrations.py.
_templates: dict[str, str] = {}


def _sqlite_template() -> str:
    if "sqlite" not in _templates:
        directory = tempfile.mkdtemp(prefix="kw_template_")
        atexit.register(shutil.rmtree, directory, True)
        path = os.path.join(directory, "head.db")
        from service.store.db import upgrade

        upgrade(f"sqlite:///{path}")
        _templates["sqlite"] = path
    return _templates["sqlite"]


def _pg_template(admin_url: str) -> str:
    if "postgres" not in _templates:
        name = f"kw_template_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

        def drop() -> None:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

        atexit.register(drop)
        from service.store.db import upgrade

        upgrade(sqlalchemy_url(admin_url, name))  # alembic's env.py connects without a pool: nothing stays open
        _templates["postgres"] = name
    return _templates["postgres"]


def _pg_is_empty(url: str) -> bool:
    plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain) as conn:
        row = conn.execute("select count(*) from pg_tables where schemaname = 'public'").fetchone()
    return row is not None and row[0] == 0


def at_head(url: str, admin_url: str = PG_ADMIN_URL) -> None:
    """Bring a database to the migrations' head: a new, empty one as a copy of this process's migrated template,
    any other through the migrations (``upgrade``)."""
    from service.store.db import upgrade

    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///"):])
        if path.exists() and path.stat().st_size > 0:
            upgrade(url)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_sqlite_template(), path)
    elif url.startswith("postgresql") and _pg_is_empty(url):
        name = url.rsplit("/", 1)[1]
        template = _pg_template(admin_url)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    else:
        upgrade(url)
