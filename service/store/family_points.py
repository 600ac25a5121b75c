"""The measured points of one benchmark: per parameter point and environment, the stored medians of its
wall-time series, newest first. What `kernelwatch predict` interpolates between."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.store.models import Benchmark, Commit, Environment, Repository, Result, Run, Series
from service.store.queries import COMMIT_ORDER

WALL_TIME = "wall_time"
# A point's time is the median of its newest medians, newest by commit (then by run): one slow run (a busy runner)
# does not move it, and a regression shows up once it is the majority of them. By commit, as /model's points
# (service/store/model_points.py): a confirmation re-runs older commits after the newest was measured.
NEWEST_MEDIANS = 5
MAX_ROWS = 100_000


@dataclass(frozen=True)
class StoredPoint:
    params: Mapping[str, Any]
    seconds: float  # median of the newest NEWEST_MEDIANS stored medians
    runs: int  # how many stored medians there were
    backend: str
    device_kind: str
    calibration: Mapping[str, Any] | None  # the newest calibrated run's (Run.calibration), None where none was
    # glibc's mmap threshold its environment's runs set (`--keep-pages`), None where they left glibc's own: where
    # the fresh-pages regime starts (service/model/predict.py fresh_pages_bytes).
    malloc_mmap_threshold: int | None = None


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def stored_points(session: Session, suite: str, name: str, repository: str | None = None) -> list[StoredPoint]:
    """One point per (params, environment) that has an ok wall-time result of ``suite/name``."""
    query = (
        select(Benchmark.params_key, Benchmark.params, Environment.id, Environment.backend, Environment.device_kind,
               Environment.details["malloc_mmap_threshold"].as_integer().label("mmap_threshold"), Run.calibration,
               Result.median)
        .join(Series, Result.series_id == Series.id)
        .join(Benchmark, Series.benchmark_id == Benchmark.id)
        .join(Environment, Series.environment_id == Environment.id)
        .join(Run, Result.run_id == Run.id)
        .join(Commit, Run.commit_id == Commit.id)
        .where(Benchmark.suite == suite, Benchmark.name == name, Series.metric == WALL_TIME,
               Result.status == "ok", Result.median.is_not(None), Result.median > 0)
        .order_by(*(c.desc() for c in COMMIT_ORDER), Run.started_at.desc(), Result.id.desc())
        .limit(MAX_ROWS)
    )
    if repository is not None:
        query = query.join(Repository, Series.repository_id == Repository.id).where(Repository.name == repository)
    grouped: dict[tuple[str, int], list[Any]] = {}
    for row in session.execute(query):
        grouped.setdefault((row.params_key, row[2]), []).append(row)
    points = []
    for rows in grouped.values():
        newest = rows[0]
        medians = [float(r.median) for r in rows[:NEWEST_MEDIANS]]
        calibration = next((r.calibration for r in rows if r.calibration), None)
        points.append(StoredPoint(params=dict(newest.params), seconds=_median(medians), runs=len(rows),
                                  backend=newest.backend, device_kind=newest.device_kind,
                                  calibration=dict(calibration) if calibration else None,
                                  malloc_mmap_threshold=newest.mmap_threshold))
    return points
