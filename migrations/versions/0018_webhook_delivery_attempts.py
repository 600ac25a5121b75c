"""webhook delivery attempts

A delivery whose handling fails (GitHub or the database unavailable) is retried, and dead-lettered (state
``failed``) after a bound instead of left ``queued`` for ever (issue 18): how many times it was tried, when last,
and the last error, for `kernelwatch deliveries` and GET /api/v1/github/deliveries.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhook_delivery", schema=None) as batch_op:
        batch_op.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("attempted_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        batch_op.create_index("ix_webhook_delivery_state", ["state"])


def downgrade() -> None:
    with op.batch_alter_table("webhook_delivery", schema=None) as batch_op:
        batch_op.drop_index("ix_webhook_delivery_state")
        batch_op.drop_column("last_error")
        batch_op.drop_column("attempted_at")
        batch_op.drop_column("attempts")
