"""A soak of the whole service as docker-compose runs it: --runners simulated runners (processes) submitting
realistic manifests with artifacts for --duration seconds while readers load the dashboard and its API; reports
submissions per second, p50/p95/p99 latency of submissions and of each page, error rates, the memory of each
service process at the start (after a warm-up) and the end, and a consistency check; exits 1 on any FAIL.

The service, as in docker-compose.yml: `kernelwatch db upgrade` on a scratch PostgreSQL database (dropped at the end
unless --keep; --database-url uses an existing one instead, never dropped), Redis database 15 (flushed before and
after), a submit token from `kernelwatch token create`, gunicorn with --web-workers sync workers on
`service.wsgi:app`, and one `kernelwatch worker --queues ingest,detect,notify --concurrency --worker-concurrency`.
Web and worker share a home (the artifact store), as they share a volume in compose. Follow-up runs (bisect,
confirm) are off: no runner host takes them here.

Each runner is a process of its own (spawned) with an artifact store of its own, sending through runners/uploader.py's
``HttpUploader`` exactly as a runner host does (HEAD then PUT per artifact, then POST the manifest, transient
failures retried with backoff). Runner r measures hardware kind ``r % --hardware-kinds``; its k-th new run is at
commit k of one repository, so several runners measure each commit on each kind and every series grows as the
soak goes (detection runs on longer and longer series). A manifest holds the suite (30-60 results over 6
benchmarks, 10 samples each, 1 % noise; every 12th series steps up 10 % at commit 10, so there are findings and
alerts to read), a shared SASS listing and LLO bundle dump from tests/fixtures (parsed by the worker; the service
has them after the first run, so later uploads skip them after the HEAD) and a few KB of random bytes of its own.
One submission in --resubmit-every sends the previous manifest again, as a redelivered task would: it must be
answered 200 and stored once. Between submissions a runner waits --pause seconds (times 0.5-1.5, and a random
start within the first pause, so the runners do not submit in lockstep): 10 s by default, a fleet whose suites take
minutes compressed some 30 times, a load the worker keeps up with on 2 cores; --pause 0 sends back to back, which is
a stress test (the Celery backlog then grows for as long as the load lasts) rather than a soak.

The readers (--readers threads of this process, closed loop, --reader-pause apart) GET a page picked at random
among /, /commits, /commits/<sha>, /series/<id>, /results/<id>, /api/v1/commits, /api/v1/findings, /api/v1/compare
of two adjacent commits and /api/v1/series/<id>, the ids taken from the API's own answers as they appear (series
from /api/v1/runs/<uid>/results of a runner's first run until ten are known).

Memory: VmRSS from /proc of the gunicorn master and each of its workers, and of the Celery worker and each child,
sampled every 5 s; start is the sample after --warmup seconds, end the last one before the load stops. A process
fails the bound when it grew more than --max-growth-pct percent *and* more than --max-growth-mb MB.

Consistency, after the load: the Celery queues drained (waited for up to --drain-timeout), every accepted run
stored exactly once and nothing stored that was not accepted, every accepted result stored, no 5xx anywhere
(final answers, retried answers, pages) and no traceback in the web or worker logs.

    python bench/soak.py [--runners 20] [--duration 600] [--web-workers 2] [--worker-concurrency 2]
                         [--readers 2] [--keep] [--database-url URL] [--admin-url URL]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import pickle
import re
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script: the service and tests packages import from the root
    sys.path.insert(0, str(REPO_ROOT))

import psycopg  # noqa: E402
import redis  # noqa: E402

from tests.private_servers import free_port  # noqa: E402
from tests.processes import ServiceProcess, clean_env, kernelwatch, start_worker  # noqa: E402
from tests.scratch_database import scratch_database  # noqa: E402
from tests.soak import (  # noqa: E402
    QUEUES,
    PageHit,
    Reader,
    RunnerSpec,
    Submission,
    http_get,
    process_tree_rss,
    queue_depth,
    redis_used_mb,
    runner_main,
)

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/15"  # the soak's alone: the tests use 3, 4, 6-14
MEMORY_EVERY_S = 5.0


@dataclass
class SoakConfig:
    runners: int = 20
    duration: float = 600.0
    web_workers: int = 2
    worker_concurrency: int = 2
    readers: int = 2
    hardware_kinds: int = 5
    pause: float = 10.0  # seconds a runner waits between submissions (a real runner's suite takes minutes)
    reader_pause: float = 0.05
    resubmit_every: int = 20
    warmup: float | None = None  # default: a tenth of the duration, 5-60 s
    drain_timeout: float = 300.0
    max_growth_pct: float = 50.0
    max_growth_mb: float = 100.0
    seed: int = 0
    redis_url: str = REDIS_URL

    @property
    def warmup_s(self) -> float:
        return self.warmup if self.warmup is not None else min(60.0, max(5.0, self.duration / 10))


# --- the soak ---------------------------------------------------------------------------------------------------

@dataclass
class SoakReport:
    config: SoakConfig
    elapsed_s: float
    submissions: list[Submission]
    pages: list[PageHit]
    page_failures: list[str]
    memory_start: dict[str, float]
    memory_end: dict[str, float]
    memory_peak: dict[str, float]
    redis_mb: tuple[float, float]
    backlog_samples: list[tuple[float, int]]  # (seconds into the load, messages queued or unacknowledged)
    drained_s: float | None  # None: not drained within the timeout
    backlog: dict[str, int]  # what was left when the drain ended
    stored: dict[str, int]  # run uid -> rows with it
    results_stored: int
    findings: int
    log_problems: dict[str, list[str]]
    tasks: dict[str, list[float]]  # Celery task name -> seconds of each success, in the order they finished
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(ok for _, ok, _ in self.checks)


def _answers(url: str) -> bool:
    return http_get(url, timeout=2)[0] == 200


@contextmanager
def start_gunicorn(env: dict[str, str], log_dir: Path, workers: int) -> Iterator[tuple[str, ServiceProcess]]:
    """docker-compose's `web`: gunicorn on service.wsgi:app with ``workers`` sync workers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
            "--timeout", "120", "service.wsgi:app"]
    with ServiceProcess("web", argv, env, log_dir) as process:
        process.wait_until(lambda: _answers(f"{url}/api/v1/health"), 120, f"gunicorn to answer on {url}")
        yield url, process


