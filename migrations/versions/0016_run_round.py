"""run round

Which round of which interleaved session made a run (issue 16): `kernelwatch run --rounds`, `ci` and the
pull-request task make the runs of several commits back to back, round after round; runs of one session and
round index share the host's minute, and a comparison pairs them. Nullable: runs stored before, and runs made
alone, have none.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("round_session", sa.String(64), nullable=True))
        batch_op.add_column(sa.Column("round_index", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("round_index")
        batch_op.drop_column("round_session")
