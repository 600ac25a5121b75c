"""A runner killed with SIGKILL left its benchmark process running at full CPU (reparented) until its benchmark
ended, so the runner's restart measured its next runs on a host that process kept busy. The benchmark process
(`python -m runners.child`) now ends with the process that started it (runners/sandbox.py end_with_parent, Linux's
parent-death signal): a real one, busy in a benchmark when its parent is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SPIN = '''from runners.suite import Case, benchmark


@benchmark(suite="spin", params=[{"n": 1}])
def forever(n: int) -> Case:
    while True:  # the case is built in the benchmark process, busy as a long benchmark is
        pass
'''

# The "runner": starts the benchmark process, asks it for the benchmark, prints its pid, and waits on it.
PARENT = """
import json, subprocess, sys
child = subprocess.Popen([sys.executable, "-m", "runners.child", "--root", ROOT], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
ready = json.loads(child.stdout.readline())
[bench] = ready["ready"]["benchmarks"]
child.stdin.write(json.dumps({"run": bench["key"], "samples": 1, "warmup": 0}) + "\\n")
child.stdin.flush()
child.stdout.readline()  # started
print(child.pid, flush=True)
child.wait()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:  # a zombie awaiting its reaper has ended all the same
            return stat.read().rsplit(") ", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_benchmark_process_ends_with_its_killed_runner(tmp_path: Path) -> None:
    suite = tmp_path / "checkout" / "kernels_under_test"
    suite.mkdir(parents=True)
    (suite / "__init__.py").write_text("")
    (suite / "spin.py").write_text(SPIN)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "JAX_PLATFORMS": "cpu"}
    parent = subprocess.Popen([sys.executable, "-c", f"ROOT = {str(tmp_path / 'checkout')!r}\n" + PARENT],
                              stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=env)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        time.sleep(0.5)
        assert _alive(child)  # busy in its benchmark: no read of the pipe would see the parent go
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the benchmark process outlived its killed parent"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
