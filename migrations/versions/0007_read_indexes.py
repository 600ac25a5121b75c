"""indexes of the bounded reads

The findings, commits and alerts reads page newest first by a key (``created_at, id``; ``authored_at, position,
id``; ``state, id``); an index on each key lets both databases answer a page by walking the index backwards
from the cursor, instead of sorting every matching row for each page.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("finding", schema=None) as batch_op:
        batch_op.create_index("ix_finding_created", ["created_at", "id"], unique=False)
    with op.batch_alter_table("commit", schema=None) as batch_op:
        batch_op.create_index("ix_commit_authored", ["authored_at", "position", "id"], unique=False)
    with op.batch_alter_table("alert", schema=None) as batch_op:
        batch_op.create_index("ix_alert_state", ["state", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("alert", schema=None) as batch_op:
        batch_op.drop_index("ix_alert_state")
    with op.batch_alter_table("commit", schema=None) as batch_op:
        batch_op.drop_index("ix_commit_authored")
    with op.batch_alter_table("finding", schema=None) as batch_op:
        batch_op.drop_index("ix_finding_created")
