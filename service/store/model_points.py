"""The /model page's points: per wall-time series of one repository on one hardware, the result that ingest stored
roofline figures for at the series' newest measured commit. Stored columns only: the page draws what ingest computed,
never recomputes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelwatch.hardware import hardware_label
from service.store.models import Benchmark, Commit, Environment, Repository, Result, Run, Series
from service.store.queries import COMMIT_ORDER

WALL_TIME = "wall_time"
MAX_ROWS = 100_000


@dataclass(frozen=True)
class HardwareChoice:
    environment_id: int
    backend: str
    device_kind: str

    @property
    def label(self) -> str:
        return f"{hardware_label(self.backend, self.device_kind, 1)} (#{self.environment_id})"


@dataclass(frozen=True)
class ModelPoint:
    result_id: int
    label: str  # suite/name and its parameters
    intensity: float  # FLOP per byte
    achieved_flops_per_s: float  # flops / median
    bound: str
    fraction: float | None
    peak_flops_per_s: float | None
    peak_bytes_per_s: float | None
    peak_source: str | None
    above: bool = False  # measured faster than its roof allows (Result.roofline_above): the roof is wrong for it
    params: dict[str, Any] = field(default_factory=dict)  # the benchmark's parameters (in the label, formatted)
    commit_sha: str = ""  # the commit the result measured


def _with_figures() -> Any:
    return (Series.metric == WALL_TIME, Result.status == "ok", Result.roofline_intensity.is_not(None),
            Result.roofline_bound.is_not(None))


def repositories(session: Session) -> list[str]:
    return list(session.scalars(select(Repository.name).order_by(Repository.name)))


def hardware_choices(session: Session, repository: str) -> list[HardwareChoice]:
    """Environments with at least one result of ``repository`` that has stored roofline figures."""
    query = (select(Environment.id, Environment.backend, Environment.device_kind).distinct()
             .join(Series, Series.environment_id == Environment.id)
             .join(Result, Result.series_id == Series.id)
             .join(Repository, Series.repository_id == Repository.id)
             .where(Repository.name == repository, *_with_figures())
             .order_by(Environment.id))
    return [HardwareChoice(row.id, row.backend, row.device_kind) for row in session.execute(query)]


def pick_hardware(choices: list[HardwareChoice], wanted: str | None,
                  key: Callable[[str, str], str] | None = None) -> HardwareChoice | None:
    """``wanted`` is an environment id, a device kind (case-insensitive) or, where ``key`` is given, the name it
    gives a (backend, device_kind) (the predict command's "h200"); None or no match takes the first."""
    if wanted:
        for choice in choices:
            if (wanted == str(choice.environment_id) or wanted.lower() == choice.device_kind.lower()
                    or (key is not None and wanted == key(choice.backend, choice.device_kind))):
                return choice
    return choices[0] if choices else None


def _label(suite: str, name: str, params: dict[str, Any]) -> str:
    shown = ",".join(f"{k}={v}" for k, v in sorted(params.items()))  # in the order every other page gives them
    return f"{suite}/{name}" + (f" [{shown}]" if shown else "")


def model_points(session: Session, repository: str, environment_id: int) -> list[ModelPoint]:
    """Each wall-time series' result with figures at its newest measured commit (the newest such run of it); one with
    no positive FLOPs or median is left out (it has no place on a log-log chart).

    By commit, not by when the run started: a confirmation or a bisection re-runs older commits after the newest was
    measured, and on the demo every point was the planted regression's parent, re-run last by its confirmation (the
    softmax at 15 % of its roof where the code as it stands reaches 4 %)."""
    query = (select(Result.id, Result.series_id, Result.flops, Result.median, Result.roofline_intensity,
                    Result.roofline_bound, Result.roofline_fraction, Result.roofline_peak_flops_per_s,
                    Result.roofline_peak_bytes_per_s, Result.roofline_peak_source, Result.roofline_above,
                    Benchmark.suite, Benchmark.name, Benchmark.params, Commit.sha)
             .join(Series, Result.series_id == Series.id)
             .join(Benchmark, Series.benchmark_id == Benchmark.id)
             .join(Repository, Series.repository_id == Repository.id)
             .join(Run, Result.run_id == Run.id)
             .join(Commit, Run.commit_id == Commit.id)
             .where(Repository.name == repository, Series.environment_id == environment_id, *_with_figures())
             .order_by(*(c.desc() for c in COMMIT_ORDER), Run.started_at.desc(), Result.id.desc())
             .limit(MAX_ROWS))
    seen: set[int] = set()
    points = []
    for row in session.execute(query):
        if row.series_id in seen:
            continue
        seen.add(row.series_id)
        if not row.flops or not row.median or row.flops <= 0 or row.median <= 0 or row.roofline_intensity <= 0:
            continue
        points.append(ModelPoint(
            result_id=row.id, label=_label(row.suite, row.name, dict(row.params)),
            intensity=float(row.roofline_intensity), achieved_flops_per_s=float(row.flops) / float(row.median),
            bound=str(row.roofline_bound), fraction=row.roofline_fraction,
            peak_flops_per_s=row.roofline_peak_flops_per_s, peak_bytes_per_s=row.roofline_peak_bytes_per_s,
            peak_source=row.roofline_peak_source, above=bool(row.roofline_above), params=dict(row.params),
            commit_sha=row.sha))
    return sorted(points, key=lambda p: p.label)


def environment_calibration(session: Session, environment_id: int) -> dict[str, Any] | None:
    """The newest host calibration stored with a run of the environment (Run.calibration), or None: what its
    results' memory roofs were chosen from, for the page to draw one roof per level."""
    query = (select(Run.calibration).where(Run.environment_id == environment_id, Run.calibration.is_not(None))
             .order_by(Run.started_at.desc(), Run.id.desc()).limit(1))
    found = session.scalar(query)
    return dict(found) if isinstance(found, dict) else None
