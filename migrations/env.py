"""Alembic environment.

The URL comes from the Alembic config (set by ``kernelwatch db upgrade``) or else from the KernelWatch
settings. ``target_metadata`` is only handed in by callers that compare models with migrations (the drift
test), through ``config.attributes``, so that this file never imports the application's models.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from service.settings import load_settings

config = context.config
target_metadata = config.attributes.get("target_metadata")


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or load_settings().effective_database_url


def run_migrations_offline() -> None:
    url = _url()
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=url.startswith("sqlite"))
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
