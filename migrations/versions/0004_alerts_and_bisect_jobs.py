"""alerts, alert notes, bisect jobs; finding p-value and alert

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "alert",
        sa.Column("id", ID, nullable=False),
        sa.Column("repository_id", ID, nullable=False),
        sa.Column("commit_id", ID, nullable=False),
        sa.Column("previous_commit_id", ID, nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["commit_id"], ["commit.id"], name=op.f("fk_alert_commit_id_commit"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["previous_commit_id"], ["commit.id"], name=op.f("fk_alert_previous_commit_id_commit"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"], ["repository.id"], name=op.f("fk_alert_repository_id_repository"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert")),
        sa.UniqueConstraint(
            "repository_id", "previous_commit_id", "commit_id",
            name=op.f("uq_alert_repository_id_previous_commit_id_commit_id"),
        ),
    )
    op.create_table(
        "alert_note",
        sa.Column("id", ID, nullable=False),
        sa.Column("alert_id", ID, nullable=False),
        sa.Column("author", sa.String(length=200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("state_from", sa.String(length=16), nullable=False),
        sa.Column("state_to", sa.String(length=16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["alert_id"], ["alert.id"], name=op.f("fk_alert_note_alert_id_alert"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_note")),
    )
    with op.batch_alter_table("alert_note", schema=None) as batch_op:
        batch_op.create_index("ix_alert_note_alert", ["alert_id"], unique=False)

    # Before bisect_job exists: on SQLite the batch rebuilds the finding table, and nothing refers to it yet.
    with op.batch_alter_table("finding", schema=None) as batch_op:
        batch_op.add_column(sa.Column("p_value", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("alert_id", ID, nullable=True))
        batch_op.create_index("ix_finding_alert", ["alert_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_finding_alert_id_alert"), "alert", ["alert_id"], ["id"], ondelete="SET NULL"
        )

    op.create_table(
        "bisect_job",
        sa.Column("id", ID, nullable=False),
        sa.Column("series_id", ID, nullable=False),
        sa.Column("finding_id", ID, nullable=True),
        sa.Column("repository_id", ID, nullable=False),
        sa.Column("good_commit_sha", sa.String(length=40), nullable=False),
        sa.Column("bad_commit_sha", sa.String(length=40), nullable=False),
        sa.Column("hardware", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("purpose", sa.String(length=16), nullable=False),
        sa.Column("runs_requested", sa.JSON(), nullable=False),
        sa.Column("culprit_sha", sa.String(length=40), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["finding_id"], ["finding.id"], name=op.f("fk_bisect_job_finding_id_finding"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["series_id"], ["series.id"], name=op.f("fk_bisect_job_series_id_series"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"], ["repository.id"], name=op.f("fk_bisect_job_repository_id_repository"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bisect_job")),
    )
    with op.batch_alter_table("bisect_job", schema=None) as batch_op:
        batch_op.create_index("ix_bisect_job_finding", ["finding_id"], unique=False)
        batch_op.create_index("ix_bisect_job_series", ["series_id"], unique=False)
        batch_op.create_index("ix_bisect_job_state", ["state"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("bisect_job", schema=None) as batch_op:
        batch_op.drop_index("ix_bisect_job_state")
        batch_op.drop_index("ix_bisect_job_finding")
    op.drop_table("bisect_job")

    with op.batch_alter_table("finding", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_finding_alert_id_alert"), type_="foreignkey")
        batch_op.drop_index("ix_finding_alert")
        batch_op.drop_column("alert_id")
        batch_op.drop_column("p_value")

    with op.batch_alter_table("alert_note", schema=None) as batch_op:
        batch_op.drop_index("ix_alert_note_alert")
    op.drop_table("alert_note")
    op.drop_table("alert")
