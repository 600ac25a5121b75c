"""Issue 19: each closed vocabulary is one enum (kernelwatch/vocabulary.py), and everything that holds stored values
to it agrees with it: the models' columns and CHECK constraints, the literal lists the migrations write out (which
must not change when an enum grows, so they cannot import it), the manifest contract's Literals and the pure
cores' Literals. A member added to an enum fails here until a migration widens its CHECK."""

from __future__ import annotations

import importlib.util
import json
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import get_args

import pytest
from sqlalchemy import CheckConstraint
from sqlalchemy.dialects import postgresql, sqlite

from kernelwatch import vocabulary
from kernelwatch.vocabulary import (
    AlertState,
    ComparisonVerdict,
    DeliveryState,
    Polarity,
    ResultStatus,
    RooflineBound,
    RunStatus,
    Trigger,
)
from migrations import MIGRATIONS_DIR
from service.contract import manifest
from service.detect import compare, grouping
from service.model import roofline
from service.store import deliveries
from service.store.models import Base, Vocabulary, one_of

ENUMS = [value for value in vars(vocabulary).values()
         if isinstance(value, type) and issubclass(value, StrEnum) and value is not StrEnum]


def load_migration(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def migrated_checks() -> dict[tuple[str, str], tuple[tuple[str, ...], bool]]:
    """(table, column) → (values, nullable) of every vocabulary CHECK the migrations create, as the latest
    migration that writes one (a ``CHECKS`` table, as 0019's) left it."""
    found: dict[tuple[str, str], tuple[tuple[str, ...], bool]] = {}
    for path in sorted((MIGRATIONS_DIR / "versions").glob("[0-9][0-9][0-9][0-9]_*.py")):
        for table, column, values, nullable in getattr(load_migration(path), "CHECKS", ()):
            found[(table, column)] = (tuple(values), nullable)
    return found


def vocabulary_columns() -> dict[tuple[str, str], tuple[type[StrEnum], bool]]:
    return {(table.name, column.name): (column.type.vocabulary, bool(column.nullable))
            for table in Base.metadata.tables.values() for column in table.columns
            if isinstance(column.type, Vocabulary)}


def model_checks() -> dict[tuple[str, str], str]:
    """(table, column) → SQL of each CHECK the models declare, named ck_<table>_<column>."""
    found = {}
    for table in Base.metadata.tables.values():
        for constraint in table.constraints:
            if isinstance(constraint, CheckConstraint):
                name = str(constraint.name)
                prefix = f"ck_{table.name}_"
                assert name.startswith(prefix), name
                found[(table.name, name.removeprefix(prefix))] = str(constraint.sqltext)
    return found


def test_the_vocabularies_are_the_ones_the_issue_names() -> None:
    assert {e.__name__ for e in ENUMS} == {
        "Polarity", "ChangeKind", "FindingKind", "AlertKind", "AlertState", "NotificationState", "JobState",
        "JobPurpose", "DeliveryState", "PullRequestState", "Trigger", "RunStatus", "ResultStatus", "RooflineBound",
        "ComparisonVerdict"}
    for enum in ENUMS:
        for member in enum:
            # a member is its string: stored, compared, formatted and serialised as it always was
            assert member == member.value and f"{member}" == member.value and json.dumps(member) == f'"{member}"'


def test_every_vocabulary_column_has_a_check_built_from_its_enum() -> None:
    columns, checks = vocabulary_columns(), model_checks()
    assert len(columns) == 18
    assert set(checks) == set(columns)  # no CHECK without its typed column, no typed column without its CHECK
    for (table, column), (enum, nullable) in columns.items():
        assert checks[(table, column)] == str(one_of(column, enum, nullable).sqltext), (table, column)


def test_the_migrations_write_out_exactly_the_enums() -> None:
    columns, migrated = vocabulary_columns(), migrated_checks()
    assert set(migrated) == set(columns)
    for key, (enum, nullable) in columns.items():
        assert migrated[key] == (tuple(member.value for member in enum), nullable), key


def test_the_migration_writes_the_sql_the_models_declare() -> None:
    """So the metadata and a migrated database hold the same constraint (the drift test does not compare CHECKs;
    tests/integration/test_vocabulary_checks.py compares their names on both databases)."""
    migration = load_migration(MIGRATIONS_DIR / "versions" / "0019_vocabulary_checks.py")
    checks = model_checks()
    for table, column, values, nullable in migration.CHECKS:
        assert migration.condition(column, values, nullable) == checks[(table, column)], (table, column)


def test_a_wider_enum_would_fail_here() -> None:
    """Not vacuous: a CHECK written from an enum that gained a member differs from the migrated list."""
    grown = StrEnum("grown", {"PENDING": "pending", "SENT": "sent", "FAILED": "failed", "HELD": "held"})
    values, nullable = migrated_checks()[("alert_notification", "state")]
    assert tuple(member.value for member in grown) != values


def test_the_contract_and_the_pure_cores_name_the_same_values() -> None:
    assert get_args(manifest.Polarity) == tuple(Polarity)
    assert get_args(manifest.ResultStatus) == tuple(ResultStatus)
    assert get_args(manifest.RunStatus) == tuple(RunStatus)
    assert get_args(manifest.Trigger) == tuple(Trigger)
    assert get_args(compare.Verdict) == compare.VERDICTS == tuple(ComparisonVerdict)
    assert get_args(roofline.Bound) == tuple(RooflineBound)
    assert grouping.STATES == tuple(AlertState)
    assert deliveries.STATES == tuple(DeliveryState)


@pytest.mark.parametrize("dialect", [postgresql.dialect(), sqlite.dialect()], ids=["postgresql", "sqlite"])
def test_a_vocabulary_column_stores_strings_and_reads_members(dialect: object) -> None:
    column = Vocabulary(AlertState, 16)
    stored = column.process_bind_param(AlertState.FIXED, dialect)  # type: ignore[arg-type]
    assert stored == "fixed" and type(stored) is str
    assert column.process_bind_param("fixed", dialect) == "fixed"  # type: ignore[arg-type]
    assert column.process_bind_param(None, dialect) is None  # type: ignore[arg-type]
    assert column.process_result_value("fixed", dialect) is AlertState.FIXED  # type: ignore[arg-type]
    assert column.process_result_value(None, dialect) is None  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'closed' is not a valid AlertState"):
        column.process_result_value("closed", dialect)  # type: ignore[arg-type]
