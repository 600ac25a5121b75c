"""Collectives over every device: all-reduce, all-gather, reduce-scatter, and a hand-written ring all-reduce.

Each runs under ``jax.shard_map`` on a 1-D mesh over ``jax.devices()`` (this JAX, 0.10.2, exposes ``jax.shard_map``;
``jax.experimental.shard_map.shard_map`` is a deprecated alias). They need 8 devices: on a CPU host that means
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` set before JAX initialises, which the runner does for
benchmarks declaring ``devices=8`` (in a process of their own).

Bandwidth follows the NCCL-tests convention, so the numbers compare with ``all_reduce_perf`` and friends:
``size`` is the per-device buffer in bytes (for all-reduce the buffer each device holds; for all-gather the
gathered output each device ends with; for reduce-scatter the input each device starts with), and the reported
algorithm bandwidth is algbw = size / time (``bytes_moved = size``). Bus bandwidth, the per-link figure, is
algbw * 2(n-1)/n for all-reduce and algbw * (n-1)/n for the other two; it is derived, not stored.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from runners.suite import Case, Params, benchmark, grid

DEVICES = 8
AXIS = "d"
ITEMSIZE = 4  # float32


def _mesh() -> Mesh:
    """A 1-D mesh over exactly DEVICES devices; a clear error (not a silent smaller run) when there are fewer."""
    devices = jax.devices()
    if len(devices) < DEVICES:
        raise RuntimeError(
            f"collectives need {DEVICES} devices, found {len(devices)} ({jax.default_backend()}); on a CPU host set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={DEVICES} before JAX initialises")
    return Mesh(np.asarray(devices[:DEVICES]), (AXIS,))


def _sharded(mesh: Mesh, x: np.ndarray) -> jax.Array:
    # Placed across the mesh here, in the factory: the harness's device_put leaves an already placed array where
    # it is, so the timed call finds each shard on its device and measures only the collective (numpy input
    # would land on device 0 and be scattered inside every timed call).
    return jax.device_put(x, NamedSharding(mesh, P(AXIS)))


def _per_device_inputs(elements: int, seed: int) -> np.ndarray:
    """Row i is device i's buffer."""
    return np.random.default_rng(seed).standard_normal((DEVICES, elements), dtype=np.float32)


# Per-device buffer sizes: latency-bound, middle, bandwidth-bound. 8 MiB tops the grid because 8 simulated CPU
# devices share two cores (the ring at 16 MiB takes ~10 s a point there); a GPU host could go far higher.
_GRID = grid(size_kib=[64, 1024, 8192])
_QUICK: list[Params] = [{"size_kib": 1024}]


def _elements(size_kib: int) -> int:
    return size_kib * 1024 // ITEMSIZE


# The cost functions below count from size_kib and DEVICES alone (no mesh, no JAX), the same counts the Cases
# carry: `kernelwatch predict` calls them where no 8 devices exist.


def all_reduce_cost(size_kib: int) -> tuple[float, float]:
    """(n-1) additions per element of the result; every device reads its buffer and writes the result."""
    elements = _elements(size_kib)
    return float((DEVICES - 1) * elements), float(DEVICES * elements * ITEMSIZE * 2)


