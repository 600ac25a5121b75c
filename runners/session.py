"""The parent's side of a benchmark process: start it, ask it to run one benchmark at a time, and survive it.

Every benchmark runs under a deadline. A benchmark that raises comes back as a failed measurement from the
child itself; one that crashes the process, is killed (out of memory) or overruns its deadline is recorded
here as failed with what is known (exit status, the end of stderr), and the process is replaced before the
next benchmark, so the rest of the suite still runs.

The process is sandboxed (runners/sandbox.py): an allow-listed environment, a working directory, HOME and
TMPDIR of its own (removed when it closes), and rlimits on memory, CPU time per benchmark and open files.
"""

from __future__ import annotations

import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import runners
from runners import calibration_cache
from runners.calibrate import calibration_passes, quiet_budget
from runners.capture import LLO_SUBDIR
from runners.harness import Measurement
from runners.harness_copy import harness_root
from runners.pinning import format_cpu_list
from runners.sandbox import CPU_LIMIT_SETTING, Limits, child_environment, limits_from_env


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
    module: str = ""  # the suite module that declares it (runners.suite.module_of)
    version: str | None = None  # of its code (runners.suite.benchmark_version): a failure files with its series

    def failed(self, message: str) -> dict[str, Any]:
        """The failed measurement the child would have sent, had it lived to send it."""
        return dataclasses.asdict(Measurement(key=self.key, suite=self.suite, name=self.name, params=self.params,
                                              unit=self.unit, direction=self.direction, status="failed",
                                              samples=[], message=message[:5000], benchmark_version=self.version))


@dataclass
class ChildConfig:
    root: Path
    suite: str = "*"
    suite_dir: Path | None = None  # the benchmarks kept apart from the checkout; None: root/kernels_under_test
    params: str = ""
    quick: bool = False
    dirty: bool = False
    capture_dir: Path | None = None  # an artifact store; None: capture nothing
    extra_env: dict[str, str] = field(default_factory=dict)
    start_timeout_s: float = 180.0
    limits: Limits | None = None  # None: from this process's environment (runners/sandbox.py's settings)
    cpu_affinity: tuple[int, ...] | None = None  # CPUs the child pins itself to before importing JAX
    # The interpreter of an environment of the measured commit's own (runners/envs.py), and where the harness is
    # copied for it (runners/harness_copy.py); None: this very interpreter, importing this very harness.
    python: Path | None = None
    harness_dir: Path | None = None


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = {signal.SIGKILL: " (out of memory?)",
                signal.SIGXCPU: f": CPU-time limit exceeded ({CPU_LIMIT_SETTING})",
                signal.SIGXFSZ: ": file-size limit exceeded"}.get(signal.Signals(-returncode), "")
        return f"killed by {name}{hint}"
    return f"exited with status {returncode}"


def child_command(config: ChildConfig, limits: Limits, calibrate_only: bool,
                  environ: Mapping[str, str]) -> list[str]:
    """The benchmark process's command line (``environ``: the runner's, for its settings the sandbox does not
    pass on)."""
    # -P: the working directory is not on the child's path; the checkout goes last (runners/child.py). Another
    # interpreter gets no -P (it may predate it): its working directory is the empty sandbox anyway.
    python = [sys.executable, "-P"] if config.python is None else [str(config.python)]
    cmd = [*python, "-m", "runners.child", "--root", str(config.root.resolve()),
           "--suite", config.suite, *limits.as_args(),
           "--start-cpu-s", str(limits.cpu_budget(config.start_timeout_s))]
    if config.suite_dir is not None:
        cmd += ["--suite-dir", str(config.suite_dir.resolve())]
    if config.params:
        cmd += ["--params", config.params]
    if config.quick:
        cmd.append("--quick")
    if calibrate_only:
        # The wait for a quiet host is the runner's setting; the sandbox passes no KERNELWATCH_ variable on.
        cmd += ["--calibrate-only", "--quiet-budget", repr(quiet_budget(environ)),
                "--passes", str(calibration_passes(environ))]
    if config.dirty:
        cmd.append("--dirty")
    if config.cpu_affinity:
        # Pinned by the child itself, not a preexec_fn here: see runners/child.py on why nothing runs
        # between fork and exec.
        cmd += ["--cpu-affinity", format_cpu_list(config.cpu_affinity)]
    return cmd


