"""The calibration micro-benchmark: what this host's JAX backend actually does, for a host with no published
peaks (a CPU runner). Matmuls give FLOP/s per dtype; a streaming pass at a ladder of working sets gives the
bandwidth of each level of the memory hierarchy (the cache-aware roofline, kernelwatch/memory_hierarchy.py).
Every figure is the best of a few timed repetitions after a compile-and-warm call, since the best run is the
one least disturbed by the rest of the machine, and a roof is an upper bound.

It is measured in a benchmark process started for nothing else (runners/child.py --calibrate-only), so with
the interpreter, XLA flags, CPU pinning and thread pool the benchmarks get but with no code of the repository
imported. It is measured once per host and environment and kept (runners/calibration_cache.py): a roof
re-measured every run would move with the host's noise and move every result's fraction with it.
``KERNELWATCH_CALIBRATE=0`` turns it off (the test suite does, since it starts benchmark processes by the
hundred).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from kernelwatch.hardware import Calibration, dtype_key
from kernelwatch.memory_hierarchy import BandwidthPoint, CacheLevel, caches_from_sysfs
from runners.proc_stat import parse_proc_stat

# Matmuls at a few sizes, the best of them: one size's tiling may suit the host's kernels worse than another's,
# and a roof must be the fastest rate the host reaches. 2048² is ~17 GFLOP, tens of ms on a CPU core.
MATMUL_SIZES = (512, 1024, 2048)
MATMUL_DTYPES = ("float32", "bfloat16")
# The bandwidth ladder: working sets doubling from 16 KiB (inside any L1) to at least 4x the last-level cache
# (where only DRAM serves), each timed over a loop moving about this many bytes, so that a small working set's
# time is the loop's and not one dispatch's.
LADDER_START = 16 * 2**10
LADDER_MIN_TOP = 64 * 2**20
LADDER_MAX_TOP = 1 * 2**30
BYTES_PER_TIMING = 256 * 2**20
REPEATS = 5
# The whole ladder five times, best per point: a burst of the host's noise rarely hits one point every time. Three
# were too few on a 2-vCPU VM whose streaming rate at one working set moved 94-141 GB/s between calls: the demo's
# softmax ran at 110.5 % of a 2 MiB point measured low in all three (2026-12-07); a pass is ~6 s there.
PASSES = 5
PASSES_SETTING = "KERNELWATCH_CALIBRATION_PASSES"
SWITCH = "KERNELWATCH_CALIBRATE"
SYSFS_CPU = Path("/sys/devices/system/cpu")
PROC_STAT = Path("/proc/stat")
# A roof is the best the host does, so it is measured while the host is quiet: before each pass the calibration
# waits for a half second in which the rest of the machine keeps less than this share of all CPU time busy
# (steal included), for at most QUIET_BUDGET_S over the whole calibration. Measured while a parallel test tier wound
# down, a calibration set an fp32 roof of 300 GFLOP/s that the demo's 512^3 matmul beat at 336 minutes later.
QUIET_BUSY = 0.25
QUIET_WINDOW_S = 0.5
QUIET_BUDGET_S = 20.0
# The budget, in seconds, where a runner's host should be measured otherwise: 0 measures at once (a host known to be
# busy, whose figures will be its busy best: the parallel test tier, where nothing reads a roof as a bound).
QUIET_SETTING = "KERNELWATCH_CALIBRATION_QUIET_S"


def calibration_passes(environ: Mapping[str, str] | None = None) -> int:
    """How many times a calibration walks its matmuls and ladder, best per point: ``PASSES_SETTING`` (1 to 10),
    else ``PASSES``. More on a host whose noise comes in bursts; 1 where nothing reads a roof as a bound (CI's
    parallel tier, like its quiet budget of 0: its calibrations test the keeping and the plumbing)."""
    text = (os.environ if environ is None else environ).get(PASSES_SETTING, "").strip()
    if not text:
        return PASSES
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 10):
        raise ValueError(f"{PASSES_SETTING}={text!r}: give a whole number from 1 to 10")
    return int(text)


def quiet_budget(environ: Mapping[str, str] | None = None) -> float:
    """How long a calibration waits in all for a quiet host: ``QUIET_SETTING``, else ``QUIET_BUDGET_S``."""
    text = (os.environ if environ is None else environ).get(QUIET_SETTING, "").strip()
    if not text:
        return QUIET_BUDGET_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{QUIET_SETTING}={text!r}: give a number of seconds (0: measure at once)") from None
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{QUIET_SETTING}={text!r}: give a number of seconds >= 0")
    return value


def busy_share(window_s: float = QUIET_WINDOW_S, sleep: Callable[[float], Any] = time.sleep) -> float | None:
    """The share of all CPU time the host spent busy (steal included) over ``window_s`` while this process slept:
    the rest of the machine's load. None where /proc/stat cannot be read (not Linux)."""
    try:
        before = parse_proc_stat(PROC_STAT.read_text())
        sleep(window_s)
        after = parse_proc_stat(PROC_STAT.read_text())
    except (OSError, ValueError):
        return None
    total = after.total - before.total
    idle = (after.idle + after.iowait) - (before.idle + before.iowait)
    return None if total <= 0 else max(0.0, 1.0 - idle / total)


