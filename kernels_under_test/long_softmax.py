"""Softmax over very long rows (32k-128k columns, a handful of rows): a sampler's logits over a large vocabulary.

Few rows and long rows is the shape where a row-per-block kernel leaves most of the machine idle and a
multi-pass implementation pays for re-reading a row that no longer fits in cache, so it regresses
differently from the many-short-rows case of the ``softmax`` suite. A suite of its own ("softmax_long") so the
two families' series never mix.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from runners.suite import Case, benchmark, grid


def long_row_softmax(x: jax.Array) -> jax.Array:
    # Max-subtracted softmax in float32 whatever the input dtype: with 128k terms, a bf16 running sum would lose
    # the small probabilities entirely. The output keeps the input dtype.
    x32 = x.astype(jnp.float32)
    e = jnp.exp(x32 - jnp.max(x32, axis=-1, keepdims=True))
    return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)


def long_row_softmax_reference(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_long_rows_cost(rows: int, cols: int, dtype: str) -> tuple[float, float]:
    """max, subtract, exp, sum, divide: five operations per element; one read of the input and one write of
    the output in the input dtype (ideal fused traffic)."""
    itemsize = 2 if dtype == "bfloat16" else 4
    return 5.0 * rows * cols, 2.0 * rows * cols * itemsize


@benchmark(
    suite="softmax_long",
    cost=softmax_long_rows_cost,
    params=grid(rows=[1, 8], cols=[32768, 131072], dtype=["float32", "bfloat16"]),
    quick=[{"rows": 8, "cols": 32768, "dtype": "float32"}, {"rows": 8, "cols": 131072, "dtype": "float32"}],
)
def softmax_long_rows(rows: int, cols: int, dtype: str) -> Case:
    # Logits of a language model: a few units of spread, so the probabilities span many orders of magnitude.
    x32 = np.random.default_rng(40).standard_normal((rows, cols), dtype=np.float32) * 4.0
    x = x32.astype(jnp.bfloat16) if dtype == "bfloat16" else x32
    # Probabilities average 1/cols, so the absolute tolerance scales with it; the relative one is the output
    # dtype's rounding (bf16 keeps 8 bits of mantissa) plus float32 summation over cols terms.
    rtol = 1e-2 if dtype == "bfloat16" else 1e-4
    return Case(
        fn=long_row_softmax,
        args=(x,),
        reference=lambda: long_row_softmax_reference(x),
        rtol=rtol,
        atol=1e-3 / cols,
        flops=softmax_long_rows_cost(rows, cols, dtype)[0],  # see softmax_long_rows_cost
        bytes_accessed=softmax_long_rows_cost(rows, cols, dtype)[1],
    )
