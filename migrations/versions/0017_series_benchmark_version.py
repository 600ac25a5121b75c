"""series benchmark version

The version of the benchmark code a series measures (issue 17): a hash of the benchmark function's syntax tree
(runners/suite.py benchmark_version). An edited benchmark starts a series of its own instead of a step in the
old one. Nullable: series stored before have none, and the first version measured after the upgrade adopts
them, so no stored history is cut.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.add_column(sa.Column("benchmark_version", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.drop_column("benchmark_version")
