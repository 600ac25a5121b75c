"""webhook deliveries: the time of the last pull_request event acted on, and each delivery's body digest

A delivery that arrived late or was retried after a newer one (a push to B, then to C, B's delivery retried after
C's) was acted on as it came: the pull request went back to B, C's check run stayed in progress for good and the
comment showed B's verdict. The pull request keeps the ``updated_at`` of the newest event it acted on; an older
one is not acted on. Rows stored before have none (the next event sets it).

A delivery was stored once by its X-GitHub-Delivery id, which the signature does not cover: the same signed body
sent again under another id was acted on again (a replay ran a pull request's suite once more). Each delivery now
keeps the SHA-256 of its body, unique: the same body under any id is a duplicate. Rows stored before have none.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pull_request", schema=None) as batch_op:
        batch_op.add_column(sa.Column("event_updated_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("webhook_delivery", schema=None) as batch_op:
        batch_op.add_column(sa.Column("body_sha256", sa.String(64), nullable=True))
        batch_op.create_index("ix_webhook_delivery_body_sha256", ["body_sha256"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("webhook_delivery", schema=None) as batch_op:
        batch_op.drop_index("ix_webhook_delivery_body_sha256")
        batch_op.drop_column("body_sha256")
    with op.batch_alter_table("pull_request", schema=None) as batch_op:
        batch_op.drop_column("event_updated_at")
