"""The load of bench/soak.py (and of its fast sample, tests/integration/test_soak_sample.py): runner processes
uploading realistic manifests and artifacts through runners/uploader.py as runner hosts do, reader threads loading
the dashboard and the API with ids taken from the API's answers, and what the soak measures of the service's
processes from outside: their memory (VmRSS from /proc, no psutil) and the Celery queues' depth in Redis.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import random
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from runners.artifacts import ArtifactStore
from runners.uploader import HttpUploader, UploadError
from tests import builders

QUEUES = ("ingest", "detect", "notify")
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED_ARTIFACTS = (("sass", FIXTURES / "sass" / "synthetic_sm80_sm90a.sass"),
                    ("llo", FIXTURES / "llo" / "synthetic_form_a-final_bundles.txt"))
BENCHMARKS = ("matmul", "softmax", "attention", "layernorm", "rmsnorm", "conv")
STEP_AT = 10  # commit where every 12th series steps up 10 %


# --- the runners ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Submission:
    runner: int
    run_id: str
    started_s: float  # since the load began
    latency_s: float
    status: int  # the final answer: 201 created, 200 already held, 4xx/5xx, 0 no answer
    results: int
    resubmitted: bool
    retries: tuple[str, ...]  # the reason of each retried request (runners/uploader.py's warnings)
    artifacts_sent: int = 0
    artifacts_present: int = 0
    error: str = ""


def run_uid(tag: str, runner: int, k: int) -> str:
    return f"soak-{tag}-r{runner:02d}-{k:05d}"


def suite_size(seed: int) -> int:
    return random.Random(f"suite-{seed}").randint(30, 60)


def build_manifest(tag: str, runner: int, k: int, hardware: int, seed: int,
                   shared: list[tuple[str, str, int]], own: tuple[str, int]) -> dict[str, Any]:
    """Runner ``runner``'s k-th run: the suite at commit k on hardware kind ``hardware``; ``shared`` are
    (kind, sha256, size) of the fixtures every run names, ``own`` this run's random blob."""
    rng = random.Random(f"{tag}-{runner}-{k}")
    results = []
    for i in range(suite_size(seed)):
        name = BENCHMARKS[i % len(BENCHMARKS)]
        level = 1e-4 * (1 + i) * (1 + 0.1 * hardware) * (1.1 if i % 12 == 0 and k >= STEP_AT else 1.0)
        samples = [level * (1 + 0.01 * rng.gauss(0, 1)) for _ in range(10)]
        r = builders.result(suite="soak", name=name, samples=samples,
                            params={"size": 128 * (1 + i // len(BENCHMARKS)), "dtype": "bf16"})
        results.append(r)
    results[0]["artifacts"] = [{"kind": kind, "name": f"shared_{n}.txt", "sha256": digest, "size": size}
                               for n, (kind, digest, size) in enumerate(shared)]
    results[1]["artifacts"] = [{"kind": "log", "name": "run.log", "sha256": own[0], "size": own[1]}]
    env = builders.environment(backend="gpu", device_kind=f"soak-accelerator-{hardware}",
                               extra={"hostname": f"soak-runner-{runner}"})
    return builders.manifest(k, results, repo=f"soak-{tag}", run_id=run_uid(tag, runner, k), environment=env)


@dataclass(frozen=True)
class RunnerSpec:
    runner: int
    tag: str
    url: str
    token: str
    home: str
    t0: float  # time.time() when the load began
    deadline: float  # time.time() after which no submission starts
    hardware: int
    seed: int
    pause: float
    resubmit_every: int


class _Retries(logging.Handler):
    """Collects runners/uploader.py's warning per retried request."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        self.reasons.append(str(args[2]) if len(args) > 2 else record.getMessage())


def runner_loop(spec: RunnerSpec) -> list[Submission]:
    """Submit until the deadline, one manifest at a time, as a runner host does."""
    store = ArtifactStore(Path(spec.home) / "artifacts")
    shared = []
    for kind, path in SHARED_ARTIFACTS:
        ref = store.put(path.read_bytes(), kind, path.name)
        shared.append((kind, ref.sha256, ref.size))
    retries = _Retries()
    logger = logging.getLogger("runners.uploader")
    logger.addHandler(retries)
    logger.propagate = False
    send = HttpUploader(spec.url, spec.token, store, timeout=120, retries=5, backoff=0.5)
    rng = random.Random(f"{spec.tag}-{spec.runner}")
    out: list[Submission] = []
    previous: dict[str, Any] | None = None
    k = 0
    # Runners that all start at once and wait the same time would submit in bursts of --runners at a time.
    time.sleep(min(rng.uniform(0, spec.pause), max(0.0, spec.deadline - time.time())))
    while time.time() < spec.deadline:
        resubmit = previous is not None and spec.resubmit_every > 0 and rng.randrange(spec.resubmit_every) == 0
        if resubmit and previous is not None:
            manifest = previous
        else:
            blob = rng.randbytes(rng.randint(2048, 8192))
            ref = store.put(blob, "log", "run.log")
            manifest = build_manifest(spec.tag, spec.runner, k, spec.hardware, spec.seed, shared,
                                      (ref.sha256, ref.size))
            k += 1
        retries.reasons = []
        started = time.time()
        status, error, sent, present = 0, "", 0, 0
        try:
            outcome = send(manifest)
            status = 201 if outcome.created else 200
            sent, present = outcome.artifacts_sent, outcome.artifacts_present
        except UploadError as exc:
            status, error = exc.status or 0, str(exc)[:300]
        except Exception as exc:  # anything else is a finding of the soak, not a reason to stop the runner
            error = f"{type(exc).__name__}: {exc}"[:300]
        out.append(Submission(spec.runner, manifest["run_id"], started - spec.t0, time.time() - started, status,
                              len(manifest["results"]), resubmit, tuple(retries.reasons), sent, present, error))
        previous = manifest
        if spec.pause:
            time.sleep(max(0.0, min(spec.pause * rng.uniform(0.5, 1.5), spec.deadline - time.time())))
    return out


def runner_main(spec: RunnerSpec, out_path: str) -> None:
    submissions = runner_loop(spec)
    Path(out_path).write_bytes(pickle.dumps(submissions))


# --- the readers ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PageHit:
    kind: str
    latency_s: float
    status: int  # 0: no answer (a refused connection, a timeout)


class Discovered:
    """Ids the readers have seen in the API's answers, shared between their threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.shas: list[str] = []  # by position, oldest first
        self.series: list[int] = []
        self.results: list[int] = []

    def take(self, kind: str, body: Any) -> None:
        with self.lock:
            if kind == "/api/v1/commits":
                commits = sorted(body.get("commits", []), key=lambda c: c["position"])
                if commits:
                    self.shas = [c["sha"] for c in commits]
            elif kind == "/api/v1/runs/<uid>/results":
                self.series = sorted({r["series_id"] for r in body.get("results", [])} | set(self.series))
            elif kind == "/api/v1/series/<id>":
                ids = [i for p in body.get("points", [])[-5:] for i in p.get("result_ids", [])]
                self.results = (self.results + ids)[-200:]


class Reader:
    """Threads GETting the page mix in a closed loop until stopped."""

    def __init__(self, url: str, tag: str, runners: int, threads: int, pause: float, seed: int) -> None:
        self.url, self.tag, self.runners, self.pause = url, tag, runners, pause
        self.found = Discovered()
        self.hits: list[PageHit] = []
        self.failures: list[str] = []  # the first few non-2xx answers, for the report
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, args=(random.Random(f"{seed}-{i}"),), daemon=True)
                        for i in range(threads)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=180)

    def _paths(self, rng: random.Random) -> list[tuple[str, str]]:
        found, repo = self.found, f"soak-{self.tag}"
        with found.lock:
            shas, series, results = list(found.shas), list(found.series), list(found.results)
        paths = [("/", "/"), ("/commits", "/commits"), ("/api/v1/commits", "/api/v1/commits?limit=50"),
                 ("/api/v1/findings", "/api/v1/findings?limit=50")]
        if len(series) < 10:
            uid = run_uid(self.tag, rng.randrange(self.runners), 0)
            paths.append(("/api/v1/runs/<uid>/results", f"/api/v1/runs/{uid}/results"))
        if shas:
            paths.append(("/commits/<sha>", f"/commits/{rng.choice(shas)}"))
        if len(shas) >= 2:
            i = rng.randrange(len(shas) - 1)
            paths.append(("/api/v1/compare", f"/api/v1/compare?base={shas[i]}&head={shas[i + 1]}&repo={repo}"))
        if series:
            sid = rng.choice(series)
            paths += [("/series/<id>", f"/series/{sid}"), ("/api/v1/series/<id>", f"/api/v1/series/{sid}")]
        if results:
            paths.append(("/results/<id>", f"/results/{rng.choice(results)}"))
        return paths

    def _loop(self, rng: random.Random) -> None:
        while not self.stop.is_set():
            kind, path = rng.choice(self._paths(rng))
            started = time.perf_counter()
            status, body = http_get(f"{self.url}{path}")
            self.hits.append(PageHit(kind, time.perf_counter() - started, status))
            if status == 200 and kind.startswith("/api/v1/"):
                try:
                    self.found.take(kind, json.loads(body))
                except ValueError:
                    pass
            elif status != 200 and not (status == 404 and kind == "/api/v1/runs/<uid>/results"):
                if len(self.failures) < 10:
                    self.failures.append(f"GET {path}: {status} {body[:300]!r}")
            if self.pause:
                self.stop.wait(self.pause)


def http_get(url: str, timeout: float = 120) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, exc.read()
        finally:
            exc.close()
    except (OSError, ValueError) as exc:
        return 0, str(exc).encode()


# --- memory and queues ------------------------------------------------------------------------------------------

def _parents() -> dict[int, int]:
    """pid -> parent pid of every process this user can see."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            out[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def process_tree_rss(roots: dict[str, int]) -> dict[str, float]:
    """'web master', 'web child <pid>', ... -> RSS in MB, for each root and every descendant of it."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[str, float] = {}
    for name, root in roots.items():
        todo, first = [root], True
        while todo:
            pid = todo.pop()
            rss = rss_mb(pid)
            if rss is not None:
                out[f"{name} main" if first else f"{name} child {pid}"] = rss
            first = False
            todo.extend(sorted(children.get(pid, [])))
    return out


def queue_depth(client: redis.Redis) -> dict[str, int]:
    """Messages waiting per Celery queue (its priority lists included) and unacknowledged ones."""
    depth = dict.fromkeys(QUEUES, 0)
    for raw in client.scan_iter(count=1000):
        key = raw.decode(errors="replace")
        for queue in QUEUES:
            if key == queue or key.startswith(queue + "\x06\x16"):
                depth[queue] += int(client.llen(raw))
    depth["unacked"] = int(client.hlen("unacked"))
    return depth


def redis_used_mb(client: redis.Redis) -> float:
    info: dict[str, Any] = client.info("memory")
    return float(info["used_memory"]) / 2**20
