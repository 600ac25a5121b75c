"""How a project is installed at a commit, where importing it from the checkout is not enough: the project file's
``build`` (say ``python setup.py build_ext --inplace``: compiled extensions built into the checkout, where the
benchmark process then imports them from, runners/project_imports.py). Run once a checkout, before its benchmarks.

The command is the repository's, so it runs as benchmark code does (runners/sandbox.py): in the checkout, with the
allow-listed environment (no token of the runner's, no credentials), a HOME and TMPDIR of its own, the memory and
open-file limits of a benchmark process, no core dumps, and a wall-clock limit, killed with its whole process group
past it. It never runs through git, nor with a shell: the command is split like a shell would (``shlex``) and
executed directly. ``python`` as its first word is the interpreter the benchmarks run in (the commit's own
environment, or the one named), so the build sees the same JAX and build tools its benchmarks import; that
interpreter's directory comes first on PATH for the same reason.

Why no ``pip install`` of the project: an installed package is what the benchmark process must *not* import (it
would shadow the checkout, the issue-17 bug); building in place keeps the checkout the one source of the code.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from runners.sandbox import Limits, child_environment, limits_from_env

BUILD_TIMEOUT_S = 1800.0
LOG_TAIL_LINES = 20  # what of a failed build's output the error quotes

# Applies the limits in the new process, then becomes the build: rlimits are set in the process they bound, not in
# a preexec_fn of a parent that may have threads (a Celery worker; see runners/child.py).
_EXEC_LIMITED = (
    "import os, resource, sys\n"
    "memory, files = int(sys.argv[1]), int(sys.argv[2])\n"
    "if memory > 0:\n"
    "    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "try:\n"
    "    os.execvp(sys.argv[3], sys.argv[3:])\n"
    "except OSError as exc:\n"
    "    sys.exit(f'cannot run {sys.argv[3]!r}: {exc.strerror}')\n"
)


class BuildFailed(Exception):
    """The project's build at a commit failed or overran; the message says how, with the end of its output."""


def parse_build(value: object, where: str) -> tuple[str, ...]:
    """The project file's ``build``: a command line (split as a shell would, without running one) or a list of
    words; ValueError naming ``where`` otherwise."""
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"{where}: build = {value!r} is not a command line ({exc})") from None
    elif isinstance(value, list) and all(isinstance(w, str) for w in value):
        words = list(value)
    else:
        raise ValueError(f"{where}: build must be a command (a string, or a list of strings), not {value!r}")
    if not words or not words[0].strip():
        raise ValueError(f"{where}: build is empty")
    return tuple(words)


def command_for(build: Sequence[str], python: Path | None) -> list[str]:
    """The command as it runs: ``python`` first word the benchmarks' interpreter."""
    interpreter = str(python) if python is not None else sys.executable
    return [interpreter, *build[1:]] if build[0] == "python" else list(build)


def run_build(build: Sequence[str], checkout: Path, python: Path | None, limits: Limits | None = None,
              timeout_s: float = BUILD_TIMEOUT_S) -> None:
    """Run the project's ``build`` in ``checkout`` (module docstring); BuildFailed when it fails."""
    limits = limits if limits is not None else limits_from_env(os.environ)
    command = command_for(build, python)
    with tempfile.TemporaryDirectory(prefix="kw-build-", ignore_cleanup_errors=True) as sandbox:
        home, tmp = Path(sandbox, "home"), Path(sandbox, "tmp")
        home.mkdir()
        tmp.mkdir()
        env = child_environment(os.environ, {"HOME": str(home), "TMPDIR": str(tmp), "PYTHONNOUSERSITE": "1"})
        if python is not None:
            env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", os.defpath)])
        memory = limits.memory_mb * 2**20 if limits.memory_mb is not None else 0
        log_path = Path(sandbox, "build.log")
        with log_path.open("wb") as log:
            try:
                proc = subprocess.Popen(  # noqa: S603 - the repository's command, sandboxed as its benchmarks are
                    [sys.executable, "-I", "-c", _EXEC_LIMITED, str(memory), str(limits.open_files), *command],
                    cwd=checkout, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
            except OSError as exc:
                raise BuildFailed(f"the project's build could not start: {exc}") from None
            try:
                returncode: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                returncode = None
            finally:
                _kill_group(proc)  # past its limit, or done: nothing it started outlives it
        if returncode is None:
            raise BuildFailed(f"the project's build ({shlex.join(build)}) ran past {timeout_s:.0f} s and was "
                              f"stopped{_tail(log_path)}")
        if returncode != 0:
            how = f"exited {returncode}" if returncode > 0 else f"was killed by signal {-returncode}"
            raise BuildFailed(f"the project's build ({shlex.join(build)}) {how}{_tail(log_path)}")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _tail(log_path: Path) -> str:
    lines = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-LOG_TAIL_LINES:]
    return (":\n  " + "\n  ".join(lines)) if lines else " (no output)"
