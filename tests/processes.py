"""The service's processes, started for real by the tests: `kernelwatch serve` (or gunicorn, as docker-compose's
`web` runs), Celery workers and one-shot `kernelwatch` commands.

Each long-running process gets a session (process group) of its own, so that stopping or SIGKILLing it takes its
children too (a prefork pool, a runner's benchmark process), and writes its log to a file: a pipe nobody reads
fills up after a few hundred lines and stalls the process, and a file can still be read after a failure.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.private_servers import free_port

# Celery's worker prints "<nodename> ready." once it consumes its queues (at --loglevel INFO, which
# `kernelwatch worker` sets).
_WORKER_READY = re.compile(r"@\S+ ready\.")


# Settings of this test run rather than of one service (tests/conftest.py, the Makefile): whether a runner calibrates
# its host (off, but where a test turns it on: the demo's and the quick suite's results are held under their roofs),
# where a calibration is kept and how long it waits for a quiet host. Every process a test starts keeps them; without
# them each Celery worker and command a test started calibrated its host (a minute of both cores, beside the other
# tests), into the developer's own ~/.cache for some, after waiting 20 s for a quiet spell the parallel tests never
# give.
RUN_SETTINGS = ("KERNELWATCH_CALIBRATE", "KERNELWATCH_CALIBRATION_CACHE", "KERNELWATCH_CALIBRATION_QUIET_S")


def clean_env(home: Path, **settings: str) -> dict[str, str]:
    """This process's environment without any KERNELWATCH_ variable of the caller's shell but ``RUN_SETTINGS``,
    plus its own ``KERNELWATCH_HOME`` and ``settings``: each process a test starts sees exactly the configuration
    its test gives it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWATCH_") or k in RUN_SETTINGS}
    env["KERNELWATCH_HOME"] = str(home)
    env.update(settings)
    return env


def kernelwatch(*args: str, env: Mapping[str, str], timeout: float = 240) -> str:
    """Run one `kernelwatch` command to completion; its standard output, or an AssertionError with its stderr."""
    done = subprocess.run([sys.executable, "-m", "service.cli", *args], env=dict(env), capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"kernelwatch {' '.join(args)} exited {done.returncode}: {done.stderr[-3000:]}"
    return done.stdout


class ServiceProcess:
    """One long-running process and its log file. A context manager: leaving the block stops it, and leaving
    on an exception prints the end of its log first (pytest shows it with the failure)."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_dir: Path) -> None:
        self.name = name
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log = log_dir / f"{name}.log"
        with self.log.open("w") as out:  # the child holds its own descriptor; ours can go at once
            self.proc = subprocess.Popen(list(argv), env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        """Everything it has logged so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, chars: int = 4000) -> str:
        return self.output()[-chars:]

    def report(self, chars: int = 4000) -> str:
        state = "running" if self.alive() else f"exited {self.proc.returncode}"
        return f"--- {self.name} ({state}), end of {self.log} ---\n{self.tail(chars)}"

    def kill(self) -> None:
        """SIGKILL to the whole group, without warning: the host goes away, a task dies with its worker."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM to the group (Celery's warm shutdown), SIGKILL if it has not exited after ``timeout``."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc.wait()

    def wait_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``condition``; fail with this process's log if it exits first or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while not condition():
            if not self.alive():
                raise AssertionError(f"{self.name} exited while waiting for {what}\n{self.report()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{self.report()}")
            time.sleep(0.2)

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is not None:
            print(self.report(6000))
        self.stop()


@dataclass(frozen=True)
class Web:
    url: str  # the service's root, e.g. http://127.0.0.1:43121 (the API is under /api/v1)
    process: ServiceProcess


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def start_web(env: Mapping[str, str], log_dir: Path, *, gunicorn: bool = False, name: str = "web",
              timeout: float = 60) -> Iterator[Web]:
    """The web process on a free port of 127.0.0.1, yielded once /api/v1/health answers 200 (so the database is
    reachable and migrated); stopped on leaving. ``gunicorn``: the server and entry point docker-compose's `web`
    runs (`service.wsgi:app`) instead of `kernelwatch serve`'s threaded werkzeug server."""
    port = free_port()
    if gunicorn:
        # One worker: a second would only compete with the test for this machine's few cores. A longer timeout
        # than gunicorn's 30 s: on a loaded machine a large artifact upload must not get its worker killed.
        argv = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                "--timeout", "120", "service.wsgi:app"]
    else:
        argv = [sys.executable, "-m", "service.cli", "serve", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    with ServiceProcess(name, argv, env, log_dir) as process:
        process.wait_until(lambda: _answers(f"{url}/api/v1/health"), timeout, f"{name} to answer on {url}")
        yield Web(url, process)


def start_kernelwatch(env: Mapping[str, str], log_dir: Path, *args: str, name: str) -> ServiceProcess:
    """`kernelwatch ARGS...` as a long-running process of its own (`beat`, say); the caller stops it."""
    return ServiceProcess(name, [sys.executable, "-m", "service.cli", *args], env, log_dir)


def start_worker(env: Mapping[str, str], log_dir: Path, queues: str = "ingest,detect,notify", *,
                 name: str = "worker", hostname: str | None = None, extra: Sequence[str] = (),
                 wait_ready: bool = True, timeout: float = 60) -> ServiceProcess:
    """`kernelwatch worker --queues QUEUES` as its own process; with ``wait_ready``, returned once Celery says it
    consumes them (so a task sent now is taken at once, not after the worker's start-up). The caller stops it
    (``with start_worker(...)``, or ``stop()``/``kill()`` from a fixture)."""
    process = start_kernelwatch(env, log_dir, "worker", "--queues", queues, "--hostname", hostname or f"{name}@%h",
                                *extra, name=name)
    if wait_ready:
        try:
            process.wait_until(lambda: bool(_WORKER_READY.search(process.output())), timeout,
                               f"{name} to be ready")
        except BaseException:
            process.stop()
            raise
    return process
