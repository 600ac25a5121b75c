"""What ingest writes (service/pipeline/ingest.py): the rows runs share, created on first sight and tolerating a
concurrent ingest that creates them first, looked up in batches; and a run's results, inserted in bulk."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import insert, select, text, tuple_, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from service.store.chunks import chunks
from service.store.models import Benchmark, Result, Series

T = TypeVar("T")
CHUNK = 1000  # rows per batched lookup or INSERT


def get_or_create(session: Session, model: type[T], lookup: dict[str, Any], build: Callable[[], T]) -> T:
    """The row of ``model`` matching ``lookup``, or the one ``build`` makes (added in a savepoint, so losing a race
    to a concurrent ingest costs only this insert: the winner's row is read instead)."""
    stmt = select(model).filter_by(**lookup)
    found = session.scalars(stmt).first()
    if found is not None:
        return found
    try:
        with session.begin_nested():
            obj = build()
            session.add(obj)
        return obj
    except IntegrityError:
        return session.scalars(stmt).one()


def benchmark_ids(session: Session, keys: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], int]:
    """The ids of the stored benchmarks among these (suite, name, params_key)."""
    ids: dict[tuple[str, str, str], int] = {}
    for chunk in chunks(keys, CHUNK):
        for id_, suite, name, params_key in session.execute(
            select(Benchmark.id, Benchmark.suite, Benchmark.name, Benchmark.params_key)
            .where(tuple_(Benchmark.suite, Benchmark.name, Benchmark.params_key).in_(chunk))
        ):
            ids[(suite, name, params_key)] = id_
    return ids


def series_ids(session: Session, keys: Sequence[str]) -> dict[str, int]:
    """The ids of the stored series among these keys."""
    ids: dict[str, int] = {}
    for chunk in chunks(keys, CHUNK):
        found = session.execute(select(Series.id, Series.key).where(Series.key.in_(chunk)))
        ids.update((key, id_) for id_, key in found)
    return ids


def series_versions(session: Session, keys: Sequence[str]) -> dict[str, str | None]:
    """The benchmark version of each stored series among these keys (None: stored before versions were)."""
    versions: dict[str, str | None] = {}
    for chunk in chunks(keys, CHUNK):
        versions.update((key, version) for key, version in session.execute(
            select(Series.key, Series.benchmark_version).where(Series.key.in_(chunk))))
    return versions


def adopt_version(session: Session, keys: Sequence[str], version: str) -> None:
    """Give these series the version, where none has claimed them yet: of two versions arriving at once, the
    second goes on under its own key. One UPDATE per chunk, not one per series."""
    for chunk in chunks(keys, CHUNK):
        session.execute(update(Series).where(Series.key.in_(chunk), Series.benchmark_version.is_(None))
                        .values(benchmark_version=version))


def insert_results(session: Session, rows: list[dict[str, Any]], columns: Sequence[str]) -> list[int]:
    """Insert the rows in order and return their ids, in order. On PostgreSQL with psycopg: ids drawn from the
    sequence in one query, then one COPY of ``columns`` (a multi-row INSERT of a thousand results spends most of
    its time in the driver rewriting placeholders); elsewhere, multi-row INSERT ... RETURNING."""
    if not rows:
        return []
    connection = session.connection()
    if connection.dialect.name == "postgresql" and connection.dialect.driver == "psycopg":
        ids = list(session.scalars(text("SELECT nextval(pg_get_serial_sequence('result', 'id')) "
                                        "FROM generate_series(1, :n)"), {"n": len(rows)}))
        raw: Any = connection.connection.dbapi_connection
        statement = f"COPY result ({', '.join(columns)}) FROM STDIN"
        dbapi_error = connection.dialect.loaded_dbapi.Error
        try:
            with raw.cursor() as cursor, cursor.copy(statement) as copy:
                for id_, row in zip(ids, rows, strict=True):
                    row = {**row, "id": id_, "samples": json.dumps(row["samples"]), "cost": json.dumps(row["cost"])}
                    copy.write_row(tuple(row[c] for c in columns))
        except dbapi_error as exc:
            # As SQLAlchemy would have raised it (IntegrityError, OperationalError...): callers sort failures
            # by those classes (an unavailable database is transient, a duplicate is not).
            raise DBAPIError.instance(statement, None, exc, dbapi_error) from exc
        return ids
    result_ids: list[int] = []
    for chunk in chunks(rows, CHUNK):
        result_ids += session.scalars(insert(Result).returning(Result.id, sort_by_parameter_order=True), chunk)
    return result_ids
