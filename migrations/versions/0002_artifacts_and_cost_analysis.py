"""artifacts and cost analysis

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artifact",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifact")),
        sa.UniqueConstraint("sha256", name=op.f("uq_artifact_sha256")),
    )
    op.create_table(
        "result_artifact",
        sa.Column("result_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("artifact_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(["artifact_id"], ["artifact.id"], name=op.f("fk_result_artifact_artifact_id_artifact")),
        sa.ForeignKeyConstraint(
            ["result_id"], ["result.id"], name=op.f("fk_result_artifact_result_id_result"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("result_id", "artifact_id", "name", name=op.f("pk_result_artifact")),
    )
    with op.batch_alter_table("result_artifact", schema=None) as batch_op:
        batch_op.create_index("ix_result_artifact_artifact", ["artifact_id"], unique=False)

    with op.batch_alter_table("result", schema=None) as batch_op:
        # Existing results have no cost analysis: an empty object, not NULL.
        batch_op.add_column(sa.Column("cost", sa.JSON(), nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.drop_column("cost")

    with op.batch_alter_table("result_artifact", schema=None) as batch_op:
        batch_op.drop_index("ix_result_artifact_artifact")

    op.drop_table("result_artifact")
    op.drop_table("artifact")
