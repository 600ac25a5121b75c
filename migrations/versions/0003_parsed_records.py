"""parsed records

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hlo_module",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("result_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("artifact_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=500), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("instructions", sa.Integer(), nullable=False),
        sa.Column("opcodes", sa.JSON(), nullable=False),
        sa.Column("fusions", sa.JSON(), nullable=False),
        sa.Column("parser_version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["artifact_id"], ["artifact.id"], name=op.f("fk_hlo_module_artifact_id_artifact")),
        sa.ForeignKeyConstraint(
            ["result_id"], ["result.id"], name=op.f("fk_hlo_module_result_id_result"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hlo_module")),
        sa.UniqueConstraint("result_id", "name", name=op.f("uq_hlo_module_result_id_name")),
    )
    op.create_table(
        "kernel_code",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("result_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("artifact_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=1000), nullable=False),
        sa.Column("isa", sa.String(length=32), nullable=False),
        sa.Column("instructions", sa.Integer(), nullable=True),
        sa.Column("bundles", sa.Integer(), nullable=True),
        sa.Column("mix", sa.JSON(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("parser_version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["artifact_id"], ["artifact.id"], name=op.f("fk_kernel_code_artifact_id_artifact")),
        sa.ForeignKeyConstraint(
            ["result_id"], ["result.id"], name=op.f("fk_kernel_code_result_id_result"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kernel_code")),
        sa.UniqueConstraint("result_id", "isa", "name", name=op.f("uq_kernel_code_result_id_isa_name")),
    )
    op.create_table(
        "op_stat",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("result_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("module", sa.String(length=500), nullable=False),
        sa.Column("op", sa.String(length=500), nullable=False),
        sa.Column("category", sa.String(length=32), nullable=False),
        sa.Column("occurrences", sa.Integer(), nullable=False),
        sa.Column("total_ns", sa.Float(), nullable=False),
        sa.Column("self_ns", sa.Float(), nullable=False),
        sa.Column("parser_version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["result_id"], ["result.id"], name=op.f("fk_op_stat_result_id_result"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_op_stat")),
        sa.UniqueConstraint("result_id", "module", "op", name=op.f("uq_op_stat_result_id_module_op")),
    )
    with op.batch_alter_table("artifact", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parsed_version", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("parse_error", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("artifact", schema=None) as batch_op:
        batch_op.drop_column("parse_error")
        batch_op.drop_column("parsed_version")

    op.drop_table("op_stat")
    op.drop_table("kernel_code")
    op.drop_table("hlo_module")