_PROBLEM = re.compile(r"Traceback|raised unexpected|WORKER TIMEOUT|unhandled error|\bCRITICAL\b")


def log_problems(text: str) -> list[str]:
    lines = text.splitlines()
    return [line[:300] for line in lines if _PROBLEM.search(line)]


_TASK_DONE = re.compile(r"Task kernelwatch\.(\w+)\[[^\]]*\] succeeded in ([0-9.]+)s")


def task_seconds(worker_log: str) -> dict[str, list[float]]:
    """Each task's durations from Celery's 'succeeded in' lines, in the order they finished."""
    out: dict[str, list[float]] = {}
    for name, seconds in _TASK_DONE.findall(worker_log):
        out.setdefault(name, []).append(float(seconds))
    return out


def soak(config: SoakConfig, database_url: str, work: Path, keep_logs: Path | None = None) -> SoakReport:
    """Start the service on ``database_url`` (a SQLAlchemy URL, migrated here) and Redis, run the load, check."""
    tag = secrets.token_hex(3)
    broker = redis.Redis.from_url(config.redis_url)
    broker.flushdb()
    home, logs = work / "service", work / "logs"
    env = clean_env(home, KERNELWATCH_DATABASE_URL=database_url, KERNELWATCH_REDIS_URL=config.redis_url,
                    KERNELWATCH_FOLLOW_UP="none")
    kernelwatch("db", "upgrade", env=env)
    token = kernelwatch("token", "create", f"soak-{tag}", "--scope", "submit", env=env).strip().splitlines()[-1]
    print(f"Soak {tag}: {config.runners} runners x {config.duration:.0f} s, gunicorn {config.web_workers} "
          f"workers, worker concurrency {config.worker_concurrency}, {config.readers} readers; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    with start_gunicorn(env, logs, config.web_workers) as (url, web), \
            start_worker(env, logs, ",".join(QUEUES), name="worker",
                         extra=("--concurrency", str(config.worker_concurrency))) as worker:
        roots = {"web": web.pid, "worker": worker.pid}
        redis_start = redis_used_mb(broker)
        t0 = time.time()
        deadline = t0 + config.duration
        outputs = [work / f"runner-{r}.pickle" for r in range(config.runners)]
        # Spawned, not forked: this process may have imported JAX (the sample test runs beside others in one pytest
        # worker), and a fork of a process with JAX's threads can deadlock in the child.
        spawn = multiprocessing.get_context("spawn")
        procs = []
        for r in range(config.runners):
            spec = RunnerSpec(r, tag, url, token, str(work / f"runner-{r}"), t0, deadline,
                              r % max(1, config.hardware_kinds), config.seed, config.pause, config.resubmit_every)
            proc = spawn.Process(target=runner_main, args=(spec, str(outputs[r])), name=f"soak-runner-{r}")
            proc.start()
            procs.append(proc)
        reader = Reader(url, tag, config.runners, config.readers, config.reader_pause, config.seed)
        reader.start()
        memory_start: dict[str, float] = {}
        memory_end: dict[str, float] = {}
        peak: dict[str, float] = {}
        backlog_samples: list[tuple[float, int]] = []
        next_sample = t0
        while time.time() < deadline:
            backlog_samples.append((time.time() - t0, sum(queue_depth(broker).values())))
            snapshot = process_tree_rss(roots)
            for name, mb in snapshot.items():
                peak[name] = max(peak.get(name, 0.0), mb)
            if not memory_start and time.time() - t0 >= config.warmup_s:
                memory_start = snapshot
            memory_end = snapshot
            if not web.alive() or not worker.alive():
                print("a service process exited during the soak", flush=True)
                break
            next_sample += MEMORY_EVERY_S
            time.sleep(max(0.0, min(next_sample, deadline) - time.time()))
        memory_start = memory_start or memory_end
        memory_end = process_tree_rss(roots) or memory_end
        submissions: list[Submission] = []
        for proc, out in zip(procs, outputs, strict=True):
            proc.join(timeout=300)
            if proc.is_alive():
                proc.kill()
                proc.join()
            if out.exists():
                submissions.extend(pickle.loads(out.read_bytes()))
            else:
                print(f"{proc.name} left no report (exit code {proc.exitcode})", flush=True)
        reader.join()
        elapsed = time.time() - t0
        print(f"Load over after {elapsed:.0f} s: {len(submissions)} submissions, {len(reader.hits)} page requests; "
              f"waiting for the queues to drain (up to {config.drain_timeout:.0f} s) ...", flush=True)
        drained_s, backlog = wait_drained(broker, config.drain_timeout, worker)
        redis_end = redis_used_mb(broker)
        broker.flushdb()  # the task results Celery keeps for a day, and anything a timeout left
        worker_log = worker.output()
        problems = {"web": log_problems(web.output()), "worker": log_problems(worker_log)}
    if keep_logs is not None:
        shutil.copytree(logs, keep_logs, dirs_exist_ok=True)
    stored, results_stored, findings = stored_runs(database_url, tag)
    report = SoakReport(config, elapsed, submissions, reader.hits, reader.failures, memory_start, memory_end, peak,
                        (redis_start, redis_end), backlog_samples, drained_s, backlog, stored, results_stored, findings,
                        problems, task_seconds(worker_log))
    report.checks = checks(report)
    return report


