"""finding metric and unit

What a finding's value_before and value_after measure, where that is not its series' metric and unit: a static
finding sits on a benchmark's wall-time series but counts instructions or bundles, and every view showed it as
wall_time in seconds. Nullable: None is the series' own. Existing static findings take the measure their
attribution recorded (``attribution.static.measure``); one without it keeps None until static detection runs on
its series again, which sets both.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# service.detect.static_diff.MEASURE_METRICS as of this revision (a migration does not import the service's code)
_MEASURE_METRICS = {
    "bundles": ("kernel_bundles", "bundles"),
    "kernel_instructions": ("kernel_instructions", "instructions"),
    "hlo_instructions": ("hlo_instructions", "instructions"),
    "none": ("kernel_instructions", "instructions"),
}


def _measure(attribution: Any) -> str | None:
    if isinstance(attribution, str):  # SQLite hands JSON back as text through a plain select
        try:
            attribution = json.loads(attribution)
        except ValueError:
            return None
    static = attribution.get("static") if isinstance(attribution, dict) else None
    measure = static.get("measure") if isinstance(static, dict) else None
    return measure if isinstance(measure, str) else None


def upgrade() -> None:
    with op.batch_alter_table("finding", schema=None) as batch_op:
        batch_op.add_column(sa.Column("metric", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("unit", sa.String(length=32), nullable=True))
    finding = sa.table("finding", sa.column("id", sa.Integer), sa.column("kind", sa.String),
                       sa.column("attribution", sa.JSON), sa.column("metric", sa.String), sa.column("unit", sa.String))
    bind = op.get_bind()
    rows = bind.execute(sa.select(finding.c.id, finding.c.attribution).where(finding.c.kind == "static")).all()
    for finding_id, attribution in rows:
        named = _MEASURE_METRICS.get(_measure(attribution) or "")
        if named is not None:
            bind.execute(finding.update().where(finding.c.id == finding_id).values(metric=named[0], unit=named[1]))


def downgrade() -> None:
    with op.batch_alter_table("finding", schema=None) as batch_op:
        batch_op.drop_column("unit")
        batch_op.drop_column("metric")
