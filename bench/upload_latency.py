"""Issue 18, item 7: how long the embedded server makes a runner wait for an upload, against the synchronous form.

Before, `kernelwatch serve` without Redis ran an upload's follow-up work (detection of every series, the stored
comparison with the commit before, the parse sweep's share) inside the request: a maximum-size run (10,000 results
x 60 samples) was answered after 195 s, stored after about 5, against a runner's upload timeout of 60 s. Now the
answer comes when the run is stored and the follow-up runs on the server's background thread.

Measured here, in one run, on the same generated history and the same new run:

- **serve**: `kernelwatch serve` (embedded SQLite) in its own process: `--history` runs are posted and their
  follow-up waited out, then the new run is posted; `answered` is the POST's wall time, `follow-up done` the time
  until GET /api/v1/health says nothing is pending.
- **peer (synchronous)**: the same history and run through the in-process context the CLI uses
  (`Context.submit`: store, then the follow-up, before it returns), which is what the server did in the request
  before: its wall time is what a runner waited then.

    python bench/upload_latency.py [--results 2000] [--samples 60] [--history 2]
    python bench/upload_latency.py --results 10000       # the issue's maximum-size run (several minutes)

Exit status 1 when the server's answer is not well before its follow-up is done (answered > half the time to
follow-up done), which is what the issue asks.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def history(count: int, results: int, samples: int, seed: int) -> list[dict[str, Any]]:
    """``count`` + 1 manifests of one repository, each with ``results`` benchmarks of ``samples`` samples; the last
    run is 30 % slower on a tenth of its benchmarks (so detection has findings to make)."""
    import numpy as np

    from tests import builders

    rng = np.random.default_rng(seed)
    out = []
    for position in range(count + 1):
        rows = []
        for i in range(results):
            level = 1e-3 * (1 + i % 7) * (1.3 if position == count and i % 10 == 0 else 1.0)
            values = [float(v) for v in level * (1 + 0.01 * rng.standard_normal(samples))]
            rows.append(builders.result(name=f"bench_{i:05d}", samples=values))
        out.append(builders.manifest(position, rows, repo="upload-latency"))
    return out


def post(url: str, token: str, manifest: dict[str, Any]) -> float:
    body = json.dumps(manifest).encode()
    request = urllib.request.Request(f"{url}/api/v1/runs", data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=1800) as response:
        assert response.status in (200, 201), response.status
    return time.perf_counter() - started


def wait_for_follow_up(url: str, timeout_s: float = 3600) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        with urllib.request.urlopen(f"{url}/api/v1/health", timeout=60) as response:
            follow_up = json.load(response).get("follow_up")
        if follow_up is None:
            raise SystemExit("the server reports no follow_up: not the embedded background queue")
        if not follow_up["pending"]:
            if follow_up["failed"]:
                raise SystemExit(f"follow-up failed on the server: {follow_up['last_error']}")
            return time.perf_counter() - started
        time.sleep(0.2)
    raise SystemExit(f"follow-up not done after {timeout_s:.0f} s")


def measure_serve(manifests: list[dict[str, Any]], root: Path) -> tuple[float, float]:
    from service.pipeline.tokens import create_token
    from service.settings import load_settings
    from service.store.db import make_engine, make_session_factory, unit_of_work, upgrade
    from tests.processes import clean_env, start_web

    home = root / "serve"
    database_url = f"sqlite:///{home / 'kernelwatch.db'}"
    home.mkdir()
    upgrade(database_url)
    engine = make_engine(load_settings({"KERNELWATCH_HOME": str(home),
                                        "KERNELWATCH_DATABASE_URL": database_url}).effective_database_url)
    with unit_of_work(make_session_factory(engine)) as session:
        token = create_token(session, "bench", ["submit"])[1]
    engine.dispose()
    env = clean_env(home, KERNELWATCH_DATABASE_URL=database_url, KERNELWATCH_FOLLOW_UP="none")
    with start_web(env, root, name="serve", timeout=120) as web:
        for manifest in manifests[:-1]:
            post(web.url, token, manifest)
            wait_for_follow_up(web.url)
        answered = post(web.url, token, manifests[-1])
        follow_up = wait_for_follow_up(web.url)
    return answered, answered + follow_up


def measure_synchronous(manifests: list[dict[str, Any]], root: Path) -> float:
    import dataclasses

    from service.context import Context
    from service.settings import load_settings
    from service.store.db import upgrade

    home = root / "sync"
    home.mkdir()
    database_url = f"sqlite:///{home / 'kernelwatch.db'}"
    upgrade(database_url)
    settings = load_settings({"KERNELWATCH_HOME": str(home), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(dataclasses.replace(settings, follow_up=()))
    try:
        for manifest in manifests[:-1]:
            ctx.submit(manifest)
        started = time.perf_counter()
        ctx.submit(manifests[-1])
        return time.perf_counter() - started
    finally:
        ctx.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--history", type=int, default=2, help="runs stored before the measured one")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    manifests = history(args.history, args.results, args.samples, args.seed)
    size = len(json.dumps(manifests[-1]).encode())
    with tempfile.TemporaryDirectory(prefix="kw-upload-latency-") as tmp:
        root = Path(tmp)
        answered, done = measure_serve(manifests, root)
        synchronous = measure_synchronous(manifests, root)
    print(f"a run of {args.results} results x {args.samples} samples ({size / 1e6:.1f} MB) after {args.history} "
          "stored runs, embedded SQLite, 2 shared cores")
    print(f"{'':<34}{'seconds':>10}")
    print(f"{'serve: upload answered':<34}{answered:>10.1f}")
    print(f"{'serve: follow-up done':<34}{done:>10.1f}")
    print(f"{'peer: synchronous store+follow-up':<34}{synchronous:>10.1f}   (what serve answered after before)")
    ok = answered <= 0.5 * done
    print(f"target: the answer comes when the run is stored, before its follow-up: "
          f"{'met' if ok else 'MISSED'} ({answered:.1f} s of {done:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
