"""Series looked up by what they measure: a benchmark in an environment, the results that measured them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.store.models import Result, Run, Series


def series_of_metrics(session: Session, benchmark_id: int, environment_id: int,
                      metrics: Sequence[str]) -> list[tuple[int, str]]:
    """(id, metric) of the benchmark's series in the environment that measure one of ``metrics``."""
    return [(series_id, metric) for series_id, metric in session.execute(select(Series.id, Series.metric).where(
        Series.benchmark_id == benchmark_id, Series.environment_id == environment_id,
        Series.metric.in_(metrics)))]


def benchmark_series(session: Session, benchmark_id: int, environment_id: int) -> list[int]:
    """The ids of every series of the benchmark in the environment."""
    return list(session.scalars(select(Series.id).where(
        Series.benchmark_id == benchmark_id, Series.environment_id == environment_id)))


def parsed_result_places(session: Session, result_ids: Sequence[int]) -> list[tuple[int, int, int]]:
    """(benchmark id, environment id, commit id) of each of these results."""
    return [(benchmark_id, environment_id, commit_id) for benchmark_id, environment_id, commit_id in session.execute(
        select(Series.benchmark_id, Series.environment_id, Run.commit_id)
        .join(Result, Result.series_id == Series.id).join(Run, Run.id == Result.run_id)
        .where(Result.id.in_(list(result_ids)))
    )]
