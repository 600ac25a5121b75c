"""pull requests: the interleaved sessions of the current scheduling, one per hardware

A pull request measured on several kinds of hardware (`KERNELWATCH_PR_HARDWARE=cpu,h200`) was reported
as soon as the first hardware's runs were in: a check run completed as a success on the CPU's rows while the
H200's task had not started. Each scheduling now names its tasks, so the runs of each hardware's task are one
known session (runners/worker.py: a task's runs are a session named after its first run, whose id is the task's),
and the report waits for every one of them. Rows stored before have none (reported as before).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pull_request", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sessions", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pull_request", schema=None) as batch_op:
        batch_op.drop_column("sessions")
