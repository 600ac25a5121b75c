"""What a benchmark process pays before its first kernel: importing jax and starting its CPU backend.

Every run is a fresh process (the run is the unit of replication), so this is paid once per run, per round, per
commit of a bisection, and by hundreds of processes in the test suite. pyproject.toml keeps ml_dtypes below 0.7
because 0.7.0's import took 0.65-0.85 s on this project's CI host where 0.6.0's took 0.1 s. This measures both in
the same run: the environment's own ml_dtypes, and the peer, ml_dtypes 0.7.0 laid over it (installed into a
scratch directory with pip, without dependencies, and put first on PYTHONPATH, so everything else is the same).
Each figure is the median over fresh processes, the two alternated so that the host's drift lands on both; the
children start the CPU backend only (JAX_PLATFORMS=cpu).

    python bench/process_start.py              # about 20 s, and one wheel download the first time
    python bench/process_start.py --peer 0.7.0 --processes 9
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.child_run import run_or_exit  # noqa: E402  (after the path set-up: the bench runs as a script)

# Run in each child: the import of ml_dtypes alone, then jax up to its first executed operation.
CHILD = """
import json, time
start = time.perf_counter()
import ml_dtypes
dtypes = time.perf_counter()
import jax, jax.numpy as jnp
jax.devices()
jnp.ones(3).block_until_ready()
ready = time.perf_counter()
print(json.dumps({"version": ml_dtypes.__version__, "ml_dtypes_s": dtypes - start, "jax_ready_s": ready - start}))
"""


def start_once(extra_path: Path | None) -> dict[str, float | str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = run_or_exit([sys.executable, "-c", CHILD], "the child", env=env, timeout=120)
    measured: dict[str, float | str] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def install_peer(version: str, into: Path) -> None:
    run_or_exit([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(into),
                 f"ml_dtypes=={version}"], f"pip install ml_dtypes=={version}", timeout=600)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--peer", default="0.7.0", help="the ml_dtypes version laid over the environment's")
    parser.add_argument("--processes", type=int, default=7, help="fresh processes per side")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kw-process-start-") as scratch:
        peer_dir = Path(scratch)
        install_peer(args.peer, peer_dir)
        own: list[dict[str, float | str]] = []
        peer: list[dict[str, float | str]] = []
        start_once(None)  # the first process of all warms the page cache for both
        for _ in range(args.processes):
            own.append(start_once(None))
            peer.append(start_once(peer_dir))
    print(f"{'environment':<28} {'ml_dtypes import':>17} {'jax ready':>10}   (median of {args.processes} fresh "
          f"processes each, alternated)")
    for label, runs in ((f"own (ml_dtypes {own[0]['version']})", own),
                        (f"peer (ml_dtypes {peer[0]['version']})", peer)):
        dtypes = statistics.median(float(r["ml_dtypes_s"]) for r in runs)
        ready = statistics.median(float(r["jax_ready_s"]) for r in runs)
        print(f"{label:<28} {dtypes:>15.3f} s {ready:>8.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
