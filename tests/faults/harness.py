"""What every fault scenario shares: the outcome it counts, the plan it follows, the processes it starts (scratch
and private databases and brokers, the web process) and the runs it submits and counts."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import func, select

from runners.artifacts import ArtifactStore
from runners.uploader import HttpUploader, UploadRejected, UploadUnavailable
from service.pipeline.tokens import create_token
from service.store.db import make_engine, make_session_factory, unit_of_work
from service.store.models import Artifact, HloModuleRecord, Result, ResultArtifact, Run
from tests import builders
from tests.private_servers import PrivatePostgres, PrivateRedis
from tests.processes import ServiceProcess, clean_env
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


def faults_database() -> contextlib.AbstractContextManager[str]:
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


def wait_acked(submitter: Submitter, count: int, timeout: float = 120) -> None:
    wait_for(lambda: len(submitter.acked) + len(submitter.rejected) >= count or not submitter.is_alive(), timeout)


def base_env(home: Path, database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
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


def queues_drained(redis_url: str, queues: Sequence[str] = ("ingest", "detect")) -> bool:
    try:
        return not any(n for name, n in broker_backlog(redis_url).items() if name in (*queues, "unacked"))
    except redis.RedisError:
        return False


