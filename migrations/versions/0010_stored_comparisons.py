"""stored comparisons

A commit compared with the measured commit before it, on write: the commit page and the compare API read a page
of its rows.

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
        sa.Column("header", sa.JSON(), nullable=False),
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
    op.create_table(
        "stored_comparison_row",
        sa.Column("id", ID, nullable=False),
        sa.Column("comparison_id", ID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("size", sa.Float(), nullable=False),
        sa.Column("ratio", sa.Float(), nullable=True),
        sa.Column("p_value", sa.Float(), nullable=True),
        sa.Column("row", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["comparison_id"], ["stored_comparison.id"],
                                name=op.f("fk_stored_comparison_row_comparison_id_stored_comparison"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stored_comparison_row")),
        sa.UniqueConstraint("comparison_id", "position",
                            name=op.f("uq_stored_comparison_row_comparison_id_position")),
    )


def downgrade() -> None:
    op.drop_table("stored_comparison_row")
    with op.batch_alter_table("stored_comparison", schema=None) as batch_op:
        batch_op.drop_index("ix_stored_comparison_commits")
    op.drop_table("stored_comparison")
