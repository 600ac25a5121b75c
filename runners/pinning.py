"""CPU pinning of the benchmark process (RunRequest.cpu_affinity): CPU lists as text, checked before a process
starts, and the pin itself, applied by the child (runners/child.py) before it imports JAX, so that XLA sizes its
thread pools from the pinned set (it counts the CPUs it may be scheduled on)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from kernelwatch.errors import InvalidInput


def format_cpu_list(cpus: Iterable[int]) -> str:
    """CPUs as the kernel writes a list (cpuset(7)): sorted, runs collapsed, "0-3,6"."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """"0-3,6" → (0, 1, 2, 3, 6); ValueError on anything else (empty, negative, a reversed range)."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, sep, high = part.strip().partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise ValueError(f"{text!r} is not a CPU list such as 0-3,6")
        first, last = int(low), int(high) if sep else int(low)
        if last < first:
            raise ValueError(f"{part!r} in {text!r} is a reversed range")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


AFFINITY_SETTING = "KERNELWATCH_CPU_AFFINITY"  # a runner host's own: its workers' benchmark processes pinned
SINGLE_THREAD_SETTING = "KERNELWATCH_XLA_SINGLE_THREAD"  # 1: XLA's CPU thread pool held to one thread
KEEP_PAGES_SETTING = "KERNELWATCH_KEEP_PAGES"  # 1: glibc keeps the pages it frees (RunRequest.keep_pages)


@dataclass(frozen=True)
class NoiseSettings:
    """The CPU noise reduction a runner host applies to every run its workers make."""

    cpu_affinity: tuple[int, ...] | None
    xla_single_thread: bool
    keep_pages: bool


def _switch(environ: dict[str, str], name: str) -> bool:
    value = environ.get(name, "").strip().lower()
    if value not in ("", "0", "1", "true", "false"):
        raise InvalidInput(f"{name} must be 1 or 0, not {value!r}")
    return value in ("1", "true")


def runner_noise_settings(environ: dict[str, str]) -> NoiseSettings:
    """The CPU noise reduction a runner host applies to every run its workers make (what `run --cpu-affinity`,
    `--xla-single-thread` and `--keep-pages` ask for one run); InvalidInput naming the setting when one is
    malformed."""
    affinity_text = environ.get(AFFINITY_SETTING, "").strip()
    try:
        affinity = parse_cpu_list(affinity_text) if affinity_text else None
    except ValueError as exc:
        raise InvalidInput(f"{AFFINITY_SETTING}: {exc}") from None
    return NoiseSettings(affinity, _switch(environ, SINGLE_THREAD_SETTING), _switch(environ, KEEP_PAGES_SETTING))


def pin(cpus: tuple[int, ...]) -> None:
    """Pin this process (and the threads it starts from now on) to ``cpus``; a clear error where the platform
    cannot (no sched_setaffinity on macOS) or a CPU is not this process's to use."""
    setaffinity = getattr(os, "sched_setaffinity", None)
    if setaffinity is None:
        raise OSError("CPU affinity is not supported on this platform (no sched_setaffinity)")
    setaffinity(0, cpus)
    # The kernel quietly drops CPUs outside the process's cpuset as long as one is left: say so instead.
    granted = os.sched_getaffinity(0)
    if granted != set(cpus):
        raise OSError(f"asked to pin to CPUs {format_cpu_list(cpus)}, granted {format_cpu_list(granted)}")


def checked_affinity(cpus: Iterable[int] | None) -> tuple[int, ...] | None:
    """The CPUs to pin to, sorted, once known to be this process's to use (a child cannot be pinned to more than
    its parent may run on); InvalidInput naming what is wrong, before any benchmark process starts."""
    if cpus is None:
        return None
    wanted = tuple(sorted(set(cpus)))
    if not wanted:
        raise InvalidInput("cpu_affinity names no CPU")
    if not hasattr(os, "sched_getaffinity"):
        raise InvalidInput("CPU affinity is not supported on this platform (no sched_setaffinity)")
    allowed = os.sched_getaffinity(0)
    outside = [c for c in wanted if c not in allowed]
    if outside:
        raise InvalidInput(f"cannot pin to CPU(s) {format_cpu_list(outside)}: this process may run on "
                           f"{format_cpu_list(allowed)} only")
    return wanted
