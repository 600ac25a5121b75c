"""results above their roof

A result whose measured time beats the time its roof allows (an achieved fraction over 1, past the measurement's
tolerance) says the roof is wrong for it, not that the kernel beat the hardware (issue 20): ingest stores that
as a flag, and the pages say so instead of showing a fraction over 100 %. Results stored before are flagged from
their stored fraction, by the same rule (service/model/result_roofline.py ``ABOVE_ROOF_TOLERANCE``, written out
here: migrations never import the code they outlive).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

ABOVE_ROOF_TOLERANCE = 0.05


def upgrade() -> None:
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.add_column(sa.Column("roofline_above", sa.Boolean(), nullable=True))
    op.execute(sa.text("UPDATE result SET roofline_above = (roofline_fraction > :limit) "
                       "WHERE roofline_fraction IS NOT NULL").bindparams(limit=1.0 + ABOVE_ROOF_TOLERANCE))


def downgrade() -> None:
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.drop_column("roofline_above")
