"""What a process pays to start when its environment holds no bytecode.

uv installs packages without compiling them to bytecode unless told to (``--compile-bytecode``; pip compiles by
default), and where PYTHONDONTWRITEBYTECODE is set (this project's CI host sets it, and every benchmark process
sets it so that it writes nothing into the checkout it measures) no process writes any later either: each one
compiles every module it imports from source, every time. The Makefile and runners/envs.py now compile at
install. This measures what that buys, in the same run: fresh processes of this environment's interpreter with
its bytecode (own), against the same processes with the bytecode of the environment's site-packages hidden
(importlib looks for it where there is none; the standard library keeps its own), which is what an environment
installed without it gives (peer). Both sides run with PYTHONDONTWRITEBYTECODE=1, alternated, median over the
processes of each.

Two starts are timed: jax up to its first executed operation on the CPU (what every benchmark process pays before
its first kernel) and the import of the `kernelwatch` command line (what every command pays).

    python bench/bytecode.py [--processes 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.child_run import run_or_exit  # noqa: E402  (after the path set-up: the bench runs as a script)

STARTS = {
    "jax ready": "import jax, jax.numpy as jnp; jax.devices(); jnp.ones(3).block_until_ready()",
    "kernelwatch CLI import": "import service.cli",
}


# Run first in a peer's child: importlib's bytecode path for a module of site-packages points where nothing is, so
# the module is compiled from source, as in an environment installed without bytecode.
HIDE_SITE_BYTECODE = """
import importlib._bootstrap_external as loader, sysconfig
_site, _cached = sysconfig.get_paths()["purelib"], loader.cache_from_source
def _hidden(path, debug_override=None, *, optimization=None):
    found = _cached(path, debug_override, optimization=optimization)
    return found.replace("__pycache__", "__no_bytecode__") if path.startswith(_site) else found
loader.cache_from_source = _hidden
"""


def start_once(code: str, hide: bool) -> float:
    """Seconds for a fresh interpreter to run ``code`` and exit (``hide``: without site-packages' bytecode); a
    failure ends the bench with its stderr."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(ROOT))
    env.pop("PYTHONPYCACHEPREFIX", None)
    started = time.perf_counter()
    run_or_exit([sys.executable, "-c", (HIDE_SITE_BYTECODE if hide else "") + code], "the child", env=env,
                timeout=120)
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--processes", type=int, default=7, help="fresh processes per side and start")
    args = parser.parse_args(argv)
    print(f"{'start':<24} {'own (bytecode)':>15} {'peer (none)':>12} {'peer / own':>11}   (median of "
          f"{args.processes} fresh processes each, alternated)")
    for label, code in STARTS.items():
        start_once(code, False)  # the first of all warms the page cache for both sides
        own, peer = [], []
        for _ in range(args.processes):
            own.append(start_once(code, False))
            peer.append(start_once(code, True))
        mine, theirs = statistics.median(own), statistics.median(peer)
        print(f"{label:<24} {mine:>13.3f} s {theirs:>10.3f} s {theirs / mine:>10.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