class BenchmarkProcess:
    """One live child process serving benchmark requests over JSON lines."""

    def __init__(self, config: ChildConfig, calibrate_only: bool = False) -> None:
        self.config = config
        self.limits = config.limits if config.limits is not None else limits_from_env(os.environ)
        cmd = child_command(config, self.limits, calibrate_only, os.environ)
        # A directory of its own: the working directory, HOME and TMPDIR, never the checkout or the runner's.
        self._sandbox = tempfile.TemporaryDirectory(prefix="kw-bench-", ignore_cleanup_errors=True)
        home, tmp = Path(self._sandbox.name, "home"), Path(self._sandbox.name, "tmp")
        home.mkdir()
        tmp.mkdir()
        env = child_environment(os.environ, {
            "HOME": str(home), "TMPDIR": str(tmp), **_import_path(config), **config.extra_env,
            "PYTHONDONTWRITEBYTECODE": "1",  # never write into the checkout being measured
            "PYTHONUNBUFFERED": "1"})
        self._dump_dir: tempfile.TemporaryDirectory[str] | None = None
        if config.capture_dir is not None:
            cmd += ["--capture-dir", str(config.capture_dir)]
            # XLA writes its dumps per process; the child files each benchmark's share into the store.
            self._dump_dir = tempfile.TemporaryDirectory(prefix="kw-xla-dump-")
            # XLA:GPU writes a module's PTX only where the emitter filter names it (jax 0.11's plugin: an H200
            # dump held HLO and no .ptx without it); the CPU and TPU backends have no emitter of that name.
            env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""), f"--xla_dump_to={self._dump_dir.name}",
                                         "--xla_dump_hlo_as_text", "--xla_dump_emitter_re=ptx"]).strip()
            # On a TPU host libtpu writes the final LLO bundles to a directory of its own (ignored elsewhere).
            env["LIBTPU_INIT_ARGS"] = " ".join([
                env.get("LIBTPU_INIT_ARGS", ""), f"--xla_jf_dump_to={self._dump_dir.name}/{LLO_SUBDIR}",
                "--xla_jf_dump_hlo_text=true", "--xla_jf_dump_llo_text=true"]).strip()
        # stderr to a file, never a pipe nobody reads: a chatty kernel must not block on a full pipe.
        self._stderr = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen(cmd, cwd=self._sandbox.name, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, start_new_session=True)
        self._buffer = b""
        first = "calibrated" if calibrate_only else "ready"
        try:
            ready = self._receive(time.monotonic() + config.start_timeout_s,
                                  "calibrating" if calibrate_only else "starting the suite")
            if first not in ready:
                raise ProcessFailed(f"unexpected first message from the benchmark process: {ready}")
        except BaseException:
            self.close()  # nobody else will: the caller never gets this object
            raise
        if calibrate_only:
            self.calibrated: dict[str, Any] = ready["calibrated"]
            self.environment: dict[str, Any] = {}
            self.benchmarks: list[Announced] = []
            self.declared: list[str] = []
            self.unimportable: dict[str, str] = {}
            self.modules: list[str] = []
            self.suite_missing: str | None = None
            return
        self.environment = ready["ready"]["environment"]
        key = self.environment.pop("calibration_key", None)
        if key is not None:
            try:
                calibration = self._kept_calibration(str(key))
            except ProcessFailed as exc:
                # No roofs is what a failed calibration costs: the suite still runs, its results without figures.
                print(f"kernelwatch: the host's calibration failed, so this run's results get no roofline "
                      f"figures: {exc}", file=sys.stderr)
                calibration = None
            except BaseException:
                self.close()
                raise
            if calibration is not None:
                self.environment["calibration"] = calibration
        self.benchmarks = [Announced(key=b["key"], suite=b["suite"], name=b["name"], params=b["params"],
                                     unit=b["unit"], direction=b["direction"], devices=int(b["devices"]),
                                     timeout_s=float(b["timeout_s"]), module=str(b.get("module", "")),
                                     version=str(b["version"]) if b.get("version") else None)
                           for b in ready["ready"]["benchmarks"]]
        # suite/name of every benchmark the suite declares, sent only where the selection holds none of them
        self.declared = [str(name) for name in ready["ready"].get("declared", [])]
        # suite modules whose import raised in this checkout: module name -> the error, one line
        self.unimportable = {str(k): str(v) for k, v in (ready["ready"].get("unimportable") or {}).items()}
        self.modules = [str(m) for m in ready["ready"].get("modules") or ()]  # the suite modules that imported
        missing = ready["ready"].get("suite_missing")
        self.suite_missing = str(missing) if missing else None  # why this checkout has no suite at all

    def _kept_calibration(self, key: str) -> dict[str, Any]:
        """The host's calibration for this process's environment: the kept one, else measured now in a process
        of its own (no repository code imported: runners/calibrate.py) and kept when its key is this one's. A
        kept one measured while the host was busy is measured again and the faster figures kept
        (runners/calibration_cache.py says why)."""
        path = calibration_cache.cache_path(os.environ)
        kept = calibration_cache.load(path).get(key)
        if calibration_cache.needs_measuring(kept):
            helper = BenchmarkProcess(self.config, calibrate_only=True)
            helper.close()
            measured = helper.calibrated
            figures = measured.get("figures") if isinstance(measured, dict) else None
            if not isinstance(figures, dict) or not calibration_cache.well_formed(figures):
                raise ProcessFailed(f"the calibration process sent no calibration: {str(measured)[:300]}")
            busy = measured.get("busy") is True
            remeasures = 0
            if kept is not None:  # provisional: measured again
                figures = calibration_cache.faster(kept, figures)
                remeasures = int(kept.get(calibration_cache.REMEASURES, 0)) + 1
            # Another key: the suite's import changed what the key covers (its XLA flags); used, not kept.
            if measured.get("key") == key:
                try:
                    calibration_cache.store(path, key, figures, provisional=busy, remeasures=remeasures)
                except OSError as exc:
                    # A cache that cannot be written (a read-only home, a full disk) costs the next run a new
                    # measurement, not this run its roofs.
                    print(f"kernelwatch: could not keep the host's calibration in {path} ({exc}); the next run "
                          f"measures it again (set {calibration_cache.CACHE_SETTING} to a writable file)",
                          file=sys.stderr)
            kept = figures
        assert kept is not None
        return calibration_cache.figures_of(kept)

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
            self.proc.stdin.write((json.dumps({"run": key, "samples": samples, "warmup": warmup,
                                               "cpu_s": self.limits.cpu_budget(timeout_s)}) + "\n").encode())
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
        self._sandbox.cleanup()


def _import_path(config: ChildConfig) -> dict[str, str]:
    """PYTHONPATH for the child to import this very ``runners`` (not a copy in the checkout under test): the
    directory above it, unless that is the interpreter's own site-packages, which the child has anyway (and
    which on PYTHONPATH would come before the standard library). Another interpreter gets a copy of the harness
    of its own (runners/harness_copy.py): KernelWatch's import root would bring KernelWatch's JAX with it."""
    if config.python is not None:
        if config.harness_dir is None:
            raise ValueError("a benchmark process in another interpreter needs a directory for the harness")
        return {"PYTHONPATH": str(harness_root(config.harness_dir))}
    above = Path(runners.__file__).resolve().parent.parent
    installed = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    return {} if above in installed else {"PYTHONPATH": str(above)}
