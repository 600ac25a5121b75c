"""The calibration micro-benchmark: what this host's JAX backend actually does, for a host with no published
peaks (a CPU runner). A large matmul gives FLOP/s, a large elementwise pass gives memory bytes/s; both are the
best of a few timed repetitions after a compile-and-warm call, since the best run is the one least disturbed
by the rest of the machine and a roof is an upper bound.

A benchmark process on a CPU host runs it once at start (``host_calibration``, at the smaller ``RUNNER_*``
sizes) and announces the figures with its environment; the service stores them with the run and draws that
run's roofline against them. ``KERNELWATCH_CALIBRATE=0`` turns it off (the test suite does, since it starts
benchmark processes by the hundred).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from kernelwatch.hardware import Calibration

# A 2048² matmul is ~17 GFLOP: long enough (tens of ms on a CPU core) that timer and dispatch overhead vanish,
# small enough for every runner. 64 MiB arrays are past any CPU's last-level cache, so the copy measures DRAM.
MATMUL_SIZE = 2048
COPY_BYTES = 64 * 2**20
REPEATS = 5
# At runner start: about half a second on a busy two-core host, most of it compiling. A 1024² matmul is still
# ~2 GFLOP, and 32 MiB is still past the last-level cache of the CPUs runners use (which would otherwise flatter
# the memory roof several times over).
RUNNER_MATMUL_SIZE = 1024
RUNNER_COPY_BYTES = 32 * 2**20
RUNNER_REPEATS = 3
SWITCH = "KERNELWATCH_CALIBRATE"


def _best_seconds(call: Callable[[], Any], repeats: int) -> float:
    call().block_until_ready()  # compile, and fault in the output buffer, outside the timing
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call().block_until_ready()
        best = min(best, time.perf_counter() - start)
    return best


def calibrate(matmul_size: int = MATMUL_SIZE, copy_bytes: int = COPY_BYTES, repeats: int = REPEATS,
              dtype: str = "float32") -> Calibration:
    """Measure the local default backend. Small sizes (tests) give small, noisy, but positive figures."""
    if matmul_size < 1 or copy_bytes < 1 or repeats < 1:
        raise ValueError("matmul_size, copy_bytes and repeats must be positive")
    import jax
    import jax.numpy as jnp

    n = matmul_size
    key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(key_a, (n, n), dtype=dtype)
    b = jax.random.normal(key_b, (n, n), dtype=dtype)
    matmul = jax.jit(lambda x, y: x @ y)
    flops = 2.0 * n * n * n  # n² outputs, each n multiplies and n adds
    matmul_s = _best_seconds(lambda: matmul(a, b), repeats)

    itemsize = jnp.dtype(dtype).itemsize
    elements = max(1, copy_bytes // itemsize)
    x = jnp.ones((elements,), dtype=dtype)
    # x + 1 rather than a plain copy: XLA may elide a copy, never an add; it reads every byte once and writes
    # every byte once, so it moves twice the array.
    bump = jax.jit(lambda v: v + jnp.asarray(1, dtype=dtype))
    moved = 2.0 * elements * itemsize
    copy_s = _best_seconds(lambda: bump(x), repeats)

    return Calibration(flops_per_s=flops / matmul_s, bytes_per_s=moved / copy_s, dtype=dtype)


def calibration_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Off only when ``KERNELWATCH_CALIBRATE`` says so (0, false, no, off)."""
    value = (os.environ if environ is None else environ).get(SWITCH, "1")
    return value.strip().lower() not in {"0", "false", "no", "off"}


@functools.cache
def host_calibration() -> dict[str, Any]:
    """This process's calibration, measured on first use and kept: the host does not change under a process,
    and a benchmark process that announced its environment twice must not pay twice. Shaped as the manifest's
    ``environment.calibration``."""
    c = calibrate(RUNNER_MATMUL_SIZE, RUNNER_COPY_BYTES, RUNNER_REPEATS)
    return {"flops_per_s": c.flops_per_s, "bytes_per_s": c.bytes_per_s, "dtype": c.dtype}