def wait_drained(client: redis.Redis, timeout: float, worker: ServiceProcess) -> tuple[float | None, dict[str, int]]:
    """Seconds until every queue is empty and nothing is unacknowledged twice in a row, 1 s apart; None on a
    timeout (or when the worker died), with what was left."""
    started = time.monotonic()
    empty_before = False
    while True:
        depth = queue_depth(client)
        empty = not any(depth.values())
        if empty and empty_before:
            return time.monotonic() - started, depth
        empty_before = empty
        if time.monotonic() - started > timeout or not worker.alive():
            return None, depth
        time.sleep(1.0)


def stored_runs(database_url: str, tag: str) -> tuple[dict[str, int], int, int]:
    """Run uid -> how many rows carry it, the results of those runs, and the findings of the soak's repository."""
    url = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(url) as conn:
        like = f"soak-{tag}-%"
        rows = conn.execute("SELECT run_uid, count(*) FROM run WHERE run_uid LIKE %s GROUP BY run_uid",
                            (like,)).fetchall()
        results = conn.execute("SELECT count(*) FROM result r JOIN run u ON u.id = r.run_id WHERE u.run_uid LIKE %s",
                               (like,)).fetchone()
        findings = conn.execute("SELECT count(*) FROM finding f JOIN series s ON s.id = f.series_id JOIN repository "
                                "p ON p.id = s.repository_id WHERE p.name = %s", (f"soak-{tag}",)).fetchone()
    return {uid: n for uid, n in rows}, int(results[0]) if results else 0, int(findings[0]) if findings else 0


