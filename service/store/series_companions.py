"""What the series page shows around a series' own points: each point's run and median interval, the static
signals and numerical error of the same benchmark per commit, and the same benchmark and metric measured in other
environments.

Series are keyed by the environment fingerprint, which hashes the jax/jaxlib (libtpu, CUDA) versions and the XLA
flags with the hardware: a toolchain change never happens inside a series, it starts a sibling one. So the page
lists those siblings and what differs, and where a sibling on the same hardware takes over end to start (its first
commit after this series' last, or its last before this one's first) that boundary is a toolchain event
(``ToolchainEvent``): the chart marks it at the boundary commit and the page links the series on the other side.

Static signals and the error live on the result that captured the artifacts (the run's wall-time result, see
``service.store.drilldown.records_result_id``), not on a device-time or GB/s result: they are read per run for
the series' benchmark and environment, whichever of its metrics carries them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernelwatch.hardware import hardware_label
from service.detect.compare import median_estimate
from service.store.models import Commit, Environment, KernelCode, Repository, Result, Run, Series
from service.store.queries import SeriesView
from service.store.times import utc

CONFIDENCE = 0.95  # the level of each point's median interval, as the compare report uses

# The fingerprinted environment details people read, in the order they usually explain a difference: the
# toolchain first, then the hardware, then the host.
_DETAIL_NAMES = {
    "jax_version": "jax", "jaxlib_version": "jaxlib", "libtpu_version": "libtpu", "xla_flags": "XLA flags",
    "libtpu_init_args": "libtpu args", "platform_version": "platform", "backend": "backend",
    "device_kind": "device", "device_count": "devices", "topology": "topology", "host_isa": "host ISA",
    "cpu_model": "CPU", "python_version": "python",
}
TOOLCHAIN_DETAILS = ("jax_version", "jaxlib_version", "libtpu_version", "xla_flags", "libtpu_init_args",
                     "platform_version")
MAX_DETAIL_CHARS = 80  # flag strings run to kilobytes; the page shows where they start to differ, cut here


@dataclass(frozen=True)
class PointRun:
    """The run behind a point (its newest, the one a click opens) and the interval of the point's median."""

    run_id: str  # the run's uid, as the API names it
    started_at: datetime
    ci_low: float | None  # None: too few samples for an interval at CONFIDENCE
    ci_high: float | None


@dataclass(frozen=True)
class CompanionPoint:
    sha: str
    value: float
    result_id: int  # the result that holds the value, opened on click


@dataclass(frozen=True)
class CompanionTrace:
    name: str  # "x86-64 instructions", "tpu-llo bundles", "max abs error"
    points: list[CompanionPoint]


@dataclass(frozen=True)
class SiblingSeries:
    """The same benchmark and metric of the same repository, measured in another environment."""

    id: int
    environment: str
    differences: list[str]  # "jax 0.4.30 → 0.4.31", this series' value first
    differences_back: list[str]  # the same, that series' value first
    same_hardware: bool  # only the toolchain or host differs: usually where this series continues
    points: int
    first_position: int | None
    last_position: int | None


@dataclass(frozen=True)
class ToolchainEvent:
    """Where this series and a sibling on the same hardware meet end to start: the toolchain (or the benchmark's
    code) changed there, and the history goes on in the other series."""

    sibling_id: int
    changes: list[str]  # earlier → later: "jax 0.8.0 → 0.10.0"
    continues: bool  # True: the sibling takes over after this series' last point; False: it ended before its first
    position: int  # this series' boundary point: its last (continues) or its first
    sibling_position: int  # the sibling's point on the other side of the boundary


@dataclass(frozen=True)
class SeriesCompanions:
    toolchain: str  # this series' toolchain in words
    runs: dict[str, PointRun] = field(default_factory=dict)  # by commit sha
    static: list[CompanionTrace] = field(default_factory=list)  # empty: no kernel code parsed for the benchmark
    error: list[CompanionTrace] = field(default_factory=list)  # empty: the benchmark reports no error
    siblings: list[SiblingSeries] = field(default_factory=list)
    events: list[ToolchainEvent] = field(default_factory=list)


def _shown(value: Any) -> str:
    text = str(value) if value not in (None, "") else "none"
    return text if len(text) <= MAX_DETAIL_CHARS else text[:MAX_DETAIL_CHARS - 1] + "…"


