"""The dashboard's pages on the 1,000,000-result database: p50 and p95 of each page against the bare SQL it ran
(the dashboard issue: every page under 300 ms at p95).

The database is the one ``ingest_and_query.py --keep`` leaves (5,000 series = 1,000 benchmarks x 5
environments, 200 commits, 10 samples each, 1,000 planted findings in 50 alerts). Its results carry no captured
artifacts, so the drill-down pages (a result's ops, its HLO, a kernel's code, the diff of two results) would have
nothing to show: before timing, a few suite benchmarks are run on this CPU with capture on, at two commits of a
copy of ``kernels_under_test`` whose second commit changes RMSNorm's code, and stored through the real pipeline
(``submit_manifest``, an in-process queue that parses the artifacts) under a repository of their own,
``kw-bench-pages``. Nothing else in the database is changed. The capture is untimed, and kept (in the database,
and its artifacts under ~/.cache/kernelwatch-bench/<database>) so a second run reuses it.

Each page is requested --requests times through Flask's test client on ``create_app`` (gc frozen afterwards, as
service/wsgi.py does), every request's SQL captured and replayed with psycopg (bench/timing.py): the peer is the
bare SQL of the same requests, the ratio what the page adds on top of its queries. The database predates
comparisons made on write, so the commit and compare pages compute theirs on read; both are timed again
(", stored") after the write path's ``store_comparisons`` has stored their head commits' comparisons (untimed;
those rows are deleted at the end).

    python bench/page_latency.py [--database kw_bench_7b59b0c5] [--requests 30] [--admin-url URL] [--quick]
                                 [--profile]

--quick builds a small scratch database with ingest_and_query's own functions (500 series x 40 commits; dropped
at the end) so the benchmark runs on a machine without the 1M database. --profile times one more request of each
page that missed with the cyclic collector's pauses summed, and one under cProfile, and prints where it went.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import ingest_and_query as scale
import psycopg
from flask.testing import FlaskClient
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker
from timing import (
    COMPUTED,
    STORED,
    Timed,
    capture_on,
    compared_heads,
    comparisons_stored,
    percentile,
    report,
    time_requests,
)

from kernelwatch.vocabulary import Polarity
from runners.artifacts import ArtifactStore
from runners.local import RunRequest, run_commits
from service.app import create_app
from service.detect.types import ChangePoint, SeriesPoint
from service.pipeline.jobs import JobEnv
from service.pipeline.queue import InProcessQueue
from service.pipeline.submit import submit_manifest
from service.settings import Settings
from service.store import drilldown
from service.store.db import make_engine, make_session_factory, upgrade
from service.store.models import Artifact, Commit, Repository, Result, ResultArtifact, Run, Series

TARGET_P95_MS = 300.0
DEFAULT_DATABASE = "kw_bench_7b59b0c5"
PAGES_REPOSITORY = "kw-bench-pages"  # the captured runs' repository: the temp git repo's folder name
REPO_ROOT = Path(__file__).resolve().parent.parent
# The captured suite: both norms, fused and unfused, at their quick shape; 3 samples, since only the
# artifacts matter here, not the timings.
CAPTURE_SUITE = "norms/*"
# The second commit computes RMSNorm's scale as a division by a square root instead of a multiplication by
# rsqrt: numerically the same within the benchmark's tolerance, different x86 code, so the Diff page has a
# change to align.
RMSNORM_BEFORE = "normalised = step(x * jax.lax.rsqrt(mean_square + EPS))"
RMSNORM_AFTER = "normalised = step(x / jnp.sqrt(mean_square + EPS))"


class NoChange:
    """Detection for the captured runs: never a time finding, so the 1M database's inbox gains no alert from
    two noisy 3-sample points (static findings from the code change may still come, as they would in
    production)."""

    name = "bench-no-change"
    version = 1

    def detect(self, points: Sequence[SeriesPoint], polarity: Polarity) -> list[ChangePoint]:
        return []


@dataclass(frozen=True)
class CapturedPair:
    """One benchmark's wall-time results at the two captured commits, and the kernel to open in both."""

    label: str
    base: int
    head: int
    kernel: str


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=bench@example.com", "-c", "user.name=bench", *args],
                   check=True)