# --- the verdict and the table ----------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def grew_too_much(start: float, end: float, max_pct: float, max_mb: float) -> bool:
    growth = end - start
    return growth > max_mb and growth > start * max_pct / 100


def is_5xx(reason: str) -> bool:
    return bool(re.match(r"HTTP 5\d\d", reason))


def checks(r: SoakReport) -> list[tuple[str, bool, str]]:
    """(what, passed, detail) of each consistency check and the memory bound."""
    accepted = {s.run_id: s for s in r.submissions if s.status in (200, 201)}
    created = [s.run_id for s in r.submissions if s.status == 201]
    dupes = {uid: n for uid, n in r.stored.items() if n > 1}
    missing = sorted(set(accepted) - set(r.stored))
    unacknowledged = sorted(set(r.stored) - set(accepted))
    expected_results = sum(s.results for s in accepted.values())
    final_5xx = sum(1 for s in r.submissions if s.status >= 500)
    retried_5xx = sum(1 for s in r.submissions for reason in s.retries if is_5xx(reason))
    page_5xx = sum(1 for h in r.pages if h.status >= 500)
    grew = [name for name in r.memory_start if name in r.memory_end and grew_too_much(
        r.memory_start[name], r.memory_end[name], r.config.max_growth_pct, r.config.max_growth_mb)]
    problems = sum(len(v) for v in r.log_problems.values())
    return [
        ("submissions made", bool(r.submissions), f"{len(r.submissions)}"),
        ("queues drained", r.drained_s is not None,
         f"in {r.drained_s:.0f} s" if r.drained_s is not None else f"left after the timeout: {r.backlog}"),
        ("every accepted run stored", not missing, f"{len(accepted)} accepted, {len(missing)} missing"
         + (f" (e.g. {missing[:3]})" if missing else "")),
        ("no run stored twice", not dupes, f"{len(dupes)} duplicated" + (f": {list(dupes)[:3]}" if dupes else "")),
        ("each run created once", len(created) == len(set(created)) == len(accepted),
         f"{len(created)} answered 201 for {len(accepted)} distinct accepted runs"),
        ("nothing stored that was not accepted", not unacknowledged,
         f"{len(unacknowledged)}" + (f" (e.g. {unacknowledged[:3]})" if unacknowledged else "")),
        ("every accepted result stored", r.results_stored == expected_results,
         f"{r.results_stored} stored, {expected_results} accepted"),
        ("no 5xx anywhere", not (final_5xx or retried_5xx or page_5xx),
         f"final {final_5xx}, retried {retried_5xx}, pages {page_5xx}"),
        ("no error in the service logs", not problems,
         "; ".join(f"{k}: {v[0]}" for k, v in r.log_problems.items() if v)[:600] or "none"),
        ("memory within the bound", not grew,
         (f"growth <= {r.config.max_growth_pct:.0f} % or <= " if r.config.max_growth_pct > 0 else "growth <= ")
         + f"{r.config.max_growth_mb:.0f} MB per process"
         + (f"; exceeded by {grew}" if grew else "")),
    ]


