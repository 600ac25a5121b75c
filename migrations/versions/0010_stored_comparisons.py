"""stored comparisons

A commit compared with the measured commit before it, on write: the commit page and the compare API read it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "stored_comparison",
        sa.Column("id", ID, nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("base_commit_id", ID, nullable=False),
        sa.Column("head_commit_id", ID, nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["base_commit_id"], ["commit.id"],
                                name=op.f("fk_stored_comparison_base_commit_id_commit"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["head_commit_id"], ["commit.id"],
                                name=op.f("fk_stored_comparison_head_commit_id_commit"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stored_comparison")),
        sa.UniqueConstraint("key", name=op.f("uq_stored_comparison_key")),
    )
    with op.batch_alter_table("stored_comparison", schema=None) as batch_op:
        batch_op.create_index("ix_stored_comparison_commits", ["head_commit_id", "base_commit_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("stored_comparison", schema=None) as batch_op:
        batch_op.drop_index("ix_stored_comparison_commits")
    op.drop_table("stored_comparison")
