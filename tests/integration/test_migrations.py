"""The migrations create exactly what the models describe, on PostgreSQL and on SQLite."""

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from service.store.db import alembic_config, current_revision, make_engine, upgrade
from service.store.models import Base


def test_upgrade_head_then_no_drift(database_url: str) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        head = ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()
        assert current_revision(engine) == head
        assert set(inspect(engine).get_table_names()) >= {
            "repository", "commit", "environment", "run", "benchmark", "series", "result", "finding"}
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(ctx, Base.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
    finally:
        engine.dispose()


def test_upgrade_is_repeatable(database_url: str) -> None:
    upgrade(database_url)
    upgrade(database_url)  # a second deploy's migrate step must be a no-op
