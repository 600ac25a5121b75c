"""The parent's side of a benchmark process: start it, ask it to run one benchmark at a time, and survive it.

Every benchmark runs under a deadline. A benchmark that raises comes back as a failed measurement from the
child itself; one that crashes the process, is killed (out of memory) or overruns its deadline is recorded
here as failed with what is known (exit status, the end of stderr), and the process is replaced before the
next benchmark, so the rest of the suite still runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runners.capture import LLO_SUBDIR
from runners.harness import Measurement


class ProcessFailed(Exception):
    """The benchmark process died or overran; the message says how."""


@dataclass(frozen=True)
class Announced:
    """A benchmark instance as the child announced it: enough to record it as failed without the child."""

    key: str
    suite: str
    name: str
    params: dict[str, Any]
    unit: str
    direction: str
    devices: int
    timeout_s: float

    def failed(self, message: str) -> dict[str, Any]:
        """The failed measurement the child would have sent, had it lived to send it."""
        return dataclasses.asdict(Measurement(key=self.key, suite=self.suite, name=self.name, params=self.params,
                                              unit=self.unit, direction=self.direction, status="failed",
                                              samples=[], message=message[:5000]))


@dataclass
class ChildConfig:
    root: Path
    suite: str = "*"
    params: str = ""
    quick: bool = False
    dirty: bool = False
    capture_dir: Path | None = None  # an artifact store; None: capture nothing
    extra_env: dict[str, str] = field(default_factory=dict)
    start_timeout_s: float = 180.0


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = " (out of memory?)" if -returncode == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"exited with status {returncode}"


class BenchmarkProcess:
    """One live child process serving benchmark requests over JSON lines."""

    def __init__(self, config: ChildConfig) -> None:
        self.config = config
        cmd = [sys.executable, "-m", "runners.child", "--root", str(config.root), "--suite", config.suite]
        if config.params:
            cmd += ["--params", config.params]
        if config.quick:
            cmd.append("--quick")
        if config.dirty:
            cmd.append("--dirty")
        env = dict(os.environ)
        env.update(config.extra_env)
        self._dump_dir: tempfile.TemporaryDirectory[str] | None = None
        if config.capture_dir is not None:
            cmd += ["--capture-dir", str(config.capture_dir)]
            # XLA writes its dumps per process; the child files each benchmark's share into the store.
            self._dump_dir = tempfile.TemporaryDirectory(prefix="kw-xla-dump-")
            env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""), f"--xla_dump_to={self._dump_dir.name}",
                                         "--xla_dump_hlo_as_text"]).strip()
            # On a TPU host libtpu writes the final LLO bundles to a directory of its own (ignored elsewhere).
            env["LIBTPU_INIT_ARGS"] = " ".join([
                env.get("LIBTPU_INIT_ARGS", ""), f"--xla_jf_dump_to={self._dump_dir.name}/{LLO_SUBDIR}",
                "--xla_jf_dump_hlo_text=true", "--xla_jf_dump_llo_text=true"]).strip()
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # never write into the checkout being measured
        env["PYTHONUNBUFFERED"] = "1"
        # stderr to a file, never a pipe nobody reads: a chatty kernel must not block on a full pipe.
        self._stderr = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen(cmd, cwd=config.root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, start_new_session=True)
        self._buffer = b""
        ready = self._receive(time.monotonic() + config.start_timeout_s, "starting the suite")
        if "ready" not in ready:
            raise ProcessFailed(f"unexpected first message from the benchmark process: {ready}")
        self.environment: dict[str, Any] = ready["ready"]["environment"]
        self.benchmarks = [Announced(key=b["key"], suite=b["suite"], name=b["name"], params=b["params"],
                                     unit=b["unit"], direction=b["direction"], devices=int(b["devices"]),
                                     timeout_s=float(b["timeout_s"])) for b in ready["ready"]["benchmarks"]]

    def stderr_tail(self, limit: int = 2000) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-limit:].strip()

    def _receive(self, deadline: float, doing: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise ProcessFailed(f"exceeded its time limit while {doing}")
                if not selector.select(timeout=min(remaining, 1.0)):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    self.proc.wait()
                    tail = self.stderr_tail()
                    raise ProcessFailed(f"the benchmark process {describe_exit(self.proc.returncode)} while "
                                        f"{doing}" + (f": {tail}" if tail else ""))
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def run(self, key: str, samples: int, warmup: int, timeout_s: float) -> list[dict[str, Any]]:
        """Measurements of one benchmark; raises ProcessFailed when the process dies or overruns."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps({"run": key, "samples": samples, "warmup": warmup}) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.proc.wait()
            raise ProcessFailed(f"the benchmark process {describe_exit(self.proc.returncode)}") from None
        deadline = time.monotonic() + timeout_s
        started = self._receive(deadline, f"running {key}")
        if started.get("started") != key:
            raise ProcessFailed(f"unexpected message from the benchmark process: {started}")
        reply = self._receive(deadline, f"running {key} (limit {timeout_s:g} s)")
        if "error" in reply:
            raise ProcessFailed(reply["error"])
        return list(reply["measurements"])

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            # The whole process group: a kernel may have started helpers of its own.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write(b'{"exit": true}\n')
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self._stderr.close()
        if self._dump_dir is not None:
            self._dump_dir.cleanup()