def all_gather_cost(size_kib: int) -> tuple[float, float]:
    """No arithmetic (pure data movement: 0 FLOPs); the shards read once, every device writes the whole."""
    gathered = DEVICES * (_elements(size_kib) // DEVICES) * ITEMSIZE  # the gathered buffer every device ends with
    return 0.0, float(gathered + DEVICES * gathered)


def reduce_scatter_cost(size_kib: int) -> tuple[float, float]:
    """(n-1) additions per element of the reduced buffer; inputs read, one chunk written per device."""
    elements = _elements(size_kib)
    inputs = DEVICES * elements * ITEMSIZE
    return float((DEVICES - 1) * elements), float(inputs + inputs // DEVICES)


def ring_all_reduce_ppermute_cost(size_kib: int) -> tuple[float, float]:
    """(n-1) additions per element, as for all_reduce. Bytes, per device: 2(n-1) chunk sends and receives, n-1
    chunk adds (read two, write one), all float32."""
    elements = _elements(size_kib)
    size = elements * ITEMSIZE  # the per-device buffer
    return (float((DEVICES - 1) * elements),
            float(DEVICES * (4 * (DEVICES - 1) * size / DEVICES + 3 * (DEVICES - 1) * size / DEVICES)))


def _shard_mapped(mesh: Mesh, body: Callable[[jax.Array], jax.Array]) -> Callable[[jax.Array], jax.Array]:
    return jax.shard_map(body, mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS))


# All tolerances: float32 sums of 8 unit-variance terms in some order; reordering costs a few ulps of ~3.
_RTOL, _ATOL = 1e-5, 1e-5


@benchmark(suite="collectives", params=_GRID, quick=_QUICK, devices=DEVICES, cost=all_reduce_cost)
def all_reduce(size_kib: int) -> Case:
    mesh = _mesh()
    x = _per_device_inputs(_elements(size_kib), seed=60)
    size = x[0].nbytes  # the per-device buffer
    flops, nbytes = all_reduce_cost(size_kib)
    return Case(
        # Every device ends with the sum of all the buffers; out_specs P(AXIS) keeps one copy per device.
        fn=_shard_mapped(mesh, lambda block: jax.lax.psum(block, AXIS)),
        args=(_sharded(mesh, x),),
        reference=lambda: np.broadcast_to(x.astype(np.float64).sum(axis=0), x.shape),
        rtol=_RTOL,
        atol=_ATOL,
        flops=flops,  # see all_reduce_cost
        bytes_accessed=nbytes,
        bytes_moved=float(size),  # NCCL-tests: all-reduce algbw = per-device buffer bytes / time
    )


@benchmark(suite="collectives", params=_GRID, quick=_QUICK, devices=DEVICES, cost=all_gather_cost)
def all_gather(size_kib: int) -> Case:
    mesh = _mesh()
    # Each device contributes 1/n of the buffer and ends with all of it.
    x = _per_device_inputs(_elements(size_kib) // DEVICES, seed=61)
    size = x.nbytes  # the gathered buffer every device ends with
    flops, nbytes = all_gather_cost(size_kib)
    return Case(
        # tiled=True concatenates the shards along axis 1: device i's result is the whole (1, n*chunk) row.
        fn=_shard_mapped(mesh, lambda block: jax.lax.all_gather(block, AXIS, axis=1, tiled=True)),
        args=(_sharded(mesh, x),),
        reference=lambda: np.broadcast_to(x.reshape(1, -1), (DEVICES, x.size)),
        rtol=0.0,
        atol=0.0,  # pure data movement: bit-exact
        flops=flops,  # 0.0, see all_gather_cost
        bytes_accessed=nbytes,
        bytes_moved=float(size),  # NCCL-tests: all-gather algbw = gathered (output) bytes per device / time
    )


@benchmark(suite="collectives", params=_GRID, quick=_QUICK, devices=DEVICES, cost=reduce_scatter_cost)
def reduce_scatter(size_kib: int) -> Case:
    mesh = _mesh()
    x = _per_device_inputs(_elements(size_kib), seed=62)
    size = x[0].nbytes  # the input buffer each device starts with
    chunk = x.shape[1] // DEVICES
    flops, nbytes = reduce_scatter_cost(size_kib)
    return Case(
        # Device i ends with chunk i of the sum (scatter_dimension=1, tiled: the chunk keeps its row shape).
        fn=_shard_mapped(mesh, lambda block: jax.lax.psum_scatter(block, AXIS, scatter_dimension=1, tiled=True)),
        args=(_sharded(mesh, x),),
        reference=lambda: x.astype(np.float64).sum(axis=0).reshape(DEVICES, chunk),
        rtol=_RTOL,
        atol=_ATOL,
        flops=flops,  # see reduce_scatter_cost
        bytes_accessed=nbytes,
        bytes_moved=float(size),  # NCCL-tests: reduce-scatter algbw = input bytes per device / time
    )


def ring_all_reduce(block: jax.Array) -> jax.Array:
    """All-reduce by hand as NCCL's ring does it, from ``ppermute`` (send to the right-hand neighbour).

    The buffer is cut into n chunks. Reduce-scatter phase, n-1 steps: at step s device i sends its partial sum of
    chunk (i - s) mod n and adds what it receives into chunk (i - s - 1) mod n; afterwards device i holds the full
    sum of chunk (i + 1) mod n. All-gather phase, n-1 steps: each device forwards the last completed chunk it
    has, so every device ends with every reduced chunk. Each device sends 2(n-1)/n of the buffer in all, the
    bandwidth-optimal amount.
    """
    n = DEVICES
    me = jax.lax.axis_index(AXIS)
    chunks = block.reshape(n, -1)  # this device's (1, size) row, as n chunks
    right = [(j, (j + 1) % n) for j in range(n)]

    def take(index: jax.Array) -> jax.Array:
        return jax.lax.dynamic_index_in_dim(chunks, index % n, axis=0, keepdims=False)

    # A Python loop: n-1 = 7 steps per phase, each a distinct ppermute the scheduler can overlap with the adds.
    for step in range(n - 1):
        received = jax.lax.ppermute(take(me - step), AXIS, right)
        target = (me - step - 1) % n
        chunks = jax.lax.dynamic_update_index_in_dim(chunks, take(target) + received, target, axis=0)
    for step in range(n - 1):
        received = jax.lax.ppermute(take(me + 1 - step), AXIS, right)
        chunks = jax.lax.dynamic_update_index_in_dim(chunks, received, (me - step) % n, axis=0)
    return chunks.reshape(block.shape)


@benchmark(suite="collectives", params=_GRID, quick=_QUICK, devices=DEVICES, cost=ring_all_reduce_ppermute_cost)
def ring_all_reduce_ppermute(size_kib: int) -> Case:
    mesh = _mesh()
    # Same inputs and same output layout as all_reduce, so the two series compare directly.
    x = _per_device_inputs(_elements(size_kib), seed=60)
    size = x[0].nbytes
    flops, nbytes = ring_all_reduce_ppermute_cost(size_kib)
    return Case(
        fn=_shard_mapped(mesh, ring_all_reduce),
        args=(_sharded(mesh, x),),
        reference=lambda: np.broadcast_to(x.astype(np.float64).sum(axis=0), x.shape),
        rtol=_RTOL,
        atol=_ATOL,
        flops=flops,  # see ring_all_reduce_ppermute_cost
        bytes_accessed=nbytes,
        bytes_moved=float(size),  # NCCL-tests all-reduce convention, as for all_reduce
    )
