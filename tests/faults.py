"""Fault scenarios against the service's real processes, shared by `bench/faults.py` (full size, a minute of fault)
and tests/integration/test_faults_sample.py (a fast sample of each, so CI catches a regression of robustness).

Each scenario starts what it needs (a scratch database on the machine's PostgreSQL, or a private cluster where it
restarts PostgreSQL; a private redis-server everywhere, so no Redis database of the machine's is touched), submits
runs over HTTP the way a runner does (``runners.uploader.HttpUploader``, tried again while it says the service is
unavailable), injects its fault in the middle, and counts what came out: an ``Outcome``.

Counting: ``submitted`` runs the client sent; ``stored`` of those found in the run table with all their results;
``duplicates`` run rows beyond the first per run id, plus results or parsed records stored twice; ``lost`` runs
(or alerts) submitted and never stored whole, whatever the client was told; ``visible`` whether the fault showed
where it concerns (an error in the stable shape to the client, a pending or failed state on the alert, a
redelivered task in the worker's log); ``recovered`` whether everything ended stored and drained with nobody
stepping in (the client's own retries, a second worker, the sweep).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import func, select

from runners.artifacts import ArtifactStore
from runners.uploader import HttpUploader, UploadRejected, UploadUnavailable
from service.pipeline.tokens import create_token
from service.store.db import make_engine, make_session_factory, unit_of_work, upgrade
from service.store.models import Artifact, HloModuleRecord, Result, ResultArtifact, Run
from tests import builders
from tests.private_servers import PrivatePostgres, PrivateRedis, free_port
from tests.processes import ServiceProcess, clean_env, start_kernelwatch, start_worker
from tests.scratch_database import PG_ADMIN_URL, scratch_database

RESULTS_PER_RUN = 2

HLO_TEMPLATE = """HloModule faults_{tag}

ENTRY main.3 {{
  p0 = f32[1024]{{0}} parameter(0)
  ROOT multiply.2 = f32[1024]{{0}} multiply(p0, p0)
}}
"""


@dataclass
class Outcome:
    scenario: str
    submitted: int = 0
    stored: int = 0
    duplicates: int = 0
    lost: int = 0
    visible: bool = False
    recovered: bool = False
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicates == 0 and self.recovered and self.visible


@dataclass(frozen=True)
class Plan:
    runs: int  # runs (or alerts) submitted
    fault_s: float  # how long the fault lasts
    workdir: Path  # scratch space; each scenario takes a directory of its own under it
    artifact_bytes: int = 64 * 1024  # the incompressible artifact each run carries besides its HLO
    clock_scale: float = 1.0  # Slack scenario only: how much faster than the wall the notifier's clock runs


# --- databases, brokers, the web process --------------------------------------------------------------------


def _scratch_database() -> contextlib.AbstractContextManager[str]:
    """A fresh database on the machine's PostgreSQL, migrated to head, dropped afterwards."""
    return scratch_database("kw_faults", PG_ADMIN_URL, migrate=True)


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    # Not under the scenario's workdir: the postgres user must be able to reach the data directory.
    pg = PrivatePostgres(Path(tempfile.mkdtemp(prefix="kw-faults-pg-")))
    pg.start()
    try:
        yield pg
    finally:
        pg.destroy()


@contextlib.contextmanager
def private_redis(root: Path, appendonly: bool = False) -> Iterator[PrivateRedis]:
    server = PrivateRedis(root, appendonly=appendonly)
    server.start()
    try:
        yield server
    finally:
        server.destroy()


def submit_token(database_url: str) -> str:
    engine = make_engine(database_url)
    try:
        with unit_of_work(make_session_factory(engine)) as s:
            return create_token(s, "runner-faults", ["submit"])[1]
    finally:
        engine.dispose()


def health(url: str) -> int:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/health", timeout=3) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def web_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def start_gunicorn(env: Mapping[str, str], log_dir: Path, port: int, name: str = "web",
                   timeout: float = 60) -> ServiceProcess:
    """docker-compose's `web` (gunicorn, `service.wsgi:app`) on a port the caller chose, so that a restarted one
    answers where the killed one did; returned once /health answers 200."""
    argv = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--timeout", "120",
            "service.wsgi:app"]
    process = ServiceProcess(name, argv, env, log_dir)
    try:
        process.wait_until(lambda: health(web_url(port)) == 200, timeout, f"{name} to answer")
    except BaseException:
        process.stop()
        raise
    return process


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


# --- runs, the client, the count -----------------------------------------------------------------------------


