"""series unit and direction

A benchmark reports several metrics (wall time in s, lower is better; algbw in GB/s and recall, higher is
better), so the unit and the direction belong to the series, not to the benchmark row the metrics share.
Existing series take their benchmark's, which is right for the time metrics that were there first.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.add_column(sa.Column("unit", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("direction", sa.String(length=20), nullable=True))
    op.execute(
        "UPDATE series SET unit = (SELECT benchmark.unit FROM benchmark WHERE benchmark.id = series.benchmark_id), "
        "direction = (SELECT benchmark.direction FROM benchmark WHERE benchmark.id = series.benchmark_id)"
    )
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.alter_column("unit", existing_type=sa.String(length=32), nullable=False)
        batch_op.alter_column("direction", existing_type=sa.String(length=20), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.drop_column("direction")
        batch_op.drop_column("unit")