class Waited(NamedTuple):
    spent: float  # seconds, for the caller's budget
    quiet: bool  # False: the budget ran out with the host still busy


def wait_for_quiet(budget_s: float, load: Callable[[], float | None] = busy_share,
                   busy: float = QUIET_BUSY, clock: Callable[[], float] = time.monotonic) -> Waited:
    """Take load readings (``load``: each a window's busy share) until one is under ``busy`` or ``budget_s`` has
    passed. Unknown load is quiet enough: nothing to wait for."""
    started = clock()
    while True:
        share = load()
        spent = clock() - started
        if share is None or share < busy:
            return Waited(spent, True)
        if spent >= budget_s:
            return Waited(spent, False)


def _best_seconds(call: Callable[[], Any], repeats: int) -> float:
    call().block_until_ready()  # compile, and fault in the output buffer, outside the timing
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call().block_until_ready()
        best = min(best, time.perf_counter() - start)
    return best


def matmul_rate(n: int, dtype: str, repeats: int) -> float:
    """FLOP/s of an n x n x n matmul in ``dtype``, the faster of its two common forms: the result in ``dtype``,
    and (for a narrower dtype) accumulated into float32, as kernels write bf16 matmuls; the two take different
    paths through XLA:CPU's libraries (on CPUs with AMX the float32-accumulating one is twice as fast)."""
    import jax
    import jax.numpy as jnp

    key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(key_a, (n, n), dtype=dtype)
    b = jax.random.normal(key_b, (n, n), dtype=dtype)
    forms = [jax.jit(lambda x, y: x @ y)]
    if jnp.dtype(dtype).itemsize < 4:
        forms.append(jax.jit(lambda x, y: jnp.matmul(x, y, preferred_element_type=jnp.float32)))
    flops = 2.0 * n * n * n  # n² outputs, n multiplies and n adds each
    return max(flops / _best_seconds(functools.partial(form, a, b), repeats) for form in forms)


