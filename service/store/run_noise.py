"""A series' spread between runs of the same code, read from its stored history: what a comparison side of one
run is tested against (one run says nothing about how far the next process would land).

The spread is learned where the code is known to be the same: the runs of one commit in one series (rounds of
the demo or of `kernelwatch run --rounds`, confirmation runs, re-runs). Each run is reduced to the log of its
median, and the squared deviations around each commit's own mean are pooled (service/detect/run_stats.py,
``pooled_noise``). Only the newest commits that have two runs or more are read, so the figure follows the host
as it is now and a long history costs no more than a short one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.detect.run_stats import RunNoise, pooled_noise
from service.store.models import Result, Run

HISTORY_COMMITS = 30  # the newest commits with replicated runs read per series


def _groups(session: Session, series_ids: Collection[int],
            excluded_runs: Collection[int]) -> dict[int, list[int]]:
    """Per series, its newest commits (ids) that have two runs or more with a measured result of it."""
    stmt = (select(Result.series_id, Run.commit_id, func.max(Run.started_at).label("newest"))
            .join(Run, Run.id == Result.run_id)
            .where(Result.series_id.in_(list(series_ids)), Result.status == "ok")
            .group_by(Result.series_id, Run.commit_id)
            .having(func.count(func.distinct(Result.run_id)) >= 2))
    if excluded_runs:
        stmt = stmt.where(Result.run_id.not_in(list(excluded_runs)))
    newest: dict[int, list[tuple[object, int]]] = defaultdict(list)
    for series_id, commit_id, when in session.execute(stmt):
        newest[series_id].append((when, commit_id))
    return {series_id: [c for _, c in sorted(found, key=lambda w: (w[0] is not None, w[0]), reverse=True)
                        [:HISTORY_COMMITS]]
            for series_id, found in newest.items()}


def run_noise(session: Session, series_ids: Collection[int],
              excluded_runs: Collection[int] = ()) -> dict[int, RunNoise]:
    """Each series' spread between runs of one commit (those with any), leaving out the runs compared (they count
    already; the other runs of the same commits are replicates like any)."""
    if not series_ids:
        return {}
    groups = _groups(session, series_ids, excluded_runs)
    wanted = {(s, c) for s, commits in groups.items() for c in commits}
    if not wanted:
        return {}
    rows = session.execute(
        select(Result.series_id, Run.commit_id, Result.run_id, Result.samples)
        .join(Run, Run.id == Result.run_id)
        .where(Result.series_id.in_(list(groups)), Run.commit_id.in_({c for _, c in wanted}),
               Result.status == "ok", Result.run_id.not_in(list(excluded_runs) or [-1]))
    ).all()
    per_run: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for series_id, commit_id, run_id, samples in rows:
        if (series_id, commit_id) in wanted:
            per_run[(series_id, commit_id, run_id)].extend(float(v) for v in samples or ())
    logs: dict[tuple[int, int], list[float]] = defaultdict(list)
    for (series_id, commit_id, _), values in per_run.items():
        median = float(np.median(values)) if values else 0.0
        if median > 0 and math.isfinite(median):
            logs[(series_id, commit_id)].append(math.log(median))
    by_series: dict[int, list[list[float]]] = defaultdict(list)
    for (series_id, _), group in logs.items():
        by_series[series_id].append(group)
    out = {}
    for series_id, found in by_series.items():
        noise = pooled_noise(found)
        if noise is not None:
            out[series_id] = noise
    return out
