"""Comparisons in the store: what comparing two sides reads (each side's results, with their series, benchmarks
and environments), and the comparisons made on write (``stored_comparison`` and its rows), found by key and read
a page at a time. service/pipeline/compare.py, compare_page.py and stored_comparisons.py decide."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import String, case, cast, delete, insert, select
from sqlalchemy.orm import Session

from service.store.models import Benchmark, Environment, Result, Series, StoredComparison, StoredComparisonRow


def side_results(session: Session, run_ids: Sequence[int], environment_ids: Collection[int]) -> list[tuple[Any, ...]]:
    """Per result of these runs in these environments, by run and id: (series id, status, message, samples as the
    JSON text of its array, benchmark id, environment id, metric, unit, direction, roofline fraction, run id,
    benchmark version). Only what varies per result: each series, benchmark and environment is read once
    (``benchmarks``, ``environments``)."""
    return [tuple(row) for row in session.execute(
        select(Result.series_id, Result.status, Result.message, cast(Result.samples, String), Series.benchmark_id,
               Series.environment_id, Series.metric, Series.unit, Series.direction, Result.roofline_fraction,
               Result.run_id, Series.benchmark_version)
        .join(Series, Result.series_id == Series.id)
        .where(Result.run_id.in_(run_ids), Series.environment_id.in_(environment_ids))
        .order_by(Result.run_id, Result.id)
    )]


def benchmarks(session: Session, benchmark_ids: Collection[int]) -> Sequence[Benchmark]:
    return session.scalars(select(Benchmark).where(Benchmark.id.in_(benchmark_ids))).all()


def environments(session: Session, environment_ids: Collection[int]) -> Sequence[Environment]:
    """These environments, by fingerprint."""
    return session.scalars(select(Environment).where(Environment.id.in_(environment_ids))
                           .order_by(Environment.fingerprint)).all()


def all_environments(session: Session) -> Sequence[Environment]:
    """Every stored environment (a host kind and toolchain each: a few rows, not one per run)."""
    return session.scalars(select(Environment).order_by(Environment.id)).all()


def stored_comparison(session: Session, key: str) -> StoredComparison | None:
    return session.scalars(select(StoredComparison).filter_by(key=key)).first()


def stored_rows(session: Session, comparison_id: int) -> Sequence[dict[str, Any]]:
    """Every row of a stored comparison, in its order."""
    return session.scalars(select(StoredComparisonRow.row).where(StoredComparisonRow.comparison_id == comparison_id)
                           .order_by(StoredComparisonRow.position)).all()


def _order(sort: str, verdict_rank: Mapping[str, int]) -> list[Any]:
    row = StoredComparisonRow
    rank = case(*[(row.verdict == v, r) for v, r in verdict_rank.items()], else_=9)
    change_rank = case((row.verdict == "regression", 0), (row.verdict == "improvement", 1), else_=2)
    orders: dict[str, list[Any]] = {
        "name": [],
        "change": [change_rank, row.size.desc()],
        "ratio": [row.ratio.is_(None), row.ratio],
        "-ratio": [row.ratio.is_(None), row.ratio.desc()],
        "verdict": [rank, row.size.desc()],
        "p": [row.p_value.is_(None), row.p_value],
    }
    return [*orders[sort], row.position]


def stored_rows_page(session: Session, comparison_id: int, verdicts: Collection[str] | None, sort: str,
                     verdict_rank: Mapping[str, int], offset: int, limit: int) -> Sequence[dict[str, Any]]:
    """The rows ``[offset, offset + limit)`` of a stored comparison with one of ``verdicts`` (None: any), in the
    order ``sort`` names (name: the stored order; change, ratio, -ratio, verdict (by ``verdict_rank``), p)."""
    query = select(StoredComparisonRow.row).where(StoredComparisonRow.comparison_id == comparison_id)
    if verdicts is not None:
        query = query.where(StoredComparisonRow.verdict.in_(sorted(verdicts)))
    return session.scalars(query.order_by(*_order(sort, verdict_rank)).offset(offset).limit(limit)).all()


def delete_comparisons_of(session: Session, base_commit_id: int, head_commit_id: int) -> None:
    """Remove the stored comparisons of these two commits, with their rows."""
    superseded = select(StoredComparison.id).where(StoredComparison.base_commit_id == base_commit_id,
                                                   StoredComparison.head_commit_id == head_commit_id)
    session.execute(delete(StoredComparisonRow).where(StoredComparisonRow.comparison_id.in_(superseded)))
    session.execute(delete(StoredComparison).where(StoredComparison.id.in_(superseded)))


def insert_rows(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Store a comparison's rows (``stored_comparison_row`` columns), in one multi-row INSERT."""
    if rows:
        session.execute(insert(StoredComparisonRow), list(rows))
