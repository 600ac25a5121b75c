"""result_artifact parsed_version

The parser version that read an artifact for one result. Parsed records are stored per result, so whether a
result's kernels are known cannot be read off the artifact (shared by every run that captured the same bytes):
a new run naming bytes an earlier run's parse already read has no records until its own parse runs. Existing
links take their artifact's version: until now each result's parse ran when its run was stored.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("result_artifact", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parsed_version", sa.Integer(), nullable=True))
    op.execute("UPDATE result_artifact SET parsed_version = "
               "(SELECT artifact.parsed_version FROM artifact WHERE artifact.id = result_artifact.artifact_id)")


def downgrade() -> None:
    with op.batch_alter_table("result_artifact", schema=None) as batch_op:
        batch_op.drop_column("parsed_version")
