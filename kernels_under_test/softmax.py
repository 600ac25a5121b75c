"""Row-wise softmax over long rows, as in attention scores and a sampler's logits."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from runners.suite import Case, benchmark, grid


def softmax(x: jnp.ndarray) -> jnp.ndarray:
    # Subtracting the row max keeps exp() in range;
    # XLA fuses max, exp, sum and divide into few passes over the row.
    row_max = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x - row_max)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def softmax_reference(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_rows_cost(rows: int, cols: int) -> tuple[float, float]:
    """max, subtract, exp, sum, divide: about five operations per element; one f32 read and one write."""
    return 5.0 * rows * cols, 2.0 * rows * cols * 4


@benchmark(suite="softmax", params=grid(rows=[256, 1024], cols=[4096]), cost=softmax_rows_cost)
def softmax_rows(rows: int, cols: int) -> Case:
    x = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32) * 4.0
    return Case(
        fn=softmax,
        args=(x,),
        reference=lambda: softmax_reference(x),
        rtol=1e-4,
        atol=1e-6,
        flops=softmax_rows_cost(rows, cols)[0],  # see softmax_rows_cost
        bytes_accessed=softmax_rows_cost(rows, cols)[1],
    )
