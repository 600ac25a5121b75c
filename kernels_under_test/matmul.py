"""Dense matrix multiplication, the MXU's (and the tensor core's) bread and butter."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from runners.suite import Case, benchmark, grid


def matmul(a: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:
    return jnp.matmul(a, b, preferred_element_type=jnp.float32)


@benchmark(suite="matmul", params=grid(m=[256, 512], n=[512], k=[512], dtype=["float32"]))
def matmul_dense(m: int, n: int, k: int, dtype: str) -> Case:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(dtype)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(dtype)
    itemsize = np.dtype(dtype).itemsize
    return Case(
        fn=matmul,
        args=(a, b),
        reference=lambda: a.astype(np.float64) @ b.astype(np.float64),
        # float32 accumulation over k terms of unit-variance products: error grows like sqrt(k) * eps.
        rtol=1e-4,
        atol=1e-3 * np.sqrt(k),
        flops=2.0 * m * n * k,
        bytes_accessed=float((m * k + k * n) * itemsize + m * n * 4),
    )
