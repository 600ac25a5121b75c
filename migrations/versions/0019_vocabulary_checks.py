"""vocabulary checks

Every column that holds a closed vocabulary (triggers, statuses, polarities, kinds, states, purposes, verdicts:
the enums of kernelwatch/vocabulary.py) gets a CHECK constraint listing its values, so that a value no code means
cannot be stored (issue 19). The lists are written out as of this revision: a migration does not import the
service's code, and must mean the same after an enum grows (growing one takes a migration of its own that widens
its CHECK). tests/unit/test_vocabulary.py holds these lists to the models' constraints and to the enums.

Rows stored before this revision hold only these values: every writer's vocabulary has only ever grown, and the
manifest contract, triage and the pipeline never wrote anything else. Should a database hold another value all
the same (a hand edit), the upgrade stops before it changes anything, naming each table, column, value and row
count, rather than failing half-way on a constraint.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_POLARITY = ("lower_is_better", "higher_is_better")
_ALERT_STATES = ("untriaged", "acknowledged", "investigating", "invalid", "wontfix", "fixed", "improvement")

# (table, column, values, nullable): each becomes CHECK named ck_<table>_<column>.
CHECKS: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    ("run", "trigger", ("push", "pr", "manual", "bisect", "confirm", "schedule"), False),
    ("run", "status", ("complete", "partial", "failed"), False),
    ("benchmark", "direction", _POLARITY, False),
    ("series", "direction", _POLARITY, False),
    ("result", "status", ("ok", "failed"), False),
    ("result", "roofline_bound", ("compute", "memory"), True),
    ("finding", "kind", ("time", "static", "numerics", "efficiency"), False),
    ("finding", "direction", ("regression", "improvement"), False),
    ("alert", "state", _ALERT_STATES, False),
    ("alert", "kind", ("regression", "improvement", "mixed"), False),
    ("alert_note", "state_from", _ALERT_STATES, False),
    ("alert_note", "state_to", _ALERT_STATES, True),
    ("alert_notification", "state", ("pending", "sent", "failed"), False),
    ("bisect_job", "state", ("pending", "running", "done", "failed", "cancelled"), False),
    ("bisect_job", "purpose", ("bisect", "confirm"), False),
    ("webhook_delivery", "state", ("received", "queued", "done", "failed"), False),
    ("pull_request", "state", ("waiting", "running", "closed"), False),
    ("stored_comparison_row", "verdict",
     ("regression", "improvement", "unchanged", "inconclusive", "failed", "new", "missing"), False),
)


def condition(column: str, values: tuple[str, ...], nullable: bool) -> str:
    """The CHECK's SQL, as service/store/models.py ``one_of`` writes it."""
    listed = ", ".join(f"'{value}'" for value in values)
    check = f"{column} IN ({listed})"
    return f"{column} IS NULL OR {check}" if nullable else check


def _strays() -> list[str]:
    """Each stored value outside its column's vocabulary, with its row count."""
    bind = op.get_bind()
    found = []
    for table, column, values, _ in CHECKS:
        col = sa.column(column, sa.String)
        rows = bind.execute(sa.select(col, sa.func.count()).select_from(sa.table(table, col))
                            .where(col.is_not(None), col.not_in(values)).group_by(col).order_by(col)).all()
        found += [f"{table}.{column} = {value!r} in {count} row(s)" for value, count in rows]
    return found


def upgrade() -> None:
    strays = _strays()
    if strays:
        raise RuntimeError(
            "migration 0019 adds CHECK constraints holding each state, kind and status column to its vocabulary "
            f"(kernelwatch/vocabulary.py), and this database holds values outside them: {'; '.join(strays)}. "
            "Nothing was changed. Update or delete those rows, then upgrade again.")
    tables: dict[str, list[tuple[str, tuple[str, ...], bool]]] = {}
    for table, column, values, nullable in CHECKS:
        tables.setdefault(table, []).append((column, values, nullable))
    for table, checks in tables.items():
        with op.batch_alter_table(table, schema=None) as batch_op:  # SQLite: one rebuild of the table
            for column, values, nullable in checks:
                batch_op.create_check_constraint(op.f(f"ck_{table}_{column}"), condition(column, values, nullable))


def downgrade() -> None:
    tables: dict[str, list[str]] = {}
    for table, column, _, _ in CHECKS:
        tables.setdefault(table, []).append(column)
    for table, columns in tables.items():
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in columns:
                batch_op.drop_constraint(op.f(f"ck_{table}_{column}"), type_="check")
