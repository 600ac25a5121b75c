"""alert notifications

``alert_notification``: an alert's announcement in a chat channel (Slack), one row per alert and channel: the
posted message's channel id and ts (so later events reply in its thread and edit it in place, never post a
second top-level message), the delivery state with attempts and the last error (an outage delays a message but
never loses it), and what was already replied (the last note, the bisection jobs).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "alert_notification",
        sa.Column("id", ID, nullable=False),
        sa.Column("alert_id", ID, nullable=False),
        sa.Column("channel", sa.String(length=200), nullable=False),
        sa.Column("channel_id", sa.String(length=64), nullable=True),
        sa.Column("message_ts", sa.String(length=32), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("note_cursor", sa.BigInteger(), nullable=False),
        sa.Column("replied_jobs", sa.JSON(), nullable=False),
        sa.Column("rendered", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["alert_id"], ["alert.id"], name=op.f("fk_alert_notification_alert_id_alert"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_notification")),
        sa.UniqueConstraint("alert_id", "channel", name=op.f("uq_alert_notification_alert_id_channel")),
    )
    with op.batch_alter_table("alert_notification", schema=None) as batch_op:
        batch_op.create_index("ix_alert_notification_due", ["state", "next_attempt_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("alert_notification", schema=None) as batch_op:
        batch_op.drop_index("ix_alert_notification_due")
    op.drop_table("alert_notification")
