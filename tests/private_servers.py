"""Throwaway PostgreSQL and Redis servers of one test, for the tests that stop and restart them.

The machine's own servers (127.0.0.1:5432 and :6379) serve every other test and are never touched: these are
separate processes on free ports, in a temporary directory, gone when the test ends.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path is None:
        raise RuntimeError(f"no {name}: install PostgreSQL's server binaries (apt-get install postgresql)")
    return on_path


class PrivatePostgres:
    """A PostgreSQL cluster of its own (trust auth, one port); initdb refuses root, so as root it runs as the
    ``postgres`` system user."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "pgdata"
        self.port = free_port()
        self.as_user = os.geteuid() == 0
        root.mkdir(parents=True, exist_ok=True)
        if self.as_user:
            shutil.chown(root, "postgres", "postgres")
        self._run(_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        command = ["runuser", "-u", "postgres", "--", *argv] if self.as_user else list(argv)
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stdout[-1000:]} {done.stderr[-1000:]}")

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root} -c fsync=off"
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-o", options,
                  "-w", "-t", "30", "start")

    def stop(self) -> None:
        """A fast shutdown: open connections are cut, as they are when the database host restarts."""
        if (self.data / "postmaster.pid").exists():
            self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")

    def destroy(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A redis-server of its own; with ``appendonly`` every write reaches the log before it is answered, so a
    restart keeps what was queued."""

    def __init__(self, root: Path, appendonly: bool) -> None:
        self.root = root
        self.port = free_port()
        self.appendonly = appendonly
        root.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root),
                "--save", "", "--appendonly", "yes" if self.appendonly else "no"]
        if self.appendonly:
            argv += ["--appendfsync", "always"]
        self.proc = subprocess.Popen(argv, stdout=(self.root / "log").open("ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not _answers(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start: {(self.root / 'log').read_text()[-1000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGKILL: the host goes away; only what the append-only log holds survives."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        deadline = time.monotonic() + 10
        while _answers(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
