"""Detection on write as a series ages: the bounded read (the newest HISTORY_LIMIT commits) against reading the
whole history, which is what detection on write did before the bound.

Data: one repository, --series series (default 20: a small suite) with --samples samples a commit (default 10),
ingested through the real path (``ingest_manifest``, one manifest a commit) into a scratch PostgreSQL database
(or SQLite with --sqlite), at history lengths of --lengths commits (default 250, 1,000, 4,000), each series with
a +20 % step 30 commits from its end at 1 % noise. At each length, every series is detected --repeats times (the
median is reported) both ways: ``detect_series`` with its default limit, and with a limit past the history's
length (the whole history read, the peer). The figures: milliseconds per series per write, the ratio, and whether
both found the step (they must).

    python bench/detect_on_write.py [--lengths 250,1000,4000] [--series 20] [--samples 10] [--repeats 3]
                                    [--sqlite] [--admin-url URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script: the service and tests packages import from the root
    sys.path.insert(0, str(REPO_ROOT))

from service.contract import parse_manifest  # noqa: E402
from service.detect.series_detector import EDivisiveDetector  # noqa: E402
from service.pipeline.detection import HISTORY_LIMIT, detect_series  # noqa: E402
from service.pipeline.ingest import ingest_manifest  # noqa: E402
from service.store.db import make_engine, make_session_factory, unit_of_work, upgrade  # noqa: E402
from service.store.models import Commit, Finding, Series  # noqa: E402
from tests import builders  # noqa: E402
from tests.scratch_database import PG_ADMIN_URL, scratch_database  # noqa: E402

STEP = 0.20
STEP_FROM_END = 30


@contextmanager
def database(sqlite: bool, admin_url: str) -> Iterator[str]:
    if sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"
    else:
        with scratch_database("kw_bench_detect", admin_url) as url:
            yield url


def ingest(sessions: sessionmaker[Session], start: int, stop: int, length: int, series: int, samples: int,
           rng: np.random.Generator) -> None:
    """Commits start..stop-1 of a history that will be ``length`` long (its step ``STEP_FROM_END`` before)."""
    for position in range(start, stop):
        level = 1e-3 * (1 + STEP if position >= length - STEP_FROM_END else 1.0)
        results = [builders.result(name=f"kernel_{i}", samples=[float(v) for v in
                                                                 level * (1 + 0.01 * rng.standard_normal(samples))])
                   for i in range(series)]
        with unit_of_work(sessions) as s:
            ingest_manifest(s, parse_manifest(builders.manifest(position, results)))


def time_detection(sessions: sessionmaker[Session], limit: int, repeats: int) -> tuple[float, bool]:
    """Median milliseconds per series of one detection pass over every series; whether each found the step."""
    detector = EDivisiveDetector()
    with sessions() as s:
        ids = list(s.scalars(select(Series.id).where(Series.metric == "wall_time")))
    passes = []
    for _ in range(repeats):
        with unit_of_work(sessions) as s:
            started = time.perf_counter()
            for sid in ids:
                detect_series(s, sid, detector, limit=limit)
            passes.append((time.perf_counter() - started) / len(ids) * 1e3)
    with sessions() as s:
        top = s.scalar(select(Commit.position).order_by(Commit.position.desc()).limit(1))
        assert top is not None
        at_step = {sid for sid, position in s.execute(
            select(Finding.series_id, Commit.position).join(Commit, Commit.id == Finding.commit_id)
            .where(Finding.series_id.in_(ids))) if position == top + 1 - STEP_FROM_END}
    return statistics.median(passes), at_step == set(ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", default="250,1000,4000")
    parser.add_argument("--series", type=int, default=20)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument("--admin-url", default=PG_ADMIN_URL)
    args = parser.parse_args()
    lengths = sorted(int(x) for x in args.lengths.split(","))
    print(f"detection on write: {args.series} series, {args.samples} samples a commit, a +{STEP:.0%} step "
          f"{STEP_FROM_END} commits from the end, {'SQLite' if args.sqlite else 'PostgreSQL'}; bounded read = "
          f"newest {HISTORY_LIMIT} commits, peer = the whole history")
    print(f"{'commits':>8}  {'bounded ms/series':>18}  {'whole ms/series':>16}  {'whole / bounded':>15}  step found")
    rng = np.random.default_rng(0)
    for length in lengths:
        # Each length is a fresh history (the step sits STEP_FROM_END from its own end).
        with database(args.sqlite, args.admin_url) as url:
            upgrade(url)
            engine = make_engine(url)
            sessions = make_session_factory(engine)
            ingest(sessions, 0, length, length, args.series, args.samples, rng)
            whole, whole_ok = time_detection(sessions, length + 1, args.repeats)
            bounded, bounded_ok = time_detection(sessions, HISTORY_LIMIT, args.repeats)
            engine.dispose()
        found = "both" if whole_ok and bounded_ok else f"bounded {bounded_ok}, whole {whole_ok}"
        print(f"{length:>8}  {bounded:>18.1f}  {whole:>16.1f}  {whole / bounded:>14.2f}x  {found}")


if __name__ == "__main__":
    main()
