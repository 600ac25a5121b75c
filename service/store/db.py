"""Engine and session construction, and applying migrations. Nothing happens at import."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import Transient
from migrations import MIGRATIONS_DIR

SQLITE_WRITE = "kernelwatch_sqlite_write"  # an execution option: this SQLite transaction writes (unit_of_work)
QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement cancelled (by statement_timeout, here)
# A run's upload is one transaction whose size the manifest cap bounds, not a read whose arguments could ask for the
# whole store: under load (or behind a concurrent submission of the same run, whose row lock it waits for) its
# statements may outlast the web read limit, and a 503 there only makes the runner send the whole run again.
INGEST_STATEMENT_TIMEOUT_MS = 120_000


def make_engine(url: str, **kwargs: Any) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30}, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            # pysqlite starts transactions lazily and on its own terms, so a SAVEPOINT could open the outer
            # transaction and its RELEASE commit it: take transaction control away from the driver...
            dbapi_conn.isolation_level = None
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            # WAL lets the dashboard read while a run is being ingested.
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            # ...and begin every transaction explicitly, so a rollback undoes everything since BEGIN. A unit of
            # work (a write) takes the write lock at once: a deferred transaction that read, then wrote after
            # another writer committed, failed at once with "database is locked" (its snapshot was stale; SQLite
            # does not wait then), where an immediate one waits its turn (the busy timeout). The embedded server's
            # background thread writes beside its requests (service/pipeline/background.py).
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(SQLITE_WRITE) else "BEGIN")

        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def limit_statements(engine: Engine, timeout_ms: int) -> None:
    """Have PostgreSQL cancel any statement on ``engine``'s connections that runs past ``timeout_ms``.

    For the web process's engine (``create_app`` calls it): a request must not hold a connection and a core for
    minutes, whatever its arguments. Workers build their engines without it, so ingest and detection in the
    distributed form keep no limit; the embedded form's in-process queue shares the web engine, and so the limit.
    Set as a connection option (``-c statement_timeout=...``): no round trip, and the pool's rollbacks cannot
    undo it. The connections already pooled are closed, so every connection from now on has it. A no-op on
    SQLite (no server to cancel anything) and for 0."""
    if timeout_ms <= 0 or engine.dialect.name != "postgresql":
        return
    setting = f"-c statement_timeout={int(timeout_ms)}"

    @event.listens_for(engine, "do_connect")
    def _statement_timeout(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        options = str(cparams.get("options") or "")
        if "statement_timeout=" not in options:  # once, however many apps share the engine
            cparams["options"] = f"{options} {setting}".strip()

    engine.dispose()


def cancelled_by_timeout(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it was raised from) is a statement PostgreSQL cancelled for running too long."""
    seen = 0
    while exc is not None and seen < 10:
        orig = getattr(exc, "orig", None)
        if getattr(orig, "sqlstate", None) == QUERY_CANCELED or getattr(exc, "sqlstate", None) == QUERY_CANCELED:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def unit_of_work(factory: sessionmaker[Session], statement_timeout_ms: int | None = None) -> Iterator[Session]:
    """One transaction: committed when the block ends normally, rolled back entirely otherwise.

    ``statement_timeout_ms`` replaces the connection's statement limit (``limit_statements``) for this transaction
    alone (PostgreSQL's ``SET LOCAL``; nothing on SQLite)."""
    session = factory()
    try:
        dialect = session.get_bind().dialect.name
        if dialect == "sqlite":
            session.connection(execution_options={SQLITE_WRITE: True})  # BEGIN IMMEDIATE (make_engine)
        elif statement_timeout_ms is not None and dialect == "postgresql":
            session.execute(text(f"SET LOCAL statement_timeout = {int(statement_timeout_ms)}"))
        yield session
        session.commit()
    except OperationalError as exc:
        session.rollback()
        raise Transient(f"database unavailable: {exc.orig}") from exc
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation would choke on a '%' in a password.
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
