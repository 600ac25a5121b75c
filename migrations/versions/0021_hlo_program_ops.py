"""the program's ops that are not fusions, with their fingerprints

XLA renumbers a module's sorts, convolutions, custom calls and loops as it renumbers its fusions, and each is a
step the profiler times under its name (issue 20): parser version 3 records each such op with a structural
fingerprint, so that two commits' op tables pair them by what they compute. Records parsed before hold none
(NULL): their ops join by name, as every op did.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hlo_module", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ops", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hlo_module", schema=None) as batch_op:
        batch_op.drop_column("ops")
