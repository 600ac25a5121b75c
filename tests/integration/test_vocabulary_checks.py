"""The database holds each closed vocabulary (issue 19), on PostgreSQL and on SQLite: migration 0019's CHECK
constraints accept every member of each enum (and NULL where the column may be null), refuse anything else, and
the migration refuses to start, naming the rows, where a database holds a value outside them."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import JSON, CheckConstraint, Connection, Engine, inspect, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from kernelwatch.vocabulary import AlertState, JobPurpose, Polarity, Trigger
from migrations import MIGRATIONS_DIR
from service.store.db import current_revision, make_engine, upgrade
from service.store.models import Alert, Base, BisectJob, Run, Series, Vocabulary

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _migration() -> ModuleType:
    path = MIGRATIONS_DIR / "versions" / "0019_vocabulary_checks.py"
    spec = importlib.util.spec_from_file_location("migration_0019", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECKS: list[tuple[str, str, tuple[str, ...], bool]] = list(_migration().CHECKS)


def _value(column: Any) -> Any:
    if isinstance(column.type, Vocabulary):
        return next(iter(column.type.vocabulary)).value
    if isinstance(column.type, JSON):
        return {}
    if column.foreign_keys or column.primary_key and column.type.python_type is int:
        return 1  # every table's one row has id 1, so every reference finds its row
    python_type = column.type.python_type
    return {int: 1, float: 1.0, str: "x", datetime: T0, bool: False}[python_type]


def seed(conn: Connection) -> None:
    """One row in every table, parents first, in the columns the database has at its revision (a later
    migration's columns are not there yet)."""
    present = inspect(conn)
    for table in Base.metadata.sorted_tables:
        columns = {c["name"] for c in present.get_columns(table.name)}
        values = {c.name: _value(c) for c in table.columns if c.name in columns}
        # An INSERT of the model's table would add a later column's Python-side default (repository.first_commits):
        # a table of the present columns alone, with the model's types.
        at_revision = sa.Table(table.name, sa.MetaData(), *(sa.Column(c.name, c.type) for c in table.columns
                                                             if c.name in columns))
        conn.execute(at_revision.insert().values(values))


def _set(engine: Engine, table: str, column: str, value: str | None) -> None:
    quote = engine.dialect.identifier_preparer.quote
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {quote(table)} SET {quote(column)} = :value"), {"value": value})


def test_each_check_takes_its_vocabulary_and_refuses_the_rest(database_url: str) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        with engine.begin() as conn:
            seed(conn)
        for table, column, values, nullable in CHECKS:
            for value in (*values, *((None,) if nullable else ())):
                _set(engine, table, column, value)  # accepted
            for stray in ("bogus", "", values[0].upper(), values[0] + " "):
                with pytest.raises(IntegrityError, match=r"(?i)check"):
                    _set(engine, table, column, stray)
            _set(engine, table, column, values[0])
        with Session(engine) as session:  # what the models read back is the enum's member
            run, series, alert = session.get(Run, 1), session.get(Series, 1), session.get(Alert, 1)
            assert run is not None and series is not None and alert is not None
            assert run.trigger is Trigger.PUSH and series.direction is Polarity.LOWER_IS_BETTER
            assert alert.state is AlertState.UNTRIAGED
    finally:
        engine.dispose()


def test_the_database_holds_the_constraints_the_models_declare(database_url: str) -> None:
    """The drift test (test_migrations.py) does not compare CHECK constraints; their names are compared here."""
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        inspector = inspect(engine)
        for table in Base.metadata.sorted_tables:
            declared = {str(c.name) for c in table.constraints if isinstance(c, CheckConstraint)}
            assert {c["name"] for c in inspector.get_check_constraints(table.name)} == declared, table.name
    finally:
        engine.dispose()


def test_the_migration_names_stray_values_and_changes_nothing(database_url: str) -> None:
    upgrade(database_url, "0018")
    engine = make_engine(database_url)
    try:
        with engine.begin() as conn:
            seed(conn)
        _set(engine, "alert", "state", "closed")
        _set(engine, "bisect_job", "purpose", "reverse")
        with pytest.raises(RuntimeError) as refused:
            upgrade(database_url)
        message = str(refused.value)
        assert "alert.state = 'closed' in 1 row(s)" in message
        assert "bisect_job.purpose = 'reverse' in 1 row(s)" in message and "Nothing was changed" in message
        assert current_revision(engine) == "0018"
        assert all(inspect(engine).get_check_constraints(t) == [] for t in ("alert", "bisect_job", "run"))

        _set(engine, "alert", "state", AlertState.WONTFIX)
        _set(engine, "bisect_job", "purpose", JobPurpose.CONFIRM)
        upgrade(database_url, "0019")
        assert current_revision(engine) == "0019"
        with Session(engine) as session:
            alert, job = session.get(Alert, 1), session.get(BisectJob, 1)
            assert alert is not None and alert.state is AlertState.WONTFIX
            assert job is not None and job.purpose is JobPurpose.CONFIRM
    finally:
        engine.dispose()
