"""a repository's root commits

Runs were filed under a repository's folder name alone, so two projects in folders of one name (two "kernels")
merged into one stored repository and their benchmarks of one name into one series. Manifests now carry the root
commits the measured commit descends from (repository.first_commits); the store keeps every stored history's, and
ingest refuses a run whose roots share none of them. Repositories stored before have none (the first run that
names them sets them).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repository", schema=None) as batch_op:
        batch_op.add_column(sa.Column("first_commits", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("repository", schema=None) as batch_op:
        batch_op.drop_column("first_commits")
