"""What a benchmark process may see and use: an allow-listed environment and resource limits.

Benchmark code comes from the repository under test and is as untrusted as any other input. Its process gets
only the environment variables a kernel needs (no service token, no Slack, GitHub or database secret), a
working directory, home and TMPDIR of its own, and rlimits on memory, CPU time and open files, so that a
runaway kernel is stopped and recorded as failed rather than taking the runner host down with it.

The limits are guard rails for accidents, not a jail: code running as the runner's user can lower them
further, and raise a soft limit up to its hard limit. Stronger isolation (another user, namespaces,
cgroups) belongs to how the runner itself is deployed.

Memory is limited with RLIMIT_DATA, not RLIMIT_AS. RLIMIT_AS counts reserved address space: a JAX process on
a two-core CPU host already maps ~1.5 GB while resident at ~0.2 GB, the reservation grows with the core count
(a glibc malloc arena and a thread stack per thread), and CUDA and libtpu reserve host address ranges the size
of the device memory or more, so an address-space cap breaks JAX on exactly the hosts that matter. RLIMIT_DATA
counts private writable mappings (heap, anonymous mmap, since Linux 4.7), which is what a kernel's arrays use:
an oversized host allocation fails with MemoryError, or RESOURCE_EXHAUSTED from XLA, and the benchmark fails.
"""

from __future__ import annotations

import math
import os
import re
import resource
from collections.abc import Mapping
from dataclasses import dataclass

from kernelwatch.errors import ConfigurationError

MEMORY_LIMIT_SETTING = "KERNELWATCH_RUNNER_MEMORY_LIMIT_MB"
CPU_LIMIT_SETTING = "KERNELWATCH_RUNNER_CPU_LIMIT_S"
OPEN_FILES_SETTING = "KERNELWATCH_RUNNER_OPEN_FILES"
UNLIMITED_WORDS = frozenset({"unlimited", "none", "off"})
DEFAULT_OPEN_FILES = 4096
DEFAULT_MEMORY_FRACTION = 0.75

# Variables a benchmark process keeps from the runner's environment: the locale, the search path for tools
# (ptxas), and what configures JAX, XLA and the accelerator runtimes.
_KEPT_NAMES = frozenset({"PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "XLA_FLAGS", "LIBTPU_INIT_ARGS",
                         "CUDA_VISIBLE_DEVICES", "KERNELWATCH_CALIBRATE", "TF_CPP_MIN_LOG_LEVEL",
                         "TF_CPP_MAX_VLOG_LEVEL", "TF_CPP_VMODULE", "OMP_NUM_THREADS"})
_KEPT_PREFIXES = ("LC_", "JAX_", "XLA_", "TPU_", "LIBTPU_", "CUDA_", "NVIDIA_", "ROCR_", "HIP_")
# Kept prefixes that name something secret all the same (a TPU_..._TOKEN, a CUDA_..._KEY) are dropped.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|(^|_)KEY($|_)|AUTH|COOKIE|SESSION", re.IGNORECASE)
# "MemoryError: ..." or a subclass, as traceback names it ("numpy._core._exceptions._ArrayMemoryError: ...").
_MEMORY_ERROR = re.compile(r"^[\w.]*MemoryError\b")