def runs_with_artifacts(count: int, store: ArtifactStore, artifact_bytes: int, position0: int = 0
                        ) -> list[dict[str, Any]]:
    """``count`` manifests, each with a unique run id, RESULTS_PER_RUN results and two artifacts of its own in
    ``store`` (the runner's outbox): a small HLO module (parsed by the ingest queue) and incompressible bytes."""
    docs = []
    for i in range(count):
        tag = uuid.uuid4().hex[:12]
        hlo = store.put(HLO_TEMPLATE.format(tag=tag).encode(), "hlo", "module.txt")
        blob = store.put(tag.encode() + os.urandom(max(0, artifact_bytes - 12)), "blob", "capture.bin")
        results = [builders.result(name=f"kernel_{k}", samples=[1e-3 * (1 + 0.01 * j) for j in range(5)])
                   for k in range(RESULTS_PER_RUN)]
        results[0]["artifacts"] = [{"kind": r.kind, "name": r.name, "sha256": r.sha256, "size": r.size}
                                   for r in (hlo, blob)]
        docs.append(builders.manifest(position0 + i, results, repo="faults"))
    return docs


class Submitter(threading.Thread):
    """A runner's upload loop in a thread: each manifest sent with ``HttpUploader`` (which retries 502/503/504
    and connection errors a few times itself), sent again while the service stays unavailable, until
    ``give_up_s``. A rejection (4xx, 500) is final, as it is for a runner: that run is not sent again."""

    def __init__(self, url: str, token: str, store: ArtifactStore, docs: Sequence[dict[str, Any]],
                 give_up_s: float, pause_s: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.url, self.token, self.store, self.docs = url, token, store, list(docs)
        self.give_up_s, self.pause_s = give_up_s, pause_s
        self.acked: dict[str, bool] = {}  # run id -> created (False: the service held it already)
        self.unavailable: list[str] = []  # each UploadUnavailable the client met (the fault, as it saw it)
        self.rejected: list[tuple[str, int | None, str | None, str]] = []  # run id, status, code, message
        self.gave_up: list[str] = []
        self.retried: list[str] = []  # each transient answer the uploader met and retried (its log's warnings)

    def run(self) -> None:
        handler = _ThreadRecords(threading.get_ident(), self.retried)
        logging.getLogger("runners.uploader").addHandler(handler)
        try:
            self._send_all()
        finally:
            logging.getLogger("runners.uploader").removeHandler(handler)

    def _send_all(self) -> None:
        send = HttpUploader(self.url, self.token, self.store, timeout=30, retries=3, backoff=0.25)
        for doc in self.docs:
            deadline = time.monotonic() + self.give_up_s
            while True:
                try:
                    self.acked[doc["run_id"]] = send(doc).created
                    break
                except UploadUnavailable as exc:
                    self.unavailable.append(str(exc)[:300])
                    if time.monotonic() > deadline:
                        self.gave_up.append(doc["run_id"])
                        break
                    time.sleep(0.5)
                except UploadRejected as exc:
                    self.rejected.append((doc["run_id"], exc.status, exc.code, str(exc)[:300]))
                    break
            time.sleep(self.pause_s)


class _ThreadRecords(logging.Handler):
    """Keeps the messages one thread logs."""

    def __init__(self, thread: int, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.thread, self.into = thread, into

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.into.append(record.getMessage()[:300])


@dataclass(frozen=True)
class Tally:
    stored: int  # run ids with exactly one run row holding all its results
    duplicates: int  # extra run rows, extra results, HLO modules parsed into two records
    half_written: int  # run rows with fewer results than sent
    unparsed: int  # HLO artifacts of stored runs not yet parsed


def tally(database_url: str, run_ids: Sequence[str], results_per_run: int = RESULTS_PER_RUN) -> Tally:
    engine = make_engine(database_url)
    try:
        with make_session_factory(engine)() as s:
            rows = s.execute(select(Run.id, Run.run_uid, func.count(Result.id))
                             .outerjoin(Result, Result.run_id == Run.id)
                             .where(Run.run_uid.in_(list(run_ids))).group_by(Run.id)).all()
            run_pks = [pk for pk, _, _ in rows]
            per_uid: dict[str, int] = {}
            for _, uid, _count in rows:
                per_uid[uid] = per_uid.get(uid, 0) + 1
            extra_rows = sum(n - 1 for n in per_uid.values())
            extra_results = sum(max(0, c - results_per_run) for _, _, c in rows)
            half = sum(1 for _, _, c in rows if c < results_per_run)
            whole = {uid for _, uid, c in rows if c == results_per_run}
            modules = s.execute(select(HloModuleRecord.result_id, func.count(HloModuleRecord.id))
                                .join(Result, Result.id == HloModuleRecord.result_id)
                                .where(Result.run_id.in_(run_pks)).group_by(HloModuleRecord.result_id)).all()
            doubled_modules = sum(max(0, c - 1) for _, c in modules)
            unparsed = s.scalar(select(func.count(func.distinct(Artifact.id)))
                                .join(ResultArtifact, ResultArtifact.artifact_id == Artifact.id)
                                .join(Result, Result.id == ResultArtifact.result_id)
                                .where(Result.run_id.in_(run_pks), Artifact.kind == "hlo",
                                       Artifact.parsed_version.is_(None))) or 0
    finally:
        engine.dispose()
    return Tally(stored=len(whole), duplicates=extra_rows + extra_results + doubled_modules, half_written=half,
                 unparsed=int(unparsed))


def fill(outcome: Outcome, counted: Tally, submitter: Submitter) -> None:
    outcome.submitted = len(submitter.docs)
    outcome.stored = counted.stored
    outcome.duplicates = counted.duplicates
    outcome.lost = outcome.submitted - counted.stored
    if submitter.rejected:
        statuses = sorted({f"{status} {code}" for _, status, code, _ in submitter.rejected})
        outcome.notes.append(f"{len(submitter.rejected)} upload(s) rejected as final: {', '.join(statuses)}; "
                             f"first: {submitter.rejected[0][3][:160]}")
    if submitter.gave_up:
        outcome.notes.append(f"{len(submitter.gave_up)} run(s) still unavailable when the client gave up")
    if counted.half_written:
        outcome.notes.append(f"{counted.half_written} run(s) half-written")


def _wait_acked(submitter: Submitter, count: int, timeout: float = 120) -> None:
    wait_for(lambda: len(submitter.acked) + len(submitter.rejected) >= count or not submitter.is_alive(), timeout)


def _base_env(home: Path, database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    return clean_env(home, KERNELWATCH_DATABASE_URL=database_url, KERNELWATCH_REDIS_URL=redis_url,
                     KERNELWATCH_FOLLOW_UP="none", KERNELWATCH_TASK_VISIBILITY_TIMEOUT="6", **extra)


def broker_backlog(redis_url: str) -> dict[str, int]:
    """Messages waiting on the ingest and detect queues, and those taken by a worker and not yet acknowledged."""
    client = redis.Redis.from_url(redis_url, socket_timeout=3)
    try:
        backlog = {"unacked": int(client.hlen("unacked"))}
        for key in client.keys("*"):
            name = (key.decode() if isinstance(key, bytes) else str(key)).split("\x06")[0]
            if name in ("ingest", "detect") and client.type(key) == b"list":
                backlog[name] = backlog.get(name, 0) + int(client.llen(key))
        return backlog
    finally:
        client.close()


def _drained(redis_url: str, queues: Sequence[str] = ("ingest", "detect")) -> bool:
    try:
        return not any(n for name, n in broker_backlog(redis_url).items() if name in (*queues, "unacked"))
    except redis.RedisError:
        return False


# --- the scenarios -----------------------------------------------------------------------------------------


def kill_web_mid_upload(plan: Plan) -> Outcome:
    """gunicorn (master and worker) SIGKILLed while the client uploads artifacts and manifests; down for
    ``fault_s``, restarted on the same port; the client's retries carry on."""
    out, started = Outcome("kill-web-mid-upload"), time.monotonic()
    root = plan.workdir / "kill-web"
    store = ArtifactStore(root / "runner" / "artifacts")
    docs = runs_with_artifacts(plan.runs, store, max(plan.artifact_bytes, 512 * 1024))
    with _scratch_database() as db, private_redis(root / "redis") as broker:
        env = _base_env(root / "service", db, broker.url)
        token, port = submit_token(db), free_port()
        web = start_gunicorn(env, root, port, "web-1")
        client = Submitter(web_url(port), token, store, docs, give_up_s=plan.fault_s + 120)
        try:
            client.start()
            _wait_acked(client, max(1, plan.runs // 3))
            time.sleep(0.05 + (hash(docs[0]["run_id"]) % 100) / 1000)  # land somewhere inside a request
            web.kill()
            time.sleep(plan.fault_s)
            web = start_gunicorn(env, root, port, "web-2")
            client.join(plan.fault_s + 300)
            out.recovered = not client.is_alive() and health(web_url(port)) == 200
        finally:
            web.stop()
        fill(out, tally(db, [d["run_id"] for d in docs]), client)
    service_store = ArtifactStore(root / "service" / "artifacts")
    debris = list((root / "service" / "artifacts").rglob(".incoming-*"))
    unreadable = [d for d in docs for a in d["results"][0]["artifacts"] if not _readable(service_store, a["sha256"])]
    if debris:
        out.notes.append(f"{len(debris)} temporary file(s) of killed uploads left in the store (never read)")
    if unreadable:
        out.lost += len({id(d) for d in unreadable})
        out.notes.append(f"{len(unreadable)} artifact(s) missing or unreadable in the service's store")
    cut = [m for m in client.retried if "RemoteDisconnected" in m or "reset" in m.lower() or "Broken pipe" in m]
    out.notes.append(f"the client retried {len(client.retried)} request(s), {len(cut)} of them cut off mid-request")
    out.visible = bool(client.retried or client.unavailable)
    out.recovered = out.recovered and not client.gave_up and not client.rejected
    out.wall_s = time.monotonic() - started
    return out


def _readable(store: ArtifactStore, digest: str) -> bool:
    try:
        store.get(digest)
        return True
    except Exception:  # noqa: BLE001 - any failure to read it back counts
        return False


def postgres_restart(plan: Plan) -> Outcome:
    """A private PostgreSQL cluster stopped (fast shutdown: connections cut) under gunicorn while the client
    submits, down for ``fault_s``, started again."""
    out, started = Outcome("postgres-restart"), time.monotonic()
    root = plan.workdir / "postgres"
    store = ArtifactStore(root / "runner" / "artifacts")
    docs = runs_with_artifacts(plan.runs, store, plan.artifact_bytes)
    with private_postgres() as pg, private_redis(root / "redis") as broker:
        upgrade(pg.url)
        env = _base_env(root / "service", pg.url, broker.url)
        token, port = submit_token(pg.url), free_port()
        client = Submitter(web_url(port), token, store, docs, give_up_s=plan.fault_s + 120)
        with start_gunicorn(env, root, port):
            client.start()
            _wait_acked(client, max(1, plan.runs // 3))
            pg.stop()
            down = health(web_url(port))
            time.sleep(plan.fault_s)
            pg.start()
            client.join(plan.fault_s + 300)
            out.recovered = not client.is_alive() and wait_for(lambda: health(web_url(port)) == 200, 30)
        fill(out, tally(pg.url, [d["run_id"] for d in docs]), client)
    out.notes.append(f"/health while down: {down}")
    out.visible = down == 503 and any("503" in u for u in client.retried + client.unavailable)
    out.recovered = out.recovered and not client.gave_up and not client.rejected
    out.wall_s = time.monotonic() - started
    return out


def redis_restart(plan: Plan) -> Outcome:
    """The broker (a private redis-server with an append-only log) SIGKILLed while the client submits and a
    worker runs the follow-ups (parse, detect), down for ``fault_s``, started again on the same port."""
    out, started = Outcome("redis-restart"), time.monotonic()
    root = plan.workdir / "redis"
    store = ArtifactStore(root / "runner" / "artifacts")
    docs = runs_with_artifacts(plan.runs, store, plan.artifact_bytes)
    with _scratch_database() as db, private_redis(root / "redis", appendonly=True) as broker:
        env = _base_env(root / "service", db, broker.url)
        token, port = submit_token(db), free_port()
        client = Submitter(web_url(port), token, store, docs, give_up_s=plan.fault_s + 120)
        with start_gunicorn(env, root, port), start_worker(env, root, "ingest,detect", name="worker") as worker:
            client.start()
            _wait_acked(client, max(1, plan.runs // 3))
            broker.stop()
            time.sleep(plan.fault_s)
            broker.start()
            client.join(plan.fault_s + 300)
            finished = not client.is_alive()
            run_ids = [d["run_id"] for d in docs]
            drained = wait_for(lambda: _drained(broker.url) and tally(db, run_ids).unparsed == 0, 120)
            out.notes.append(f"worker {'alive' if worker.alive() else 'DEAD'} after the restart")
            out.recovered = finished and drained and worker.alive()
        counted = tally(db, [d["run_id"] for d in docs])
        fill(out, counted, client)
        out.lost += counted.unparsed  # a follow-up dropped with the broker is work lost too
        if counted.unparsed:
            out.notes.append(f"{counted.unparsed} HLO artifact(s) never parsed")
    out.visible = any("503" in u for u in client.retried + client.unavailable)
    out.recovered = out.recovered and not client.gave_up and not client.rejected
    out.wall_s = time.monotonic() - started
    return out


def _task_ids(worker: ServiceProcess, task: str, event: str) -> set[str]:
    return set(re.findall(rf"kernelwatch\.{task}\[([0-9a-f-]+)\] {event}", worker.output()))


def _parsed_or_stuck(redis_url: str, database_url: str, run_ids: Sequence[str], timeout: float) -> bool:
    """True once every HLO artifact is parsed; False after ``timeout``, or sooner when the ingest queue has been
    empty, with nothing unacknowledged, for three visibility timeouts while some stay unparsed (nothing left on
    the broker could parse them)."""
    deadline, idle_since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        drained = _drained(redis_url, ["ingest"])
        if drained and tally(database_url, run_ids).unparsed == 0:
            return True
        idle_since = (idle_since or time.monotonic()) if drained else None
        if idle_since is not None and time.monotonic() - idle_since > 18:
            return False
        time.sleep(0.5)
    return False


VANISHED = "vanished between the killed worker's pop and its unacked record"


def kill_ingest_worker(plan: Plan) -> Outcome:
    """The ingest worker (parse_artifacts) SIGKILLed, pool included, while runs come in; down for ``fault_s``;
    a second worker takes over the queue and, after the visibility timeout, the task the first one held; a task
    the killed worker had popped but not yet recorded as unacknowledged is queued again by beat's parse sweep."""
    out, started = Outcome("kill-ingest-worker"), time.monotonic()
    root = plan.workdir / "kill-ingest"
    store = ArtifactStore(root / "runner" / "artifacts")
    docs = runs_with_artifacts(plan.runs, store, plan.artifact_bytes)
    run_ids = [d["run_id"] for d in docs]
    with _scratch_database() as db, private_redis(root / "redis") as broker:
        env = _base_env(root / "service", db, broker.url)
        token, port = submit_token(db), free_port()
        # Spaced out, so that runs keep coming while no ingest worker runs.
        client = Submitter(web_url(port), token, store, docs, give_up_s=plan.fault_s + 120, pause_s=0.3)
        with start_gunicorn(env, root, port):
            a = start_worker(env, root, "ingest", name="ingest-a")
            try:
                client.start()
                wait_for(lambda: len(_task_ids(a, "parse_artifacts", "succeeded")) >= max(1, plan.runs // 3)
                         or not client.is_alive(), 120)
            finally:
                a.kill()
            in_flight = _task_ids(a, "parse_artifacts", "received") - _task_ids(a, "parse_artifacts", "succeeded")
            time.sleep(plan.fault_s)
            pending = tally(db, run_ids).unparsed
            # Beat, as compose runs it: its parse sweep queues again a parse the killed worker took to its grave.
            with start_worker(env, root, "ingest", name="ingest-b") as b, \
                    start_kernelwatch(env, root, "beat", name="beat"):
                client.join(plan.fault_s + 300)
                done = _parsed_or_stuck(broker.url, db, run_ids, 120)
                time.sleep(3)  # a duplicate redelivery, if any, would land now
                if not done:
                    backlog, unparsed = broker_backlog(broker.url), tally(db, run_ids).unparsed
                    out.notes.append(f"not drained: broker {backlog}, {unparsed} unparsed")
                    if unparsed and not backlog.get("ingest") and not backlog.get("unacked"):
                        # Neither queued nor unacknowledged, and no worker says it received it: popped by the
                        # killed worker in the window between kombu's RPOP and its MULTI ZADD/HSET unacked.
                        out.notes.append(f"{VANISHED}: {unparsed} parse task(s) gone from the broker")
                redelivered = in_flight & _task_ids(b, "parse_artifacts", "succeeded")
            out.recovered = done and not client.is_alive()
        counted = tally(db, run_ids)
        fill(out, counted, client)
        out.lost += counted.unparsed
        if counted.unparsed:
            out.notes.append(f"{counted.unparsed} HLO artifact(s) never parsed")
    out.notes.append(f"{len(in_flight)} task(s) in flight at the kill, {len(redelivered)} redelivered to B; "
                     f"{pending} HLO artifact(s) pending parse while no worker ran")
    # The kill shows where it concerns: the artifacts stay unparsed (parsed_version null) until a worker runs
    # them, and a task held by the dead worker comes back to the next one.
    out.visible = pending > 0 or bool(in_flight) and redelivered == in_flight
    out.recovered = out.recovered and not client.gave_up and not client.rejected
    out.wall_s = time.monotonic() - started
    return out


@contextlib.contextmanager
def small_filesystem(path: Path, size_bytes: int) -> Iterator[None]:
    """A tmpfs of ``size_bytes`` mounted at ``path`` (needs root and CAP_SYS_ADMIN: a container may refuse)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"cannot mount a tmpfs at {path}: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def can_mount_tmpfs() -> str | None:
    """None when a tmpfs can be mounted here, else why not."""
    probe = Path(tempfile.mkdtemp(prefix="kw-tmpfs-probe-"))
    try:
        with small_filesystem(probe, 1 << 20):
            return None
    except RuntimeError as exc:
        return str(exc)
    finally:
        probe.rmdir()


def _fill_up(path: Path) -> Path:
    filler = path / "filler"
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 16))
                f.flush()
        except OSError:
            pass
    return filler


def disk_full(plan: Plan) -> Outcome:
    """The service's artifact store on a small tmpfs, filled to the last byte a third of the way in, freed after
    ``fault_s``. Expected: uploads meanwhile are told so (a 503/507 in the error shape, retried), nothing
    half-written reaches the store, and the same uploads succeed once there is room."""
    out, started = Outcome("disk-full"), time.monotonic()
    root = plan.workdir / "disk-full"
    store = ArtifactStore(root / "runner" / "artifacts")
    docs = runs_with_artifacts(plan.runs, store, plan.artifact_bytes)
    artifacts_dir = root / "service" / "artifacts"
    size = 4 * plan.runs * (plan.artifact_bytes + 4096) + (1 << 20)
    with _scratch_database() as db, private_redis(root / "redis") as broker, small_filesystem(artifacts_dir, size):
        env = _base_env(root / "service", db, broker.url)
        token, port = submit_token(db), free_port()
        client = Submitter(web_url(port), token, store, docs, give_up_s=plan.fault_s + 120)
        with start_gunicorn(env, root, port):
            client.start()
            _wait_acked(client, max(1, plan.runs // 3))
            filler = _fill_up(artifacts_dir)
            time.sleep(plan.fault_s)
            filler.unlink()
            client.join(plan.fault_s + 300)
            out.recovered = not client.is_alive()
            debris = list(artifacts_dir.rglob(".incoming-*"))
            service_store = ArtifactStore(artifacts_dir)
            stored_digests = [p.name.removesuffix(".gz") for p in artifacts_dir.rglob("*.gz")]
            damaged = [d for d in stored_digests if not _readable(service_store, d)]
        fill(out, tally(db, [d["run_id"] for d in docs]), client)
    if debris or damaged:
        out.notes.append(f"half-written: {len(debris)} temporary file(s), {len(damaged)} unreadable artifact(s)")
    statuses = {status for _, status, _, _ in client.rejected}
    clear = [u for u in client.retried + client.unavailable if "507" in u or "503" in u]
    out.visible = bool(clear) or statuses <= {507} and bool(statuses)
    out.recovered = out.recovered and not client.gave_up and not client.rejected and not damaged
    out.wall_s = time.monotonic() - started
    return out


# A suite whose second benchmark notes its pid in MARKER and sleeps while the file SLOW exists: long enough to kill
# the runner inside it. Paths written into the source: a benchmark process sees only an allow-listed environment
# (runners/sandbox.py), so a variable of the test's would not reach it.
RUNNER_SUITE = '''
import os, time
import numpy as np
from runners.suite import Case, benchmark, grid

@benchmark(suite="toy", params=grid(n=[256, 512]))
def scale(n):
    if n == 512 and os.path.exists({slow!r}):
        with open({marker!r}, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
        time.sleep(4)
    x = np.arange(n, dtype=np.float32)
    return Case(fn=lambda v: v * 3, args=(x,), reference=lambda: x * 3)
'''


def kill_runner_mid_suite(plan: Plan) -> Outcome:
    """A real runner (`kernelwatch worker --queues runner.cpu`) SIGKILLed, benchmark process included, inside
    the first suite of ``runs`` queued; a second runner started ``fault_s`` later must store each run once."""
    from tests.gitrepo import commit_all, suite_repo

    out, started = Outcome("kill-runner-mid-suite"), time.monotonic()
    root = plan.workdir / "kill-runner"
    repo, marker, slow = root / "kernels", root / "marker", root / "slow"
    root.mkdir(parents=True, exist_ok=True)
    slow.write_text("")
    suite_repo(repo, RUNNER_SUITE.format(marker=str(marker), slow=str(slow)), module="toy")
    shas = [commit_all(repo, "first")]
    for i in range(1, plan.runs):
        (repo / "README").write_text(str(i))
        shas.append(commit_all(repo, f"commit {i}"))
    with _scratch_database() as db, private_redis(root / "redis") as broker:
        env_a = _base_env(root / "host-a", db, broker.url, KERNELWATCH_CALIBRATE="0")
        env_b = _base_env(root / "host-b", db, broker.url, KERNELWATCH_CALIBRATE="0")
        a = start_worker(env_a, root, "runner.cpu", name="runner-a")
        try:
            task_ids = []
            for sha in shas:
                queued = subprocess.run([sys.executable, "-m", "service.cli", "submit", "--repo", str(repo),
                                         "--commit", sha, "--hardware", "cpu", "--samples", "3"], env=env_a,
                                        capture_output=True, text=True, timeout=120)
                if queued.returncode != 0:
                    raise RuntimeError(f"kernelwatch submit failed: {queued.stderr[-2000:]}")
                task_ids.append(queued.stdout.strip().rsplit(" ", 1)[-1])
            wait_for(marker.exists, 180)
        finally:
            a.kill()
            slow.unlink()
        killed = _task_ids(a, "run_suite", "received") - _task_ids(a, "run_suite", "succeeded")
        time.sleep(plan.fault_s)
        run_ids = [t.replace("-", "") for t in task_ids]
        with start_worker(env_b, root, "runner.cpu", name="runner-b") as b:
            done = wait_for(lambda: tally(db, run_ids).stored == len(run_ids), 120 + 30 * plan.runs)
            time.sleep(3)  # a duplicate, if any, would land now
            redelivered = killed & _task_ids(b, "run_suite", "received")
        counted = tally(db, run_ids)
    out.submitted, out.stored, out.duplicates = len(run_ids), counted.stored, counted.duplicates
    out.lost = len(run_ids) - counted.stored
    out.notes.append(f"killed inside {len(killed)} task(s); {len(redelivered)} of them redelivered to runner B")
    # There is no run row before a run is stored; the killed run shows as its task coming back to the next
    # runner (acks_late, a visibility timeout) and then as a stored run.
    out.visible = bool(killed) and redelivered == killed
    out.recovered = done
    out.wall_s = time.monotonic() - started
    return out


# --- Slack -----------------------------------------------------------------------------------------------------


class ScaledClock:
    """Now, moving ``scale`` times faster than the wall from its start: a backoff of minutes passes in seconds."""

    def __init__(self, scale: float) -> None:
        self.scale, self.start = scale, datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.start + (datetime.now(UTC) - self.start) * self.scale


def _alerts(sessions: Any, notifier: Any, count: int, first: int = 0) -> list[int]:
    """``count`` alerts, each of one repository's two-commit series with a finding at its second commit."""
    from service.contract import parse_manifest
    from service.pipeline.alerts import group_findings
    from service.pipeline.ingest import ingest_manifest
    from service.store.models import Commit, Finding, Repository, Series

    ids = []
    for a in range(first, first + count):
        repo = f"faults-{a}"
        with unit_of_work(sessions) as s:
            for p in range(2):
                ingest_manifest(s, parse_manifest(builders.manifest(p, [builders.result(suite="s", name="k")],
                                                                    repo=repo)))
        with unit_of_work(sessions) as s:
            repo_id = s.scalars(select(Repository.id).where(Repository.name == repo)).one()
            commits = {c.position: c.id for c in s.scalars(select(Commit).where(Commit.repository_id == repo_id))}
            series_id = s.scalars(select(Series.id).where(Series.repository_id == repo_id)).one()
            finding = Finding(series_id=series_id, commit_id=commits[1], previous_commit_id=commits[0],
                              detector="faults", detector_version=1, kind="time", direction="regression",
                              magnitude=0.1, confidence=10.0, value_before=1.0, value_after=1.1,
                              created_at=datetime.now(UTC), attribution={})
            s.add(finding)
            s.flush()
            outcome = group_findings(s, [finding.id])
            ids.extend(notifier.mark_grouped(s, outcome))
    return ids


def slack_500_429(plan: Plan) -> Outcome:
    """The fake Slack answers 500 for the first half of ``fault_s`` and 429 (Retry-After: 2) for the second,
    while ``runs`` new alerts are announced. Deliveries as the notify worker makes them (``deliver`` at once,
    then the sweep every half second, standing in for the task's retries and the beat's sweep), with the
    notifier's clock ``clock_scale`` times the wall's, so that its 30 s, 60 s... backoff fits a short window."""
    from service.integrations.slack import SlackClient
    from service.pipeline.notify import FAILED, PENDING, SENT, SlackNotifier
    from service.store.models import AlertNotification
    from tests.fake_slack import TOKEN, running_fake_slack

    out, started = Outcome("slack-500-429"), time.monotonic()
    with _scratch_database() as db, running_fake_slack() as fake:
        engine = make_engine(db)
        sessions = make_session_factory(engine)
        notifier = SlackNotifier(sessions=sessions, sender=SlackClient(TOKEN, fake.url, timeout_s=5, max_wait_s=3),
                                 channel="#perf-alerts", public_url="https://kw.example.com",
                                 clock=ScaledClock(plan.clock_scale))

        def states() -> dict[int, tuple[str, str | None]]:
            with sessions() as s:
                return {r.alert_id: (r.state, r.last_error) for r in s.scalars(select(AlertNotification))}

        # New alerts keep coming through the whole fault, each delivered at once as the notify task does: the
        # first half of them meets the 500s, the second half the 429s.
        fake.fail_with(500)
        start = time.monotonic()
        fault_ends = start + plan.fault_s
        alert_ids: list[int] = []
        first_try: dict[int, tuple[str, str | None]] = {}
        switched = healed = False
        deadline = fault_ends + 600 / max(1.0, plan.clock_scale) + 30
        while time.monotonic() < deadline:
            now = time.monotonic()
            if not switched and now >= start + plan.fault_s / 2:
                fake.fail_with(None)
                fake.rate_limit(10**9, retry_after=2)
                switched = True
            if not healed and now >= fault_ends:
                fake.rate_limit(0)
                healed = True
            if len(alert_ids) < plan.runs and now >= start + plan.fault_s * len(alert_ids) / plan.runs:
                [alert_id] = _alerts(sessions, notifier, 1, len(alert_ids))
                alert_ids.append(alert_id)
                notifier.deliver(alert_id)
                if time.monotonic() < fault_ends:  # a delivery that waited out the end of the fault is not one
                    first_try[alert_id] = states()[alert_id]
                continue
            notifier.sweep()
            if healed and len(alert_ids) == plan.runs and all(st == SENT for st, _ in states().values()):
                break
            time.sleep(0.2)
        final = states()
        posted = [r for r in fake.calls("chat.postMessage", ok_only=True) if r.body.get("thread_ts") is None]
        engine.dispose()
    statuses = sorted({r.status for r in fake.requests})
    out.submitted = len(alert_ids)
    out.stored = sum(1 for state, _ in final.values() if state == SENT)
    out.duplicates = max(0, len(posted) - len(alert_ids))
    out.lost = out.submitted - out.stored
    out.visible = bool(first_try) and all(state in (PENDING, FAILED) and error for state, error in first_try.values())
    out.recovered = out.stored == out.submitted
    out.notes.append(f"Slack answered {statuses}; {len(fake.requests)} calls, {len(posted)} top-level posts; "
                     f"{len(first_try)} alert(s) first tried during the fault; notifier clock x{plan.clock_scale:g}")
    if out.visible is False:
        out.notes.append(f"states after the first try: {sorted(set(st for st, _ in first_try.values()))}")
    out.wall_s = time.monotonic() - started
    return out


# --- GitHub ----------------------------------------------------------------------------------------------------


def _flaky_github_class() -> Any:
    from tests.fake_github import FakeGitHub, Recorded

    @dataclass
    class FlakyGitHub(FakeGitHub):
        """The fake GitHub, down for ``fault_s`` from the moment a check run has been created: 500 for the first
        half, 429 with Retry-After: 1 for the second. The outage so begins in the middle of a report (its check
        run posted, its comment not yet), where a retried report could post a second check run."""

        fault_s: float = 0.0
        window: tuple[float, float] | None = None

        def serve(self, method: str, path: str, query: dict[str, list[str]], auth: str,
                  body: Any) -> tuple[int, Any, dict[str, str]]:
            now = time.monotonic()
            if self.window is not None and self.window[0] <= now < self.window[1]:
                with self._lock:
                    self.requests.append(Recorded(method, path, query, auth, body))
                if now < (self.window[0] + self.window[1]) / 2:
                    return 500, {"message": "injected outage"}, {}
                return 429, {"message": "injected: API rate limit exceeded"}, {"Retry-After": "1"}
            answer = super().serve(method, path, query, auth, body)
            if (self.window is None and self.fault_s > 0 and method == "POST" and path.endswith("/check-runs")
                    and answer[0] < 300):
                self.window = (now, now + self.fault_s)
            return answer

    return FlakyGitHub


def github_500_429(plan: Plan) -> Outcome:
    """``runs`` pull requests reported as the report task does (``PullRequestHooks.report``, a Transient
    error retried after ``_github_countdown``, the task's own backoff), as a GitHub App (check runs and one
    comment each), while the fake GitHub is down for ``fault_s`` from the first check run on."""
    from service.errors import Transient
    from service.integrations.github import ClientFactory
    from service.pipeline.pull_requests import HookConfig, PullRequestHooks
    from service.store.models import PullRequest
    from service.tasks import _github_countdown
    from tests.fake_github import APP_ID, app_key_pair, serve_fake_github
    from tests.pr_hook import measured_pull_requests

    out, started = Outcome("github-500-429"), time.monotonic()
    private, public = app_key_pair()
    with _scratch_database() as db, serve_fake_github(_flaky_github_class()(public_key=public,
                                                                           fault_s=plan.fault_s)) as fake:
        engine = make_engine(db)
        sessions = make_session_factory(engine)
        hooks = PullRequestHooks(sessions, ClientFactory(fake.url, APP_ID, private, timeout_s=5),
                                 HookConfig(public_url="http://kw.test", check_runs=True))
        pr_ids = measured_pull_requests(sessions, plan.runs)
        due = {pr_id: time.monotonic() for pr_id in pr_ids}
        retries = dict.fromkeys(pr_ids, 0)
        errors: dict[int, str] = {}
        deadline = time.monotonic() + plan.fault_s + 400
        while due and time.monotonic() < deadline:
            for pr_id, at in sorted(due.items(), key=lambda item: item[1]):
                if at > time.monotonic():
                    continue
                try:
                    hooks.report(pr_id)
                    del due[pr_id]
                except Transient as exc:
                    errors.setdefault(pr_id, str(exc))
                    due[pr_id] = time.monotonic() + _github_countdown(exc, retries[pr_id])
                    retries[pr_id] += 1
            time.sleep(0.2)
        with sessions() as s:
            reported = {pr.id for pr in s.scalars(select(PullRequest)) if pr.reported_key is not None}
            heads = {pr.id: (pr.head_sha, pr.number) for pr in s.scalars(select(PullRequest))}
        engine.dispose()
    checks = [run["head_sha"] for run in fake.check_runs.values()]
    comments = [c["issue"][1] for c in fake.comments.values()]
    out.submitted = len(pr_ids)
    out.stored = sum(1 for pr_id in pr_ids if pr_id in reported and checks.count(heads[pr_id][0]) >= 1
                     and comments.count(heads[pr_id][1]) >= 1)
    out.duplicates = sum(max(0, checks.count(sha) - 1) + max(0, comments.count(number) - 1)
                         for sha, number in heads.values())
    out.lost = out.submitted - out.stored
    # A failed report shows on its pull request: not marked reported (so it is tried again), the task's error
    # naming GitHub's answer.
    out.visible = bool(errors) and all("500" in e or "rate limit" in e for e in errors.values())
    out.recovered = not due
    out.notes.append(f"{len(errors)} report(s) failed at first and were retried; {len(fake.requests)} GitHub "
                     f"calls; {len(checks)} check run(s), {len(comments)} comment(s) for {len(pr_ids)} pull requests")
    if out.duplicates:
        out.notes.append("a report whose check run was posted before GitHub failed posts another check run on "
                         "its retry: PullRequestHooks.report rolls back the check_run_id it had just stored")
    out.wall_s = time.monotonic() - started
    return out


SCENARIOS: dict[str, Callable[[Plan], Outcome]] = {
    "kill-ingest-worker": kill_ingest_worker,
    "kill-runner-mid-suite": kill_runner_mid_suite,
    "kill-web-mid-upload": kill_web_mid_upload,
    "postgres-restart": postgres_restart,
    "redis-restart": redis_restart,
    "disk-full": disk_full,
    "slack-500-429": slack_500_429,
    "github-500-429": github_500_429,
}

