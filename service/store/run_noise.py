"""A series' spread between runs of the same code, read from its stored history: what a comparison side of one
run is tested against (one run says nothing about how far the next process would land).

The spread is learned where the code is known to be the same: the runs of one commit in one series (rounds of
the demo or of `kernelwatch run --rounds`, confirmation runs, re-runs). Each run is reduced to the log of its
median, and the squared deviations around each commit's own mean are pooled (service/detect/run_stats.py,
``pooled_noise``); the spread of the same runs' samples comes with it, which tells a host whose runs agree as
closely as their samples allow from one whose processes land apart (``sample_spread``). Only the newest few
commits that have two runs or more are read, so the figure follows the host as it is now, and a long history (or
a suite of thousands of benchmarks) costs no more than a short one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.detect.run_stats import RunNoise, could_be_quiet, pooled_noise, with_samples
from service.store.models import Result, Run

HISTORY_COMMITS = 8  # the newest commits with replicated runs read: 8 commits of 2-3 runs give 8-16 df


def _replicated_runs(session: Session, environments: Collection[int], excluded_runs: Collection[int]) -> list[int]:
    """The runs of the newest commits that ran two times or more in one of these environments (the runs table is
    small: this is what keeps a comparison of 5,000 benchmarks from scanning every result of their series)."""
    runs = (select(Run.commit_id, Run.environment_id)
            .where(Run.environment_id.in_(list(environments)), Run.id.not_in(list(excluded_runs) or [-1]))
            .group_by(Run.commit_id, Run.environment_id)
            .having(func.count(Run.id) >= 2)
            .order_by(func.max(Run.started_at).desc())
            .limit(HISTORY_COMMITS))
    pairs = {(c, e) for c, e in session.execute(runs)}
    if not pairs:
        return []
    commits = {c for c, _ in pairs}
    found = session.execute(select(Run.id, Run.commit_id, Run.environment_id)
                            .where(Run.commit_id.in_(commits), Run.id.not_in(list(excluded_runs) or [-1])))
    return [run_id for run_id, commit_id, environment_id in found if (commit_id, environment_id) in pairs]


def run_noise(session: Session, series_ids: Collection[int], environments: Collection[int],
              excluded_runs: Collection[int] = ()) -> dict[int, RunNoise]:
    """Each series' spread between runs of one commit (where it has any) in these environments, leaving out the
    runs compared (they count already; the other runs of the same commits are replicates like any)."""
    if not series_ids or not environments:
        return {}
    runs = _replicated_runs(session, environments, excluded_runs)
    if not runs:
        return {}
    rows = session.execute(
        select(Result.series_id, Run.commit_id, Result.run_id, Result.samples)
        .join(Run, Run.id == Result.run_id)
        .where(Result.series_id.in_(list(series_ids)), Result.run_id.in_(runs), Result.status == "ok")
    ).all()
    per_run: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for series_id, commit_id, run_id, samples in rows:
        per_run[(series_id, commit_id, run_id)].extend(float(v) for v in samples or ())
    logs: dict[tuple[int, int], list[float]] = defaultdict(list)
    run_samples: dict[tuple[int, int], list[list[float]]] = defaultdict(list)
    for (series_id, commit_id, _), values in per_run.items():
        median = float(np.median(values)) if values else 0.0
        if median > 0 and math.isfinite(median):
            logs[(series_id, commit_id)].append(math.log(median))
            run_samples[(series_id, commit_id)].append(values)
    by_series: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for key in logs:
        by_series[key[0]].append(key)
    out = {}
    for series_id, keys in by_series.items():
        # The samples inside the same runs, only where the runs' spread could be quiet enough to need them
        # (run_stats.could_be_quiet, from the runs' ranges): reading them costs a pass over pairs of samples.
        noise = pooled_noise([logs[key] for key in keys])
        commits = [run_samples[key] for key in keys]
        if noise is not None and could_be_quiet(noise, [run for runs in commits for run in runs]):
            noise = with_samples(noise, commits)
        if noise is not None:
            out[series_id] = noise
    return out
