"""roofline figures

Every result's roofline figures, computed once at ingest, and the run's host calibration they may be measured
against (issue 9). Nullable: results stored before, and results without counts or known peaks, have none.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

RESULT_COLUMNS = (
    ("roofline_intensity", sa.Float()),
    ("roofline_bound", sa.String(length=8)),
    ("roofline_s", sa.Float()),
    ("roofline_fraction", sa.Float()),
    ("roofline_peak_flops_per_s", sa.Float()),
    ("roofline_peak_bytes_per_s", sa.Float()),
    ("roofline_peak_source", sa.String(length=500)),
)


def upgrade() -> None:
    with op.batch_alter_table("result", schema=None) as batch_op:
        for name, type_ in RESULT_COLUMNS:
            batch_op.add_column(sa.Column(name, type_, nullable=True))
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("calibration", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("calibration")
    with op.batch_alter_table("result", schema=None) as batch_op:
        for name, _ in reversed(RESULT_COLUMNS):
            batch_op.drop_column(name)
