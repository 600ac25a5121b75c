"""The roofline figures of stored results, as the backfill reads and writes them in keyset batches
(service/pipeline/roofline_backfill.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, aliased

from service.store.models import Benchmark, Environment, Result, Run, Series


def figure_inputs(session: Session, metric: str, after_id: int, limit: int, recompute: bool,
                  device_metric: str | None = None) -> list[tuple[Any, ...]]:
    """(result id, flops, bytes accessed, median, benchmark params, backend, device kind, run calibration, result
    cost figures) of the ok results of ``metric`` series after the result ``after_id``, by id, at most ``limit``;
    only those without figures unless ``recompute``. With ``device_metric``, the median is that metric's result of
    the same benchmark in the same run where there is one (a GPU's device time beside its wall time)."""
    median: Any = Result.median
    if device_metric is not None:
        device, device_series = aliased(Result), aliased(Series)
        median = func.coalesce(
            select(device.median).join(device_series, device_series.id == device.series_id)
            .where(device.run_id == Result.run_id, device_series.benchmark_id == Series.benchmark_id,
                   device_series.metric == device_metric, device.status == "ok")
            .limit(1).scalar_subquery(), Result.median)
    query = (select(Result.id, Result.flops, Result.bytes_accessed, median, Benchmark.params,
                    Environment.backend, Environment.device_kind, Run.calibration, Result.cost)
             .join(Series, Series.id == Result.series_id).join(Benchmark, Benchmark.id == Series.benchmark_id)
             .join(Run, Run.id == Result.run_id).join(Environment, Environment.id == Run.environment_id)
             .where(Series.metric == metric, Result.status == "ok")
             .order_by(Result.id))
    if not recompute:
        query = query.where(Result.roofline_s.is_(None))
    return [tuple(row) for row in session.execute(query.where(Result.id > after_id).limit(limit))]


def write_figures(session: Session, updates: Sequence[dict[str, object]]) -> None:
    """Write result columns by primary key: each dict holds ``id`` and the columns to set (one executemany)."""
    session.execute(update(Result), list(updates))
