"""run host_health

How healthy the host was while a run measured (issue 16): CPU steal and busy fractions over the run's interval,
the load average and cores at its end, and on GPUs the clocks and throttle reasons, as the runner's manifest
reported them. Nullable: runs stored before, and runners that could not read /proc/stat (macOS), have none.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("host_health", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("host_health")
