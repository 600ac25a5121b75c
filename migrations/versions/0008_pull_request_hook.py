"""pull-request hook

``webhook_delivery``: each GitHub delivery once (its X-GitHub-Delivery id is unique), with the payload the task
reads, so a redelivery is a no-op. ``pull_request``: a tracked pull request, its head and merge-base, whether a
fork's head was approved, and the ids of the one comment and the check run it updates in place.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "webhook_delivery",
        sa.Column("id", ID, nullable=False),
        sa.Column("delivery_uid", sa.String(length=100), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_delivery")),
        sa.UniqueConstraint("delivery_uid", name=op.f("uq_webhook_delivery_delivery_uid")),
    )
    op.create_table(
        "pull_request",
        sa.Column("id", ID, nullable=False),
        sa.Column("repository", sa.String(length=200), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("clone_url", sa.String(length=2000), nullable=False),
        sa.Column("installation_id", sa.BigInteger(), nullable=True),
        sa.Column("base_ref", sa.String(length=255), nullable=False),
        sa.Column("base_sha", sa.String(length=40), nullable=False),
        sa.Column("head_repository", sa.String(length=200), nullable=False),
        sa.Column("head_sha", sa.String(length=40), nullable=False),
        sa.Column("merge_base_sha", sa.String(length=40), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("approved_sha", sa.String(length=40), nullable=True),
        sa.Column("comment_id", sa.BigInteger(), nullable=True),
        sa.Column("check_run_id", sa.BigInteger(), nullable=True),
        sa.Column("check_run_sha", sa.String(length=40), nullable=True),
        sa.Column("reported_key", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pull_request")),
        sa.UniqueConstraint("repository", "number", name=op.f("uq_pull_request_repository_number")),
    )
    with op.batch_alter_table("pull_request", schema=None) as batch_op:
        batch_op.create_index("ix_pull_request_head", ["head_sha"], unique=False)
        batch_op.create_index("ix_pull_request_merge_base", ["merge_base_sha"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("pull_request", schema=None) as batch_op:
        batch_op.drop_index("ix_pull_request_merge_base")
        batch_op.drop_index("ix_pull_request_head")
    op.drop_table("pull_request")
    op.drop_table("webhook_delivery")
