"""The environment a suite ran in: what must match for two measurements to be comparable."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path


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


def environment_info(dirty: bool = False) -> dict[str, object]:
    """Fingerprint of the running process's JAX backend; shaped as the manifest's ``environment``."""
    import jax
    import jaxlib

    devices = jax.devices()
    return {
        "backend": jax.default_backend(),
        "device_kind": devices[0].device_kind if devices else "none",
        "device_count": max(1, len(devices)),
        "jax_version": jax.__version__,
        "jaxlib_version": getattr(jaxlib, "__version__", ""),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "cpu_model": cpu_model(),
        "host_isa": host_isa(),
        "python_version": platform.python_version(),
        "extra": {"hostname": socket.gethostname(), "dirty": str(dirty).lower()},
    }