def _latency_row(label: str, n: int, latencies: list[float], errors: int, width: int) -> str:
    ms = [x * 1e3 for x in latencies]
    return (f"{label:{width}} {n:7d} {percentile(ms, 50):9.0f} {percentile(ms, 95):9.0f} {percentile(ms, 99):9.0f} "
            f"{errors:7d} {100 * errors / n if n else 0:6.2f} %")


def format_report(r: SoakReport) -> str:
    """The tables and the verdict, as printed."""
    out: list[str] = []
    subs = r.submissions
    n = len(subs)
    fresh = [s for s in subs if not s.resubmitted]
    retried = sum(1 for s in subs if s.retries)
    retry_count = sum(len(s.retries) for s in subs)
    errors = [s for s in subs if s.status not in (200, 201)]
    out.append(f"Submissions: {n} in {r.elapsed_s:.0f} s = {n / r.elapsed_s if r.elapsed_s else 0:.2f}/s "
               f"({len(fresh)} new runs, {n - len(fresh)} resubmissions; "
               f"{sum(s.results for s in fresh if s.status in (200, 201)):,} results accepted); "
               f"artifacts sent {sum(s.artifacts_sent for s in subs)}, skipped after HEAD "
               f"{sum(s.artifacts_present for s in subs)}")
    out.append(f"  retries (transient answers retried by the uploader): {retry_count} in {retried} submissions"
               + (f"; e.g. {sorted({x for s in subs for x in s.retries})[:3]}" if retry_count else ""))
    width = 28
    out.append("")
    out.append(f"{'requests':{width}} {'count':>7} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'errors':>7} "
               f"{'rate':>8}")
    out.append(_latency_row("submission (upload)", n, [s.latency_s for s in subs], len(errors), width))
    out.append(_latency_row("  of which new runs", len(fresh), [s.latency_s for s in fresh],
                            sum(1 for s in fresh if s.status not in (200, 201)), width))
    kinds = sorted({h.kind for h in r.pages})
    for kind in kinds:
        hits = [h for h in r.pages if h.kind == kind]
        bad = sum(1 for h in hits if h.status != 200 and not (h.status == 404 and kind.endswith("<uid>/results")))
        out.append(_latency_row(kind, len(hits), [h.latency_s for h in hits], bad, width))
    page_errors = sum(1 for h in r.pages if h.status != 200 and not (h.status == 404 and h.kind.endswith("results")))
    out.append(_latency_row("all pages", len(r.pages), [h.latency_s for h in r.pages], page_errors, width))
    for s in errors[:5]:
        out.append(f"  submission error: {s.run_id}: {s.status} {s.error}")
    for failure in r.page_failures[:5]:
        out.append(f"  page error: {failure}")
    out.append("")
    out.append(f"{'memory (RSS, MB)':{width}} {'start':>8} {'peak':>8} {'end':>8} {'growth':>8} {'%':>7}")
    for name in sorted(set(r.memory_start) | set(r.memory_end)):
        start, end = r.memory_start.get(name), r.memory_end.get(name)
        if start is None or end is None:
            out.append(f"{name:{width}} {'-' if start is None else f'{start:.0f}':>8} {r.memory_peak.get(name, 0):8.0f}"
                       f" {'-' if end is None else f'{end:.0f}':>8}  (started or ended during the soak)")
            continue
        out.append(f"{name:{width}} {start:8.0f} {r.memory_peak.get(name, end):8.0f} {end:8.0f} {end - start:+8.0f} "
                   f"{100 * (end - start) / start:+6.1f}%")
    for service in ("web", "worker"):
        start = sum(v for k, v in r.memory_start.items() if k.startswith(service + " "))
        end = sum(v for k, v in r.memory_end.items() if k.startswith(service + " "))
        out.append(f"{service + ' (all processes)':{width}} {start:8.0f} {'':8} {end:8.0f} {end - start:+8.0f} "
                   f"{100 * (end - start) / start if start else 0:+6.1f}%")
    out.append(f"{'redis used_memory':{width}} {r.redis_mb[0]:8.1f} {'':8} {r.redis_mb[1]:8.1f} "
               f"{r.redis_mb[1] - r.redis_mb[0]:+8.1f}  (end: after the drain)")
    if r.tasks:
        out.append("")
        out.append(f"{'worker tasks (seconds)':{width}} {'count':>7} {'mean':>9} {'p95':>9} {'max':>9} "
                   f"{'1st third':>9} {'3rd third':>9}")
        for name, times in sorted(r.tasks.items()):
            third = max(1, len(times) // 3)
            out.append(f"{name:{width}} {len(times):7d} {sum(times) / len(times):9.3f} {percentile(times, 95):9.3f} "
                       f"{max(times):9.3f} {sum(times[:third]) / third:9.3f} {sum(times[-third:]) / third:9.3f}")
    if r.backlog_samples:
        step = max(1, len(r.backlog_samples) // 10)
        out.append("Celery backlog over the load: " + ", ".join(
            f"{at:.0f} s {depth}" for at, depth in r.backlog_samples[::step]))
        at, most = max(r.backlog_samples, key=lambda x: x[1])
        out.append(f"Celery backlog (queued + unacknowledged): peak {most} at {at:.0f} s, {r.backlog_samples[-1][1]} "
                   f"at the end of the load; drained "
                   + (f"{r.drained_s:.0f} s after it" if r.drained_s is not None else "NOT within the timeout"))
    out.append("")
    out.append(f"Stored: {len(r.stored)} runs, {r.results_stored:,} results; {r.findings} findings on the soak's "
               f"series")
    for what, ok, detail in r.checks:
        out.append(f"  {'PASS' if ok else 'FAIL'}  {what}: {detail}")
    out.append(f"Soak: {'PASS' if r.passed else 'FAIL'}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runners", type=int, default=20)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (default %(default)s)")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--worker-concurrency", type=int, default=2)
    parser.add_argument("--readers", type=int, default=2, help="reader threads (default %(default)s)")
    parser.add_argument("--reader-pause", type=float, default=0.05, help="seconds between a reader's requests")
    parser.add_argument("--hardware-kinds", type=int, default=5)
    parser.add_argument("--pause", type=float, default=10.0,
                        help="seconds between a runner's submissions (default %(default)s; 0: back to back)")
    parser.add_argument("--resubmit-every", type=int, default=20,
                        help="one submission in N resends the previous manifest (0: never)")
    parser.add_argument("--warmup", type=float, default=None, help="seconds before the start memory sample")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--max-growth-pct", type=float, default=50.0)
    parser.add_argument("--max-growth-mb", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument("--database-url", default=None,
                        help="an existing database (SQLAlchemy URL) instead of a scratch one; never dropped")
    parser.add_argument("--admin-url", default=ADMIN_URL, help="where the scratch database is made")
    parser.add_argument("--redis-url", default=REDIS_URL, help="flushed at the start (default %(default)s)")
    parser.add_argument("--logs", type=Path, default=None, help="copy the web and worker logs into this folder")
    args = parser.parse_args()
    config = SoakConfig(**{f.name: getattr(args, f.name) for f in fields(SoakConfig)})
    with tempfile.TemporaryDirectory(prefix="kw-soak-") as work:
        if args.database_url:
            report = soak(config, args.database_url, Path(work), args.logs)
        else:
            with scratch_database("kw_soak", args.admin_url, keep=args.keep) as url:
                print(f"Scratch database {url.rsplit('/', 1)[1]}" + (" (kept: --keep)" if args.keep else
                                                                     " (dropped at the end)"), flush=True)
                report = soak(config, url, Path(work), args.logs)
    print()
    print(format_report(report))
    sys.exit(0 if report.passed else 1)


if __name__ == "__main__":
    main()