def child_environment(parent_env: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a benchmark process: the allow-listed part of ``parent_env``, then ``extra`` (what
    the session sets itself: HOME, TMPDIR, PYTHONPATH, XLA flags), which wins. Nothing else: no
    KERNELWATCH_TOKEN, no Slack, GitHub, database, broker or cloud credentials, whatever they are called."""
    kept = {name: value for name, value in parent_env.items()
            if (name in _KEPT_NAMES or name.startswith(_KEPT_PREFIXES)) and not _SECRET_NAME.search(name)}
    kept.update(extra)
    return kept


@dataclass(frozen=True)
class Limits:
    """Resource limits of one benchmark process. None: no limit of that kind.

    ``cpu_s`` is per benchmark: before each one the process may use that many more CPU-seconds (all threads
    together); None derives it from the benchmark's deadline × the host's cores, which the wall-clock deadline
    reaches first, leaving the limit to bound helpers that escape the process group.
    """

    memory_mb: int | None
    cpu_s: int | None = None
    open_files: int = DEFAULT_OPEN_FILES

    def cpu_budget(self, deadline_s: float) -> int:
        """CPU-seconds a benchmark (or the start) that has ``deadline_s`` of wall-clock time may use."""
        if self.cpu_s is not None:
            return self.cpu_s
        return math.ceil(deadline_s * (os.cpu_count() or 1)) + 10

    def as_args(self) -> list[str]:
        """The benchmark process's command-line arguments for these limits (runners/child.py parses them)."""
        args = ["--open-files-limit", str(self.open_files)]
        if self.memory_mb is not None:
            args += ["--memory-limit-mb", str(self.memory_mb)]
        return args


class BadLimitSetting(ConfigurationError, ValueError):
    """A limit setting in the environment that is not a positive whole number (or 'unlimited'): the runner does
    not start, and the message says what to set."""


def host_memory_mb() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20


def _positive(environ: Mapping[str, str], name: str, what: str) -> int | None | str:
    """The setting as a positive int; None when absent; "unlimited" when it says so."""
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return None
    text = raw.strip().lower()
    if text in UNLIMITED_WORDS:
        return "unlimited"
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise BadLimitSetting(f"{name}={raw!r}: set it to {what} as a positive whole number, or 'unlimited'")
    return value


def limits_from_env(environ: Mapping[str, str]) -> Limits:
    """Limits from the runner's settings; unset ones take their defaults (memory: 75% of the host's RAM;
    CPU: derived per benchmark; open files: 4096)."""
    memory = _positive(environ, MEMORY_LIMIT_SETTING, "the memory limit of a benchmark process in MB")
    cpu = _positive(environ, CPU_LIMIT_SETTING, "the CPU-seconds one benchmark may use")
    files = _positive(environ, OPEN_FILES_SETTING, "the number of files a benchmark process may open")
    if files == "unlimited":
        raise BadLimitSetting(f"{OPEN_FILES_SETTING}: open files cannot be unlimited; give a number")
    return Limits(
        memory_mb=None if memory == "unlimited" else (memory if isinstance(memory, int)
                                                      else int(host_memory_mb() * DEFAULT_MEMORY_FRACTION)),
        cpu_s=cpu if isinstance(cpu, int) else None,
        open_files=files if isinstance(files, int) else DEFAULT_OPEN_FILES,
    )


def _set(kind: int, value: int) -> None:
    """Soft and hard limit to ``value``, or to the current hard limit where that is lower (only a privileged
    process may raise a hard limit)."""
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def apply_limits(limits: Limits) -> None:
    """In the benchmark process, before any benchmark code is imported: memory, open files, no core dumps (the
    CPU budget is moved per benchmark, by ``allow_cpu``)."""
    if limits.memory_mb is not None:
        _set(resource.RLIMIT_DATA, limits.memory_mb * 2**20)
    _set(resource.RLIMIT_NOFILE, limits.open_files)
    _set(resource.RLIMIT_CORE, 0)  # a crashing kernel must not leave its memory (inputs, maybe secrets) on disk


# prctl(2)'s option that has the kernel signal this process when the thread that started it ends.
PR_SET_PDEATHSIG = 1


def end_with_parent() -> None:
    """Have the kernel kill this benchmark process when the process that started it dies (Linux; elsewhere
    nothing). A runner killed with SIGKILL (an OOM kill, a node drained) left its benchmark process running at full
    CPU until its benchmark ended, reparented, while the runner's restart measured its next runs on a host that
    process kept busy. The parent is the thread that started it, which in the runner is the one that waits for it
    (runners/local.py closes every benchmark process before run_commits returns). A parent gone before this call
    is seen by the end-of-file of its pipe, at the process's first read; one that dies between the two reads of the
    parent's id here, by the second."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl to call: the pipe's end-of-file still ends it, between benchmarks
        return
    if os.getppid() != parent:  # the parent died between the two reads: no signal will come
        os._exit(1)


def allow_cpu(seconds: int) -> None:
    """Let this process use ``seconds`` more CPU time from now; past it, SIGXCPU ends it. A soft limit that is
    moved per benchmark, since one process runs many of them."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime) + seconds
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def explain_failure(message: str, memory_mb: int | None, backend: str) -> str:
    """A failed benchmark's message, saying so when the failure was this process's memory limit: a host
    allocation that failed (MemoryError; XLA's RESOURCE_EXHAUSTED on a CPU backend, whose buffers are host
    memory). On an accelerator RESOURCE_EXHAUSTED is the device's memory, which no rlimit governs."""
    if memory_mb is None:
        return message
    if _MEMORY_ERROR.match(message) or (backend == "cpu" and "RESOURCE_EXHAUSTED" in message):
        return f"exceeded its memory limit ({memory_mb} MB, {MEMORY_LIMIT_SETTING}): {message}"
    return message
