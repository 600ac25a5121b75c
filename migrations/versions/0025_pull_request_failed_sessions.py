"""pull requests: the sessions whose task failed, with the runner's message

A pull request measured on several kinds of hardware whose one hardware's task failed (its checkout or build)
completed its check run as failed, and the other hardware's verdict then waited for `/kernelwatch run`. The
failure is now kept per session and reported beside the other hardware's verdict. Rows stored before have none.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pull_request", schema=None) as batch_op:
        batch_op.add_column(sa.Column("failed_sessions", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pull_request", schema=None) as batch_op:
        batch_op.drop_column("failed_sessions")
