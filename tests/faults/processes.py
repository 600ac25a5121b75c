"""Faults of the service's own processes and their stores: a web process, an ingest worker or a runner killed
mid-work, PostgreSQL or Redis restarted, the artifact disk full."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from runners.artifacts import ArtifactStore
from service.store.db import upgrade
from tests.faults.harness import (
    Outcome,
    Plan,
    Submitter,
    base_env,
    broker_backlog,
    faults_database,
    fill,
    health,
    private_postgres,
    private_redis,
    queues_drained,
    runs_with_artifacts,
    start_gunicorn,
    submit_token,
    tally,
    wait_acked,
    wait_for,
    web_url,
)
from tests.private_servers import free_port
from tests.processes import ServiceProcess, start_kernelwatch, start_worker

# --- the scenarios -----------------------------------------------------------------------------------------


def kill_web_mid_upload(plan: Plan) -> Outcome:
    """gunicorn (master and worker) SIGKILLed while the client uploads artifacts and manifests; down for
    ``fault_s``, restarted on the same port; the client's retries carry on."""
    out, started = Outcome("kill-web-mid-upload"), time.monotonic()
    root = plan.workdir / "kill-web"
    store = ArtifactStore(root / "runner" / "artifacts")
    docs = runs_with_artifacts(plan.runs, store, max(plan.artifact_bytes, 512 * 1024))
    with faults_database() as db, private_redis(root / "redis") as broker:
        env = base_env(root / "service", db, broker.url)
        token, port = submit_token(db), free_port()
        web = start_gunicorn(env, root, port, "web-1")
        client = Submitter(web_url(port), token, store, docs, give_up_s=plan.fault_s + 120)
        try:
            client.start()
            wait_acked(client, max(1, plan.runs // 6))  # most of the runs still to send when the kill lands
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
        env = base_env(root / "service", pg.url, broker.url)
        token, port = submit_token(pg.url), free_port()
        client = Submitter(web_url(port), token, store, docs, give_up_s=plan.fault_s + 120)
        with start_gunicorn(env, root, port):
            client.start()
            wait_acked(client, max(1, plan.runs // 6))  # most of the runs still to send when the kill lands
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
    with faults_database() as db, private_redis(root / "redis", appendonly=True) as broker:
        env = base_env(root / "service", db, broker.url)
        token, port = submit_token(db), free_port()
        client = Submitter(web_url(port), token, store, docs, give_up_s=plan.fault_s + 120)
        with start_gunicorn(env, root, port), start_worker(env, root, "ingest,detect", name="worker") as worker:
            client.start()
            wait_acked(client, max(1, plan.runs // 6))  # most of the runs still to send when the kill lands
            broker.stop()
            time.sleep(plan.fault_s)
            broker.start()
            client.join(plan.fault_s + 300)
            finished = not client.is_alive()
            run_ids = [d["run_id"] for d in docs]
            drained = wait_for(lambda: queues_drained(broker.url) and tally(db, run_ids).unparsed == 0, 120)
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
        drained = queues_drained(redis_url, ["ingest"])
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
    with faults_database() as db, private_redis(root / "redis") as broker:
        env = base_env(root / "service", db, broker.url)
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
    """The service's artifact store on a small tmpfs, filled to the last byte a sixth of the way in, freed after
    ``fault_s``. Expected: uploads meanwhile are told so (a 503/507 in the error shape, retried), nothing
    half-written reaches the store, and the same uploads succeed once there is room."""
    out, started = Outcome("disk-full"), time.monotonic()
    root = plan.workdir / "disk-full"
    store = ArtifactStore(root / "runner" / "artifacts")
    docs = runs_with_artifacts(plan.runs, store, plan.artifact_bytes)
    artifacts_dir = root / "service" / "artifacts"
    size = 4 * plan.runs * (plan.artifact_bytes + 4096) + (1 << 20)
    with faults_database() as db, private_redis(root / "redis") as broker, small_filesystem(artifacts_dir, size):
        env = base_env(root / "service", db, broker.url)
        token, port = submit_token(db), free_port()
        client = Submitter(web_url(port), token, store, docs, give_up_s=plan.fault_s + 120)
        with start_gunicorn(env, root, port):
            client.start()
            wait_acked(client, max(1, plan.runs // 6))  # most of the runs still to send when the kill lands
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
    with faults_database() as db, private_redis(root / "redis") as broker:
        env_a = base_env(root / "host-a", db, broker.url, KERNELWATCH_CALIBRATE="0")
        env_b = base_env(root / "host-b", db, broker.url, KERNELWATCH_CALIBRATE="0")
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


