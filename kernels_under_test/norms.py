"""RMSNorm and LayerNorm, fused and unfused.

Both norms are memory-bound. The fused form is one jitted expression that XLA fuses as it can (on GPU a single
row-reduction kernel; on CPU a reduction and an elementwise loop). The unfused form runs the same arithmetic op
by op and writes every intermediate (x², the mean, x - mean, the normalised x...) to memory and reads it back, as
an eager framework's one-kernel-per-op execution would. The gap between the two series is what fusion buys; a
change that breaks fusion shows up as the fused series moving onto the unfused one.

How the unfused form forces materialisation: neither of the obvious tools works inside one jitted function.
XLA removes ``jax.lax.optimization_barrier`` before fusion (its OptimizationBarrierExpander pass; on jax 0.10.2
CPU the optimised HLO with barriers is identical to the fused one) and inlines nested ``jax.jit`` calls. What no
fusion crosses is a conditional: its branches are separate computations, so its operand and its result are
buffers in memory. Each step's result therefore goes through a ``lax.cond`` on a runtime flag (always True,
passed as an input so XLA cannot fold the conditional away). On GPU the conditional also costs a predicate
read-back per step, much like the launch gaps between eager kernels.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from runners.suite import Case, Params, benchmark, grid

EPS = 1e-6

# The runtime flag of the unfused form's conditionals: an input, not a constant, so XLA cannot fold it.
_KEEP = np.bool_(True)


def _materialise(t: jax.Array, keep: jax.Array) -> jax.Array:
    """``t`` itself, written to memory: a conditional is a fusion boundary (see the module docstring).

    The False branch never runs; it only has to differ from the True branch (with two identical branches XLA's
    conditional simplifier removes the conditional, and the step becomes fusible elementwise code again).
    """
    return jax.lax.cond(keep, lambda a: a, lambda a: jnp.full_like(a, jnp.nan), t)


def _step(keep: jax.Array | None) -> Callable[[jax.Array], jax.Array]:
    """Identity for the fused form (no flag); a materialising step for the unfused form."""
    if keep is None:
        return lambda t: t
    return lambda t: _materialise(t, keep)


def rms_norm(x: jax.Array, weight: jax.Array, keep: jax.Array | None = None) -> jax.Array:
    """RMSNorm over the last axis: fused without ``keep``; op by op, every intermediate in memory, with it."""
    step = _step(keep)
    squares = step(jnp.square(x))
    mean_square = step(jnp.mean(squares, axis=-1, keepdims=True))
    normalised = step(x * jax.lax.rsqrt(mean_square + EPS))
    return normalised * weight


def layer_norm(x: jax.Array, weight: jax.Array, bias: jax.Array, keep: jax.Array | None = None) -> jax.Array:
    """LayerNorm over the last axis: fused without ``keep``; op by op with it (see rms_norm)."""
    step = _step(keep)
    mean = step(jnp.mean(x, axis=-1, keepdims=True))
    centred = step(x - mean)
    squares = step(jnp.square(centred))
    var = step(jnp.mean(squares, axis=-1, keepdims=True))
    normalised = step(centred * jax.lax.rsqrt(var + EPS))
    return step(normalised * weight) + bias


def rms_norm_reference(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + EPS) * weight.astype(np.float64)


def layer_norm_reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    centred = x64 - x64.mean(axis=-1, keepdims=True)
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + EPS) * weight.astype(np.float64) + bias.astype(np.float64)


def _inputs(rows: int, hidden: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    # A non-zero mean and a scale away from 1 make LayerNorm's centring and both norms' scaling matter.
    x = (rng.standard_normal((rows, hidden), dtype=np.float32) * 3.0 + 0.5).astype(np.float32)
    weight = (1.0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)
    bias = (0.1 * rng.standard_normal(hidden)).astype(np.float32)
    return x, weight, bias


_NORM_GRID = grid(rows=[1024, 4096], hidden=[1024, 4096], fused=[True, False])
# The same shape fused and unfused: the pair whose gap is what fusion buys.
_NORM_QUICK: list[Params] = [{"rows": 1024, "hidden": 4096, "fused": fused} for fused in (True, False)]


def rmsnorm_cost(rows: int, hidden: int, fused: bool) -> tuple[float, float]:
    """Per element: square, add (mean), multiply by rsqrt, multiply by weight = 4 FLOPs (rsqrt per row ignored).
    Bytes: the ideal (fused) traffic for both forms, so their times compare: x read once, output written once,
    weight read once; float32. The unfused form moves ~2 more row-sized arrays out and back in."""
    return 4.0 * rows * hidden, 4.0 * (2 * rows * hidden + hidden)


def layernorm_cost(rows: int, hidden: int, fused: bool) -> tuple[float, float]:
    """Per element: add (mean), subtract, square, add (variance), multiply by rsqrt, multiply, add = 7 FLOPs.
    Bytes: ideal (fused) traffic, as for rmsnorm: x read once, output written once, weight and bias read once."""
    return 7.0 * rows * hidden, 4.0 * (2 * rows * hidden + 2 * hidden)


@benchmark(suite="norms", params=_NORM_GRID, quick=_NORM_QUICK, cost=rmsnorm_cost)
def rmsnorm(rows: int, hidden: int, fused: bool) -> Case:
    x, weight, _ = _inputs(rows, hidden, seed=30)
    return Case(
        fn=rms_norm,
        args=(x, weight) if fused else (x, weight, _KEEP),
        reference=lambda: rms_norm_reference(x, weight),
        # float32 mean of `hidden` squares: relative error well below 1e-5.
        rtol=1e-5,
        atol=1e-5,
        flops=rmsnorm_cost(rows, hidden, fused)[0],  # see rmsnorm_cost
        bytes_accessed=rmsnorm_cost(rows, hidden, fused)[1],
    )


@benchmark(suite="norms", params=_NORM_GRID, quick=_NORM_QUICK, cost=layernorm_cost)
def layernorm(rows: int, hidden: int, fused: bool) -> Case:
    x, weight, bias = _inputs(rows, hidden, seed=31)
    return Case(
        fn=layer_norm,
        args=(x, weight, bias) if fused else (x, weight, bias, _KEEP),
        reference=lambda: layer_norm_reference(x, weight, bias),
        rtol=1e-5,
        atol=1e-5,
        flops=layernorm_cost(rows, hidden, fused)[0],  # see layernorm_cost
        bytes_accessed=layernorm_cost(rows, hidden, fused)[1],
    )