def capture_runs(root: Path, store: ArtifactStore) -> list[dict[str, Any]]:
    """Run the captured suite at both commits (interleaved, as a bisection would), capturing into ``store``."""
    repo = root / PAGES_REPOSITORY
    repo.mkdir(parents=True)
    shutil.copytree(REPO_ROOT / "kernels_under_test", repo / "kernels_under_test",
                    ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "suite")
    norms = repo / "kernels_under_test" / "norms.py"
    source = norms.read_text()
    if RMSNORM_BEFORE not in source:
        sys.exit(f"kernels_under_test/norms.py no longer contains {RMSNORM_BEFORE!r}: update RMSNORM_BEFORE")
    norms.write_text(source.replace(RMSNORM_BEFORE, RMSNORM_AFTER))
    git(repo, "commit", "-q", "-am", "rmsnorm: divide by sqrt instead of multiplying by rsqrt")
    requests = [RunRequest(repo=repo, rev=rev, samples=3, warmup=1, suite=CAPTURE_SUITE, quick=True,
                           capture_dir=store.root) for rev in ("HEAD~1", "HEAD")]
    return [m for ms in run_commits(requests, root / "worktrees") for m in ms]


def captured_pairs(sessions: sessionmaker[Session], store: ArtifactStore) -> list[CapturedPair]:
    """The pages repository's wall-time results at its two newest commits, paired by series, each with the
    slowest x86 kernel both have; empty when there are none or their artifacts are not in ``store``."""
    with sessions() as session:
        repository = session.scalars(select(Repository.id).filter_by(name=PAGES_REPOSITORY)).first()
        if repository is None:
            return []
        newest = session.scalars(select(Commit.id).where(Commit.repository_id == repository)
                                 .order_by(Commit.position.desc()).limit(2)).all()
        if len(newest) < 2:
            return []
        head_commit, base_commit = newest
        rows = session.execute(
            select(Result.id, Result.series_id, Run.commit_id)
            .join(Run, Run.id == Result.run_id).join(Series, Series.id == Result.series_id)
            .where(Run.commit_id.in_(newest), Series.metric == "wall_time", Result.status == "ok")).all()
        digests = session.scalars(
            select(Artifact.sha256).join(ResultArtifact, ResultArtifact.artifact_id == Artifact.id)
            .where(ResultArtifact.result_id.in_([r.id for r in rows]))).all()
        if not digests or not all(store.has(d) for d in digests):
            return []
        by_series: dict[int, dict[int, int]] = {}
        for rid, sid, cid in rows:
            by_series.setdefault(sid, {})[cid] = rid
        pairs = []
        for _series, sides in sorted(by_series.items()):
            if base_commit not in sides or head_commit not in sides:
                continue
            base, head = sides[base_commit], sides[head_commit]
            in_base = {(k.name, k.isa) for k in drilldown.kernels(session, base)}
            shared = [k for k in drilldown.kernels(session, head) if (k.name, k.isa) in in_base and k.isa == "x86-64"]
            header = drilldown.result_header(session, head)
            if shared and header is not None:
                pairs.append(CapturedPair(header.label, base, head, shared[0].name))
    return pairs


def ensure_captured(sa_url: str, home: Path) -> list[CapturedPair]:
    """The captured pairs, capturing and storing them first when the database or the home lacks them."""
    engine = make_engine(sa_url)
    sessions = make_session_factory(engine)
    store = ArtifactStore(home / "artifacts")
    pairs = captured_pairs(sessions, store)
    if pairs:
        print(f"Captured runs: reusing {len(pairs)} result pairs of {PAGES_REPOSITORY} (artifacts in {home})")
    else:
        print(f"Capturing {CAPTURE_SUITE} (quick shapes, 3 samples) at two commits on this CPU, untimed ...",
              flush=True)
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="kw-pages-capture-") as root:
            manifests = capture_runs(Path(root), store)
        captured_s = time.perf_counter() - started
        queue = InProcessQueue(JobEnv(sessions, NoChange(), store))  # parses the artifacts as each run lands
        for manifest in manifests:
            submit_manifest(sessions, queue, manifest, store)
        pairs = captured_pairs(sessions, store)
        print(f"  captured in {captured_s:.0f} s, stored and parsed in {time.perf_counter() - started - captured_s:.0f}"
              f" s: {len(pairs)} result pairs under repository {PAGES_REPOSITORY}")
        if not pairs:
            sys.exit("the captured runs left no pair of wall-time results with a shared x86 kernel")
    engine.dispose()
    return pairs