def streaming_rate(working_set_bytes: int, repeats: int, bytes_per_timing: int = BYTES_PER_TIMING) -> float:
    """Bytes/s of ``v + 1`` over a float32 array of ``working_set_bytes``, in place inside one compiled loop.

    In place (the argument donated, the loop carrying it): a fresh output array would double the working set
    and add the kernel's page faults to the figure. An add rather than a copy, since XLA may elide a copy, never
    an add; each iteration reads and writes every byte once, so it moves twice the array."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    elements = max(1, working_set_bytes // 4)
    iterations = max(2, math.ceil(bytes_per_timing / (2 * elements * 4)))
    step = jax.jit(lambda v: lax.fori_loop(0, iterations, lambda _, w: w + jnp.float32(1), v), donate_argnums=0)
    state = {"x": jnp.zeros((elements,), dtype=jnp.float32)}

    def call() -> Any:
        state["x"] = step(state["x"])
        return state["x"]

    return 2.0 * elements * 4 * iterations / _best_seconds(call, repeats)


def ladder(caches: Iterable[CacheLevel], start: int = LADDER_START) -> list[int]:
    """Working sets doubling from ``start`` to at least four times the largest cache (module constants)."""
    largest = max((c.size_bytes for c in caches), default=0)
    top = min(max(4 * largest, LADDER_MIN_TOP), LADDER_MAX_TOP)
    sizes = [start]
    while sizes[-1] < top:
        sizes.append(sizes[-1] * 2)
    return sizes


def host_caches(cpus: Iterable[int] | None = None) -> tuple[CacheLevel, ...]:
    """This host's data caches as sysfs lists them, for the CPUs this process runs on; none where sysfs has
    no cache directory (a container that hides it, another OS): then the ladder still runs and the curve still
    bounds, only the levels go unnamed."""
    allowed = set(os.sched_getaffinity(0)) if cpus is None else set(cpus)
    threads = os.environ.get("PJRT_NPROC", "")
    if cpus is None and threads.isdigit() and 0 < int(threads) < len(allowed):
        # XLA's pool held to fewer threads than CPUs: at any moment only that many cores' private caches hold
        # the kernel's data.
        allowed = set(sorted(allowed)[:int(threads)])
    entries: list[tuple[str, str, str, str]] = []
    for cpu in sorted(allowed):
        for index in sorted((SYSFS_CPU / f"cpu{cpu}" / "cache").glob("index*")):
            try:
                level, kind, size, shared = ((index / name).read_text().strip()
                                             for name in ("level", "type", "size", "shared_cpu_list"))
                entries.append((level, kind, size, shared))
            except OSError:
                continue
    try:
        return caches_from_sysfs(entries, allowed)
    except ValueError:  # a size sysfs wrote in a form parse_size does not know: unnamed levels, as without sysfs
        return ()


def calibrate(matmul_sizes: Iterable[int] = MATMUL_SIZES, dtypes: Iterable[str] = MATMUL_DTYPES,
              working_sets: Iterable[int] | None = None, repeats: int = REPEATS, passes: int = PASSES,
              caches: tuple[CacheLevel, ...] | None = None,
              bytes_per_timing: int = BYTES_PER_TIMING, quiet_budget_s: float | None = None) -> Calibration:
    """Measure the local default backend. Small sizes (tests) give small, noisy, but positive figures.
    ``quiet_budget_s``: how long in all it may wait for a quiet host before its passes (``wait_for_quiet``;
    None: ``quiet_budget()``)."""
    quiet_budget_s = quiet_budget() if quiet_budget_s is None else quiet_budget_s
    sizes, kinds = list(matmul_sizes), list(dtypes)
    found = host_caches() if caches is None else caches
    sets = ladder(found) if working_sets is None else sorted(set(working_sets))
    if not sizes or not kinds or not sets or repeats < 1 or passes < 1 or min(sizes) < 1 or min(sets) < 4:
        raise ValueError("matmul sizes, dtypes, working sets (of 4 bytes or more), repeats and passes must be "
                         "given and positive")
    rates: dict[str, float] = {}
    best: dict[int, float] = {}
    # Measured while the host stayed busy: a pass found no quiet spell in the budget (a budget of 0 asks for no
    # wait, and says nothing of the host). The runner keeps such a calibration as provisional (calibration_cache).
    busy = False
    for _ in range(passes):
        if quiet_budget_s > 0:
            waited = wait_for_quiet(quiet_budget_s)
            quiet_budget_s -= waited.spent
            busy = busy or not waited.quiet
        # The matmuls in every pass too, best per dtype: measured once, a slow spell of the host (the other vCPU
        # busy halves a two-thread matmul here) set an fp32 roof that the demo's own matmuls then beat by 11 %.
        for d in kinds:
            rates[dtype_key(d)] = max(rates.get(dtype_key(d), 0.0), *(matmul_rate(n, d, repeats) for n in sizes))
        for size in sets:
            best[size] = max(best.get(size, 0.0), streaming_rate(size, repeats, bytes_per_timing))
    curve = tuple(BandwidthPoint(size, best[size]) for size in sets)
    first = dtype_key(kinds[0])
    return Calibration(flops_per_s=rates[first], bytes_per_s=curve[-1].bytes_per_s, dtype=kinds[0],
                       flops_by_dtype=tuple(rates.items()), bandwidth=curve, caches=found, measured_busy=busy)


def calibration_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Off only when ``KERNELWATCH_CALIBRATE`` says so (0, false, no, off)."""
    value = (os.environ if environ is None else environ).get(SWITCH, "1")
    return value.strip().lower() not in {"0", "false", "no", "off"}


# What a calibration's figures depend on, of a benchmark process's environment (runners/fingerprint.py): the
# host, the JAX build, and what sizes and places XLA's threads. Not the hostname alone: a VM that moved to
# another machine keeps its name.
KEY_FIELDS = ("backend", "device_kind", "device_count", "jax_version", "jaxlib_version", "xla_flags", "cpu_model",
              "host_isa", "python_version", "cpu_affinity", "cpu_threads")


def calibration_key(environment: Mapping[str, Any], caches: Iterable[CacheLevel]) -> str:
    """The key a calibration is kept under: one per host and environment."""
    facts = {name: environment.get(name) for name in KEY_FIELDS}
    facts["hostname"] = socket.gethostname()
    facts["caches"] = [[c.name, c.size_bytes] for c in caches]
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def host_key(environment: Mapping[str, Any]) -> str:
    """This host and environment's key (``environment`` as runners/fingerprint.py's environment_info)."""
    return calibration_key(environment, host_caches())
