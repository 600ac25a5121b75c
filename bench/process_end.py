"""What a benchmark process costs after its last kernel: from the runner's exit request to the process gone.

The runner waits for every benchmark process to end before the next run, round or bisection step starts
(runners/session.py ``BenchmarkProcess.close``). runners/child.py ends with ``os._exit`` once asked to (its
``exit_now``): a process that imported jax otherwise spends its interpreter's finalization tearing down XLA's
backends and the profiler. This measures both in the same run, on the real child and protocol: the child as the
runner starts it (own), and the peer, the same child module entered so that ``main``'s return goes through
``sys.exit`` and the interpreter's finalization (``python -c "import sys, runners.child as c; sys.exit(c.main())"``,
every argument the same). Each process announces the suite, times one benchmark (capture off), and is asked to
exit; the figure is the time from the request to ``wait()`` returning, the median over fresh processes, the two
alternated so that the host's drift lands on both.

    python bench/process_end.py                # about 20 s
    python bench/process_end.py --processes 9 --suite 'matmul/*'
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runners.sandbox import limits_from_env  # noqa: E402  (after the path set-up: the bench runs as a script)
from runners.session import ChildConfig, child_command  # noqa: E402

PEER_ENTRY = "import sys, runners.child as c; sys.exit(c.main())"


def _message(proc: subprocess.Popen[bytes]) -> dict[str, object]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"the benchmark process ended early (exit {proc.wait()})")
    found: dict[str, object] = json.loads(line)
    return found


def end_once(suite: str, peer: bool) -> float:
    """Seconds from the exit request to the process gone, after one benchmark of ``suite`` was timed."""
    config = ChildConfig(root=ROOT, suite=suite)
    cmd = child_command(config, limits_from_env(os.environ), False, os.environ)
    if peer:
        at = cmd.index("-m")
        cmd[at:at + 2] = ["-c", PEER_ENTRY]
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    try:
        ready = _message(proc)["ready"]
        assert isinstance(ready, dict)
        key = ready["benchmarks"][0]["key"]
        proc.stdin.write((json.dumps({"run": key, "samples": 3, "warmup": 1}) + "\n").encode())
        proc.stdin.flush()
        while "measurements" not in _message(proc):
            pass
        start = time.perf_counter()
        proc.stdin.write(b'{"exit": true}\n')
        proc.stdin.close()
        code = proc.wait(timeout=60)
        ended = time.perf_counter() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if code != 0:
        raise SystemExit(f"the benchmark process exited {code}")
    return ended


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--processes", type=int, default=7, help="fresh processes per side")
    parser.add_argument("--suite", default="softmax/softmax_rows", help="the benchmarks the processes announce")
    args = parser.parse_args(argv)
    end_once(args.suite, peer=False)  # the first process of all warms the page cache for both
    own: list[float] = []
    peer: list[float] = []
    for _ in range(args.processes):
        own.append(end_once(args.suite, peer=False))
        peer.append(end_once(args.suite, peer=True))
    print(f"{'benchmark process end':<44} {'median':>8} {'range':>17}   ({args.processes} fresh processes each, "
          "alternated)")
    for label, ends in (("own (os._exit once asked: runners/child.py)", own),
                        ("peer (the interpreter's finalization)", peer)):
        print(f"{label:<44} {statistics.median(ends):>6.3f} s {min(ends):>7.3f}-{max(ends):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