def page_paths(conn: Any, pairs: Sequence[CapturedPair], n: int, seed: int) -> list[tuple[str, list[str]]]:
    """Each page's label and its n request paths."""
    rng = random.Random(seed)
    series_ids = [r[0] for r in conn.execute(text(
        "SELECT s.id FROM series s JOIN repository r ON r.id = s.repository_id WHERE r.name = :name ORDER BY s.id"),
        {"name": scale.REPOSITORY})]
    commits = conn.execute(text("SELECT max(c.position) FROM commit c JOIN repository r ON r.id = c.repository_id "
                                "WHERE r.name = :name"), {"name": scale.REPOSITORY}).scalar_one() + 1
    flagged = [r[0] for r in conn.execute(text(
        "SELECT DISTINCT c.sha FROM finding f JOIN commit c ON c.id = f.commit_id JOIN repository r "
        "ON r.id = c.repository_id WHERE r.name = :name ORDER BY c.sha"), {"name": scale.REPOSITORY})]
    if not flagged:
        sys.exit(f"no findings in repository {scale.REPOSITORY}: not a database made by ingest_and_query.py")

    compared = [rng.randrange(commits - 1) for _ in range(n)]

    def cycle(i: int) -> CapturedPair:  # the captured results in turn, base and head alternating
        return pairs[(i // 2) % len(pairs)]

    def result(i: int) -> int:
        return cycle(i).head if i % 2 else cycle(i).base

    pages: list[tuple[str, Any]] = [
        ("/ (alerts inbox)", lambda i: "/"),
        ("/?state=untriaged", lambda i: "/?state=untriaged"),
        ("/commits", lambda i: "/commits"),
        ("/commits/<sha> (with findings)", lambda i: f"/commits/{rng.choice(flagged)}"),
        ("/series/<id>", lambda i: f"/series/{rng.choice(series_ids)}"),
        ("/compare?base=<i>&head=<i+1>",
         lambda i: f"/compare?base={scale.sha_of(compared[i])}&head={scale.sha_of(compared[i] + 1)}"),
        ("/results/<id>", lambda i: f"/results/{result(i)}"),
        ("/results/<id>/hlo", lambda i: f"/results/{result(i)}/hlo"),
        ("/results/<id>/kernels/<name>", lambda i: f"/results/{result(i)}/kernels/{quote(cycle(i).kernel, safe='')}"),
        ("/diff?base=&head=&kernel=",
         lambda i: f"/diff?base={cycle(i).base}&head={cycle(i).head}&kernel={quote(cycle(i).kernel, safe='')}"),
    ]
    return [(label, [path_of(i) for i in range(n)]) for label, path_of in pages]


def profile_one(client: FlaskClient, path: str, top: int = 14) -> str:
    """Where one request's time goes: one request timed with the cyclic collector's pauses summed (cProfile
    cannot see them: they land in whichever function allocated), then one under cProfile, this project's
    functions (and the template engine's render, psycopg's execute and fetch) by cumulative time."""
    paused = [0.0, 0.0, 0.0]  # seconds, collections, start of the current one

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            paused[2] = time.perf_counter()
        else:
            paused[0] += time.perf_counter() - paused[2]
            paused[1] += 1

    gc.callbacks.append(on_gc)
    started = time.perf_counter()
    client.get(path).get_data()
    total = time.perf_counter() - started
    gc.callbacks.remove(on_gc)
    profiler = cProfile.Profile()
    profiler.enable()
    client.get(path).get_data()
    profiler.disable()
    out = io.StringIO()
    out.write(f"unprofiled: {total * 1e3:.0f} ms, of which the cyclic collector {paused[0] * 1e3:.0f} ms in "
              f"{paused[1]:.0f} collections\n")
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    stats.print_stats(r"(service|web|runners|jinja2/environment|psycopg/cursor)\b", top)
    return out.getvalue()


COMPARING_PAGES = ("/commits/<sha> (with findings)", "/compare?base=<i>&head=<i+1>")


def time_pages(url: str, sa_url: str, home: Path, pairs: Sequence[CapturedPair],
               args: argparse.Namespace) -> list[Timed]:
    """Every page as the database is; then the commit and compare pages again with their comparisons stored
    on write (the database predates comparisons-on-write, so as it is they compute them on read)."""
    gc.collect()  # the capture's garbage is not the server's
    app = create_app(Settings(home=home, database_url=sa_url, follow_up=()))
    gc.freeze()  # as service/wsgi.py does once the app is built
    ctx = app.extensions["kernelwatch"]
    capture = capture_on(ctx.engine)
    client = app.test_client()
    with ctx.engine.connect() as conn:
        pages = page_paths(conn, pairs, args.requests, args.seed)
    out: list[Timed] = []
    profiles: list[str] = []

    def time_page(bare: psycopg.Connection[Any], label: str, paths: list[str]) -> None:
        started = time.perf_counter()
        timed = time_requests(client, capture, bare, label, paths, warmup=min(3, len(paths)))
        queries = statistics.mean(len(s) for s in timed.statements)
        print(f"  {label}: {len(paths)} requests in {time.perf_counter() - started:.0f} s, {queries:.1f} "
              f"statements per request, {len(timed.last_body):,} bytes of HTML", flush=True)
        out.append(timed)
        # Profiled here, not after the table: the stored comparisons are gone by then.
        if args.profile and percentile(timed.app_ms, 95) >= TARGET_P95_MS:
            profiles.append(f"\n--- {label}: one request ({paths[0]}) under cProfile ---\n"
                            + profile_one(client, paths[0]))

    # Other work on the machine moves every figure: say how loaded it was.
    print(f"  load average before timing: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    with psycopg.connect(url) as bare:
        for label, paths in pages:
            time_page(bare, label + (COMPUTED if label in COMPARING_PAGES else ""), paths)
        comparing = [(label, paths) for label, paths in pages if label in COMPARING_PAGES]
        with comparisons_stored(ctx.sessions, compared_heads([p for _, paths in comparing for p in paths])):
            for label, paths in comparing:
                time_page(bare, label + STORED, paths)
    print(f"  load average after timing: {os.getloadavg()[0]:.1f}")
    report(out, TARGET_P95_MS, what="page", side="page", width=40)
    for profile in profiles:
        print(profile)
    ctx.close()
    return out


@contextmanager
def quick_database(args: argparse.Namespace) -> Iterator[str]:
    """A small scratch database made by ingest_and_query's own functions, dropped at the end."""
    args.series, args.commits, args.samples, args.environments, args.alert_commits = 500, 40, 10, 5, 10
    with scale.scratch_database(args.admin_url, keep=False) as name:
        sa_url = scale.database_url(args.admin_url, name, "psycopg")
        upgrade(sa_url)
        scale.ingest(sa_url, args)
        scale.plant_findings(sa_url, args)
        with psycopg.connect(scale.database_url(args.admin_url, name), autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        yield name


def database_exists(admin_url: str, name: str) -> bool:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def run(name: str, home: Path, args: argparse.Namespace) -> None:
    url, sa_url = scale.database_url(args.admin_url, name), scale.database_url(args.admin_url, name, "psycopg")
    upgrade(sa_url)  # a migration added since the database was made applies to it too (schema only)
    pairs = ensure_captured(sa_url, home)
    print(f"Latency, {args.requests} requests per page (Flask test client on create_app, then the same SQL "
          f"replayed with psycopg)")
    time_pages(url, sa_url, home, pairs, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", default=DEFAULT_DATABASE,
                        help="a database left by ingest_and_query.py --keep (default %(default)s)")
    parser.add_argument("--requests", type=int, default=None, help="requests per page (default 30; --quick 10)")
    parser.add_argument("--admin-url", default=scale.ADMIN_URL)
    parser.add_argument("--quick", action="store_true",
                        help="build a scratch database of 500 series x 40 commits instead (dropped at the end)")
    parser.add_argument("--profile", action="store_true", help="cProfile one request of each page that misses")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.requests = args.requests or (10 if args.quick else 30)
    if args.quick:
        with tempfile.TemporaryDirectory(prefix="kw-pages-home-") as home, quick_database(args) as name:
            print(f"Quick: scratch database {name}, 500 series x 40 commits")
            run(name, Path(home), args)
        return
    if not database_exists(args.admin_url, args.database):
        print(f"No database {args.database} on {args.admin_url.rsplit('/', 1)[0]}. Make the 1,000,000-result one "
              f"with\n    .venv/bin/python bench/ingest_and_query.py --keep\nand pass the name it prints as "
              f"--database (or run this with --quick).", file=sys.stderr)
        sys.exit(2)
    # The captured artifacts live beside the database they were stored in, outside the repository, so that a
    # second run finds both and captures nothing.
    home = Path.home() / ".cache" / "kernelwatch-bench" / args.database
    home.mkdir(parents=True, exist_ok=True)
    print(f"Database {args.database}; home (artifact store) {home}")
    run(args.database, home, args)


if __name__ == "__main__":
    main()
