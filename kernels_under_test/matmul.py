"""Dense matrix multiplication, the MXU's (and the tensor core's) bread and butter."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from runners.suite import Case, benchmark, grid, on_backend


def matmul(a: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:
    return jnp.matmul(a, b, preferred_element_type=jnp.float32)


def matmul_dense_cost(m: int, n: int, k: int, dtype: str) -> tuple[float, float]:
    """2*m*n*k FLOPs (a multiply and an add per term); operands read once in ``dtype``, f32 result written once."""
    return 2.0 * m * n * k, float((m * k + k * n) * np.dtype(dtype).itemsize + m * n * 4)


@benchmark(suite="matmul", params=grid(m=[256, 512], n=[512], k=[512], dtype=["float32"]), cost=matmul_dense_cost)
def matmul_dense(m: int, n: int, k: int, dtype: str) -> Case:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(dtype)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(dtype)
    _, nbytes = matmul_dense_cost(m, n, k, dtype)
    return Case(
        fn=matmul,
        args=(a, b),
        reference=lambda: a.astype(np.float64) @ b.astype(np.float64),
        # float32 accumulation over k terms of unit-variance products: error grows like sqrt(k) * eps; an
        # accelerator's TF32 inputs make it five times that.
        rtol=1e-4,
        atol=on_backend(1e-3, 5e-3) * np.sqrt(k),
        # As matmul_dense_cost (which test_predict_command checks against this): spelled out here too, since the
        # demo repository (service/demo.py) edits this very line.
        flops=2.0 * m * n * k,
        bytes_accessed=nbytes,
    )


# bf16 matmul shapes: square (training-like), skinny M (decode: one or a few tokens against a weight matrix,
# memory-bound) and a prefill-like M=1024 against a modest weight. K and N stay <= 1024 so that every point
# runs in milliseconds on a CPU host (this module is also the demo's suite, run at ten commits).
_BF16_SHAPES: tuple[dict[str, int | float | str | bool], ...] = (
    {"m": 512, "n": 512, "k": 512},
    {"m": 1024, "n": 1024, "k": 1024},
    {"m": 1, "n": 1024, "k": 1024},
    {"m": 16, "n": 1024, "k": 1024},
    {"m": 1024, "n": 512, "k": 512},
)


def matmul_bf16_cost(m: int, n: int, k: int) -> tuple[float, float]:
    """2*m*k*n: a multiply and an add per term; bytes: bf16 operands read once, f32 result written once."""
    return 2.0 * m * k * n, float((m * k + k * n) * 2 + m * n * 4)


@benchmark(
    suite="matmul",
    params=_BF16_SHAPES,
    cost=matmul_bf16_cost,
    quick=[{"m": 512, "n": 512, "k": 512}, {"m": 1, "n": 1024, "k": 1024}, {"m": 1024, "n": 512, "k": 512}],
)
def matmul_bf16(m: int, n: int, k: int) -> Case:
    rng = np.random.default_rng(2)
    # Round the inputs to bf16 here, once: the reference then sees exactly the operands the kernel sees, and
    # the only error left to tolerate is the kernel's float32 accumulation (bf16 products are exact in f32).
    a = rng.standard_normal((m, k), dtype=np.float32).astype(jnp.bfloat16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(jnp.bfloat16)
    return Case(
        fn=matmul,
        args=(a, b),
        reference=lambda: a.astype(np.float64) @ b.astype(np.float64),
        # Same float32-accumulation bound as matmul_dense: sums of k unit-variance terms, error ~ sqrt(k) * eps.
        rtol=1e-4,
        atol=1e-3 * np.sqrt(k),
        flops=matmul_bf16_cost(m, n, k)[0],  # see matmul_bf16_cost
        bytes_accessed=matmul_bf16_cost(m, n, k)[1],
    )