def environment_differences(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """What differs between two environments' fingerprinted details, named for people, toolchain first:
    ``["jax 0.4.30 → 0.4.31", "XLA flags none → --xla_foo"]``. Details this module has no name for come last,
    under their own keys, so a new fingerprinted fact is never hidden."""
    keys = [k for k in _DETAIL_NAMES if k in mine or k in theirs]
    keys += sorted((set(mine) | set(theirs)) - set(_DETAIL_NAMES))
    return [f"{_DETAIL_NAMES.get(k, k)} {_shown(mine.get(k))} → {_shown(theirs.get(k))}"
            for k in keys if mine.get(k) != theirs.get(k)]


def toolchain_text(details: Mapping[str, Any]) -> str:
    parts = [f"{_DETAIL_NAMES[k]} {_shown(details[k])}" for k in TOOLCHAIN_DETAILS if details.get(k)]
    return " · ".join(parts) if parts else "toolchain not recorded"


def series_companions(session: Session, view: SeriesView) -> SeriesCompanions:
    """Everything the series page shows beside ``view``'s own points, read from stored rows (the intervals are
    order statistics of the stored samples, a display of them, not a detection)."""
    series = session.get(Series, view.id)
    if series is None:
        return SeriesCompanions(toolchain="")
    env: Environment = series.environment
    static, error = _benchmark_signals(session, series, [p.sha for p in view.points])
    siblings = _siblings(session, series)
    return SeriesCompanions(toolchain=toolchain_text(env.details), runs=_point_runs(session, view), static=static,
                            error=error, siblings=siblings,
                            events=toolchain_events([p.position for p in view.points], siblings))


def toolchain_events(positions: list[int], siblings: list[SiblingSeries]) -> list[ToolchainEvent]:
    """The boundaries where a same-hardware sibling takes over from this series, or this series from it: their
    spans of commits meet end to start. Siblings measured over the same commits (two runners' toolchains side
    by side) are no event; they stay in the list of siblings."""
    if not positions:
        return []
    first, last = min(positions), max(positions)
    events = []
    for s in siblings:
        if not s.same_hardware or s.first_position is None or s.last_position is None:
            continue
        if s.first_position > last:
            events.append(ToolchainEvent(s.id, s.differences, True, last, s.first_position))
        elif s.last_position < first:
            events.append(ToolchainEvent(s.id, s.differences_back, False, first, s.last_position))
    # The nearest boundary first: of several, that one is where this series' own history turned.
    return sorted(events, key=lambda e: (abs(e.sibling_position - e.position), e.sibling_id))


def _point_runs(session: Session, view: SeriesView) -> dict[str, PointRun]:
    # One read by series rather than an IN list of every result id: a long series has thousands.
    runs = {rid: (uid, started) for rid, uid, started in session.execute(
        select(Result.id, Run.run_uid, Run.started_at).join(Run, Run.id == Result.run_id)
        .where(Result.series_id == view.id))}
    out = {}
    for p in view.points:
        if not p.result_ids or p.result_ids[-1] not in runs:
            continue
        uid, started = runs[p.result_ids[-1]]
        estimate = median_estimate(p.samples, CONFIDENCE) if p.samples else None
        out[p.sha] = PointRun(run_id=uid, started_at=utc(started),
                              ci_low=estimate.low if estimate else None, ci_high=estimate.high if estimate else None)
    return out


def _benchmark_signals(session: Session, series: Series,
                       shas: Sequence[str]) -> tuple[list[CompanionTrace], list[CompanionTrace]]:
    """(static, error): per commit of the series, the newest default-branch run's kernel counts and max abs error of the
    benchmark in this environment (a commit measured twice compiled the same code; the newest is what a
    click on the main point opens too). ``shas``: the series' commits in its order, which every trace's points
    follow (read in the order the runs were made, a line drawn through them went back and forth between commits
    on the chart's axis of commits)."""
    results = (
        select(Result.id.label("result_id"), Commit.sha.label("sha"), Result.max_abs_error.label("error"),
               Run.started_at.label("started_at"))
        .join(Series, Series.id == Result.series_id).join(Run, Run.id == Result.run_id)
        .join(Commit, Commit.id == Run.commit_id).join(Repository, Repository.id == Commit.repository_id)
        .where(Series.benchmark_id == series.benchmark_id, Series.environment_id == series.environment_id,
               Series.repository_id == series.repository_id, Result.status == "ok",
               Run.branch == Repository.default_branch)
        .subquery()
    )
    order = (results.c.started_at, results.c.result_id)
    wanted = set(shas)
    error: dict[str, CompanionPoint] = {}
    for rid, sha, value in session.execute(
            select(results.c.result_id, results.c.sha, results.c.error)
            .where(results.c.error.is_not(None)).order_by(*order)):
        if sha in wanted:
            error[sha] = CompanionPoint(sha=sha, value=value, result_id=rid)  # newest run last: it wins
    counts: dict[str, dict[str, CompanionPoint]] = defaultdict(dict)
    for rid, sha, isa, instructions, bundles in session.execute(
            select(results.c.result_id, results.c.sha, KernelCode.isa, func.sum(KernelCode.instructions),
                   func.sum(KernelCode.bundles))
            .join(KernelCode, KernelCode.result_id == results.c.result_id)
            .group_by(results.c.result_id, results.c.sha, results.c.started_at, KernelCode.isa)
            .order_by(*order, KernelCode.isa)):
        if sha not in wanted:
            continue
        # An LLO program's "instructions" are its ops; its bundles are what the TPU issues, the count to watch.
        if bundles is not None:
            counts[f"{isa} bundles"][sha] = CompanionPoint(sha=sha, value=float(bundles), result_id=rid)
        if instructions is not None:
            name = f"{isa} ops" if isa == "tpu-llo" else f"{isa} instructions"
            counts[name][sha] = CompanionPoint(sha=sha, value=float(instructions), result_id=rid)
    def ordered(by_sha: dict[str, CompanionPoint]) -> list[CompanionPoint]:
        return [by_sha[sha] for sha in dict.fromkeys(shas) if sha in by_sha]

    static = [CompanionTrace(name=name, points=ordered(by_sha)) for name, by_sha in sorted(counts.items())]
    return static, [CompanionTrace(name="max abs error", points=ordered(error))] if error else []


def _siblings(session: Session, series: Series) -> list[SiblingSeries]:
    rows = session.execute(
        select(Series.id, Environment, Series.benchmark_version)
        .join(Environment, Environment.id == Series.environment_id)
        .where(Series.repository_id == series.repository_id, Series.benchmark_id == series.benchmark_id,
               Series.metric == series.metric, Series.id != series.id)
    ).all()
    if not rows:
        return []
    spans = {sid: (n, first, last) for sid, n, first, last in session.execute(
        select(Result.series_id, func.count(func.distinct(Commit.id)), func.min(Commit.position),
               func.max(Commit.position))
        .join(Run, Run.id == Result.run_id).join(Commit, Commit.id == Run.commit_id)
        .join(Repository, Repository.id == Commit.repository_id)
        .where(Result.series_id.in_([sid for sid, _, _ in rows]), Result.status == "ok",
               Run.branch == Repository.default_branch)
        .group_by(Result.series_id))}
    mine: Environment = series.environment
    out = []
    for sid, env, version in rows:
        n, first, last = spans.get(sid, (0, None, None))
        # An edited benchmark (another version of its code, runners/suite.py) is a sibling in the same environment.
        mine_code, that_code = series.benchmark_version or "?", version or "?"
        edited = [f"benchmark code {mine_code} → {that_code}"] if version != series.benchmark_version else []
        edited_back = [f"benchmark code {that_code} → {mine_code}"] if edited else []
        out.append(SiblingSeries(
            id=sid, environment=hardware_label(env.backend, env.device_kind, env.device_count),
            differences=edited + environment_differences(mine.details, env.details),
            differences_back=edited_back + environment_differences(env.details, mine.details),
            same_hardware=(env.backend, env.device_kind, env.device_count)
            == (mine.backend, mine.device_kind, mine.device_count),
            points=n, first_position=first, last_position=last))
    # Where the series most likely continues first: same hardware, most recently measured.
    out.sort(key=lambda s: (not s.same_hardware, -(s.last_position if s.last_position is not None else -1), s.id))
    return out
