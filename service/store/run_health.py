"""Which runs were measured on an unhealthy host (issue 16): the read a verdict uses to say "this rests on N runs
taken under heavy steal"."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from runners.host_health import heavy
from service.store.chunks import chunks
from service.store.models import Run

_CHUNK = 1000  # ids per IN list: well under every driver's bound-parameter limit


def heavy_steal_runs(session: Session, run_ids: Iterable[int]) -> set[int]:
    """The ids among ``run_ids`` (Run.id, not run_uid) whose host_health says heavy steal
    (runners.host_health.HEAVY_STEAL_FRACTION). Runs without host_health (older runners, hosts without
    /proc/stat) and ids of no run are not in it."""
    wanted = sorted(set(run_ids))
    found: set[int] = set()
    for chunk in chunks(wanted, _CHUNK):
        # The fraction is judged here rather than in SQL: JSON operators differ between SQLite and PostgreSQL,
        # and a run's host_health is a few numbers.
        rows = session.execute(select(Run.id, Run.host_health).where(Run.id.in_(chunk)))
        found.update(id_ for id_, health in rows if heavy(health))
    return found
