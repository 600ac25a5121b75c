"""The environment a suite ran in: what must match for two measurements to be comparable."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """The host CPU's model name from /proc/cpuinfo (Linux), else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_isa() -> str:
    """Machine architecture plus the widest x86 vector extension, which changes XLA's generated code."""
    arch = platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return arch
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    for ext in ("avx512f", "avx2", "avx", "sse4_2"):
        if ext in flags:
            return f"{arch}+{ext}"
    return arch


def _package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return ""


def topology(devices: list[object], process_count: int) -> str:
    """Processes x devices, plus the physical extent of the device grid where devices report coordinates (TPU)."""
    text = f"{process_count}x{len(devices) // max(process_count, 1)}"
    coords: list[Any] = [getattr(d, "coords", None) for d in devices]
    if coords and all(c is not None for c in coords):
        extent = [max(c[i] for c in coords) + 1 for i in range(len(coords[0]))]
        text += " grid " + "x".join(str(e) for e in extent)
    return text


def comparable_flags(flags: str) -> str:
    """XLA or libtpu flags minus the dump options: where a compiler writes its dumps does not change the code
    it generates, and the dump directory differs on every run."""
    return " ".join(f for f in flags.split() if not f.startswith(("--xla_dump", "--xla_jf_dump")))


def environment_info(dirty: bool = False) -> dict[str, object]:
    """Fingerprint of the running process's JAX backend; shaped as the manifest's ``environment``."""
    import jax
    import jax.extend
    import jaxlib

    devices = jax.devices()
    backend = jax.extend.backend.get_backend()
    platform_version = str(getattr(backend, "platform_version", ""))
    info: dict[str, object] = {
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind if devices else "none",
        "device_count": max(1, len(devices)),
        "jax_version": jax.__version__,
        "jaxlib_version": getattr(jaxlib, "__version__", ""),
        "xla_flags": comparable_flags(os.environ.get("XLA_FLAGS", "")),
        "cpu_model": cpu_model(),
        "host_isa": host_isa(),
        "python_version": platform.python_version(),
        "topology": topology(list(devices), jax.process_count()),
        "platform_version": "" if platform_version == jax.default_backend() else platform_version,
        "libtpu_version": _package_version("libtpu") or _package_version("libtpu-nightly"),
        "libtpu_init_args": comparable_flags(os.environ.get("LIBTPU_INIT_ARGS", "")),
        "extra": {"hostname": socket.gethostname(), "dirty": str(dirty).lower()},
    }
    # XLA's CPU thread pool size when the runner set it (RunRequest.xla_single_thread; the sandbox passes no
    # PJRT_NPROC of the runner's own through): absent otherwise, as it was before the option existed.
    threads = os.environ.get("PJRT_NPROC", "")
    if threads.isdigit() and int(threads) >= 1:
        info["cpu_threads"] = int(threads)
    # glibc's mmap threshold where the runner set it (RunRequest.keep_pages), read here in the benchmark process.
    threshold = os.environ.get("MALLOC_MMAP_THRESHOLD_", "")
    if threshold.isdigit():
        info["malloc_mmap_threshold"] = int(threshold)
    return info
