"""A series' spread between runs of the same code, read from its stored history: what a comparison side of one
run is tested against (one run says nothing about how far the next process would land).

The spread is learned where the code is known to be the same: the runs of one commit in one series (rounds of
the demo or of `kernelwatch run --rounds`, confirmation runs, re-runs). Each run is reduced to the log of its
median, and the squared deviations around each commit's own mean are pooled (service/detect/run_stats.py,
``pooled_noise``); the spread of the same runs' samples comes with it, which tells a host whose runs agree as
closely as their samples allow from one whose processes land apart (``sample_spread``). Only the newest few
commits that have two runs or more are read, so the figure follows the host as it is now, and a long history (or
a suite of thousands of benchmarks) costs no more than a short one.

For sides measured apart (service/detect/run_stats.py ``session_units``) the unit is the session: the spread is
then between sessions of one commit, each session's runs taken together, over the newest commits measured in two
sessions or more (a run of no session is a session of its own).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection

import numpy as np
from sqlalchemy import String, cast, distinct, func, literal, select
from sqlalchemy.orm import Session

from service.detect.run_stats import RunNoise, could_be_quiet, pooled_noise, sessions_add_spread, with_samples
from service.store.models import Result, Run

HISTORY_COMMITS = 8  # the newest commits with replicated runs read: 8 commits of 2-3 runs give 8-16 df


def _replicated_runs(session: Session, environments: Collection[int], excluded_runs: Collection[int],
                     by_session: bool = False) -> dict[int, str]:
    """The runs of the newest commits that ran two times or more in one of these environments (``by_session``: in
    two sessions or more), each with its unit of replication: the run, or its session (a run of no session is one
    of its own). The runs table is small: this is what keeps a comparison of 5,000 benchmarks from scanning every
    result of their series."""
    own = literal("run ") + cast(Run.id, String)
    unit = func.coalesce(Run.round_session, own) if by_session else own
    runs = (select(Run.commit_id, Run.environment_id)
            .where(Run.environment_id.in_(list(environments)), Run.id.not_in(list(excluded_runs) or [-1]))
            .group_by(Run.commit_id, Run.environment_id)
            .having(func.count(distinct(unit)) >= 2)
            .order_by(func.max(Run.started_at).desc())
            .limit(HISTORY_COMMITS))
    pairs = {(c, e) for c, e in session.execute(runs)}
    if not pairs:
        return {}
    commits = {c for c, _ in pairs}
    found = session.execute(select(Run.id, Run.commit_id, Run.environment_id, unit)
                            .where(Run.commit_id.in_(commits), Run.id.not_in(list(excluded_runs) or [-1])))
    return {run_id: key for run_id, commit_id, environment_id, key in found if (commit_id, environment_id) in pairs}


def _run_samples(session: Session, series_ids: Collection[int], runs: Collection[int]
                 ) -> dict[tuple[int, int, int], list[float]]:
    """The ok samples of these series in these runs, per (series, commit, run)."""
    rows = session.execute(
        select(Result.series_id, Run.commit_id, Result.run_id, Result.samples)
        .join(Run, Run.id == Result.run_id)
        .where(Result.series_id.in_(list(series_ids)), Result.run_id.in_(list(runs)), Result.status == "ok")
    ).all()
    out: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for series_id, commit_id, run_id, samples in rows:
        out[(series_id, commit_id, run_id)].extend(float(v) for v in samples or ())
    return out


def run_noise(session: Session, series_ids: Collection[int], environments: Collection[int],
              excluded_runs: Collection[int] = (), by_session: bool = False) -> dict[int, RunNoise]:
    """Each series' spread between runs of one commit (where it has any) in these environments, leaving out the
    runs compared (they count already; the other runs of the same commits are replicates like any).
    ``by_session``: between sessions of one commit, each session's runs taken together as one, for sides measured
    apart (service/detect/run_stats.py session_units says why)."""
    if not series_ids or not environments:
        return {}
    runs = _replicated_runs(session, environments, excluded_runs, by_session)
    if not runs:
        return {}
    per_run: dict[tuple[int, int, str], list[float]] = defaultdict(list)
    for (series_id, commit_id, run_id), values in _run_samples(session, series_ids, runs).items():
        per_run[(series_id, commit_id, runs[run_id])].extend(values)
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


def sessions_vary(session: Session, series_ids: Collection[int], environments: Collection[int],
                  excluded_runs: Collection[int] = ()) -> dict[int, bool]:
    """Per series, whether its sessions of one commit land farther apart than their runs explain, or its history
    cannot tell (service/detect/run_stats.py ``sessions_add_spread``), over the newest commits measured in two
    sessions or more; series with no such history are absent (they cannot tell: compare sessions)."""
    if not series_ids or not environments:
        return {}
    runs = _replicated_runs(session, environments, excluded_runs, by_session=True)
    if not runs:
        return {}
    nested: dict[int, dict[int, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(dict))
    for (series_id, commit_id, run_id), values in _run_samples(session, series_ids, runs).items():
        median = float(np.median(values)) if values else 0.0
        if median > 0 and math.isfinite(median):
            nested[series_id][commit_id].setdefault(runs[run_id], []).append(math.log(median))
    return {series_id: sessions_add_spread([list(units.values()) for units in commits.values()])
            for series_id, commits in nested.items()}

