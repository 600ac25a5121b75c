"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "benchmark",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("suite", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("params_key", sa.Text(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("unit", sa.String(length=32), nullable=False),
        sa.Column("direction", sa.String(length=20), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_benchmark")),
        sa.UniqueConstraint("suite", "name", "params_key", name=op.f("uq_benchmark_suite_name_params_key")),
    )
    op.create_table(
        "environment",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("backend", sa.String(length=64), nullable=False),
        sa.Column("device_kind", sa.String(length=200), nullable=False),
        sa.Column("device_count", sa.Integer(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environment")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_environment_fingerprint")),
    )
    op.create_table(
        "repository",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("default_branch", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_repository")),
        sa.UniqueConstraint("name", name=op.f("uq_repository_name")),
    )
    op.create_table(
        "commit",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("repository_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("sha", sa.String(length=40), nullable=False),
        sa.Column("parents", sa.JSON(), nullable=False),
        sa.Column("author", sa.String(length=500), nullable=False),
        sa.Column("authored_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repository.id"],
            name=op.f("fk_commit_repository_id_repository"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_commit")),
        sa.UniqueConstraint("repository_id", "sha", name=op.f("uq_commit_repository_id_sha")),
    )
    op.create_table(
        "series",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("repository_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("benchmark_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("environment_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("metric", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"], ["benchmark.id"], name=op.f("fk_series_benchmark_id_benchmark")
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["environment.id"], name=op.f("fk_series_environment_id_environment")
        ),
        sa.ForeignKeyConstraint(
            ["repository_id"],
            ["repository.id"],
            name=op.f("fk_series_repository_id_repository"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_series")),
        sa.UniqueConstraint("key", name=op.f("uq_series_key")),
    )
    op.create_table(
        "finding",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("series_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("commit_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("previous_commit_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("detector", sa.String(length=100), nullable=False),
        sa.Column("detector_version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("magnitude", sa.Float(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("value_before", sa.Float(), nullable=False),
        sa.Column("value_after", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attribution", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["commit_id"], ["commit.id"], name=op.f("fk_finding_commit_id_commit"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["previous_commit_id"], ["commit.id"], name=op.f("fk_finding_previous_commit_id_commit")
        ),
        sa.ForeignKeyConstraint(
            ["series_id"], ["series.id"], name=op.f("fk_finding_series_id_series"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_finding")),
        sa.UniqueConstraint(
            "series_id", "commit_id", "detector", name=op.f("uq_finding_series_id_commit_id_detector")
        ),
    )
    with op.batch_alter_table("finding", schema=None) as batch_op:
        batch_op.create_index("ix_finding_commit", ["commit_id"], unique=False)

    op.create_table(
        "run",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_uid", sa.String(length=64), nullable=False),
        sa.Column("manifest_digest", sa.String(length=64), nullable=False),
        sa.Column("commit_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("environment_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("branch", sa.String(length=255), nullable=True),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("host_details", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["commit_id"], ["commit.id"], name=op.f("fk_run_commit_id_commit"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["environment.id"], name=op.f("fk_run_environment_id_environment")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run")),
        sa.UniqueConstraint("run_uid", name=op.f("uq_run_run_uid")),
    )
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.create_index("ix_run_commit_env", ["commit_id", "environment_id"], unique=False)

    op.create_table(
        "result",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("series_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("samples", sa.JSON(), nullable=False),
        sa.Column("sample_count", sa.Integer(), nullable=False),
        sa.Column("median", sa.Float(), nullable=True),
        sa.Column("mean", sa.Float(), nullable=True),
        sa.Column("stddev", sa.Float(), nullable=True),
        sa.Column("minimum", sa.Float(), nullable=True),
        sa.Column("maximum", sa.Float(), nullable=True),
        sa.Column("compile_time_s", sa.Float(), nullable=True),
        sa.Column("flops", sa.Float(), nullable=True),
        sa.Column("bytes_accessed", sa.Float(), nullable=True),
        sa.Column("max_abs_error", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_result_run_id_run"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name=op.f("fk_result_series_id_series")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_result")),
        sa.UniqueConstraint("run_id", "series_id", name=op.f("uq_result_run_id_series_id")),
    )
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.create_index("ix_result_series", ["series_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.drop_index("ix_result_series")

    op.drop_table("result")
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_index("ix_run_commit_env")

    op.drop_table("run")
    with op.batch_alter_table("finding", schema=None) as batch_op:
        batch_op.drop_index("ix_finding_commit")

    op.drop_table("finding")
    op.drop_table("series")
    op.drop_table("commit")
    op.drop_table("repository")
    op.drop_table("environment")
    op.drop_table("benchmark")
