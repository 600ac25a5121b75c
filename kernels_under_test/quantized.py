"""Quantised matrix multiplication: int8 weight-only (per-output-channel scales) and fp8 (e4m3, per-tensor scales).

Two questions per kernel, kept apart on purpose:
- correctness, judged tightly: the reference is the float64 product of the *dequantised* operands, so the
  only tolerated error is the kernel's float32 accumulation (and nothing a quantisation bug could hide in);
- what the quantisation costs, reported as the quality metric ``rel_error``: the relative Frobenius error of
  the output against the float64 product of the *original* float32 operands. A change that makes it grow
  (a coarser scale, a wrong rounding mode) is a regression even if the kernel got faster.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from runners.suite import Case, QualityMetric, benchmark, grid, on_backend

# The largest finite float8_e4m3fn value: per-tensor scales map each tensor's max |x| onto it.
FP8_E4M3_MAX = float(jnp.finfo(jnp.float8_e4m3fn).max)


def _f32_tol() -> float:
    """Tolerance of a product with float32 activations (outputs O(1)) on the backend the case runs on.

    Accelerators run float32 matmuls at reduced input precision by default (TF32 on NVIDIA GPUs, bf16 passes on
    TPU), ~1e-3 relative; CPU computes them in float32. Factories run in the benchmark's own process, so CPU keeps
    the tight check; a quantisation bug (a wrong scale, a wrong axis) costs O(1) anyway. A function rather than a
    constant so that importing the module initialises no backend.
    """
    return on_backend(1e-4, 5e-3)


def _relative_error_metric(exact: Callable[[], np.ndarray]) -> Callable[[object], list[QualityMetric]]:
    """Quality callback: ||out - exact||_F / ||exact||_F, with ``exact`` the unquantised float64 product."""

    def quality(output: object) -> list[QualityMetric]:
        want = exact()
        got = np.asarray(output, dtype=np.float64)
        rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        return [QualityMetric("rel_error", rel, "1", "lower_is_better")]

    return quality


# --- int8 weight-only ------------------------------------------------------------------------------------------


def int8_weight_only_matmul(x: jnp.ndarray, w_q: jnp.ndarray, scale: jnp.ndarray) -> jnp.ndarray:
    # Dequantise inside the jitted function, in float32 (int8 * f32 scale), then cast to the activation dtype:
    # the weight travels through memory as int8, which is the whole point of weight-only quantisation, and XLA
    # may fuse the convert/multiply into the producer of the dot's operand.
    w = (w_q.astype(jnp.float32) * scale[None, :]).astype(x.dtype)
    return jnp.matmul(x, w, preferred_element_type=jnp.float32)


def quantize_int8_per_channel(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-output-channel int8: column j is scaled so that its max |w| maps onto 127."""
    scale = (np.abs(w).max(axis=0) / 127.0).astype(np.float32)
    scale = np.where(scale == 0, np.float32(1.0), scale).astype(np.float32)
    w_q = np.clip(np.rint(w / scale[None, :]), -127, 127).astype(np.int8)
    return w_q, scale


def _activation_dtype(act_dtype: str) -> np.dtype:
    """The activations' dtype: bfloat16 when asked for, float32 otherwise."""
    return np.dtype(jnp.bfloat16 if act_dtype == "bfloat16" else np.float32)


def int8_weight_only_cost(m: int, k: int, n: int, act_dtype: str) -> tuple[float, float]:
    """2*m*k*n for the product plus one multiply per weight for the dequantisation; bytes: int8 weight + f32
    scales + activation read once, f32 output written once."""
    itemsize = _activation_dtype(act_dtype).itemsize
    return 2.0 * m * k * n + float(k * n), float(k * n * 1 + n * 4 + m * k * itemsize + m * n * 4)


@benchmark(
    suite="quantized",
    params=grid(m=[1, 16, 256], k=[1024, 2048], n=[1024], act_dtype=["bfloat16", "float32"]),
    cost=int8_weight_only_cost,
    quick=[
        {"m": 16, "k": 1024, "n": 1024, "act_dtype": "bfloat16"},
        {"m": 256, "k": 1024, "n": 1024, "act_dtype": "float32"},
    ],
)
def int8_weight_only(m: int, k: int, n: int, act_dtype: str) -> Case:
    rng = np.random.default_rng(10)
    x32 = rng.standard_normal((m, k), dtype=np.float32)
    # Weights of a trained layer are roughly N(0, 1/k); the scale does not matter for relative errors but
    # keeps the outputs O(1) like a real layer's.
    w32 = (rng.standard_normal((k, n), dtype=np.float32) / np.sqrt(k)).astype(np.float32)
    w_q, scale = quantize_int8_per_channel(w32)
    dtype = _activation_dtype(act_dtype)
    x = x32.astype(dtype)
    flops, nbytes = int8_weight_only_cost(m, k, n, act_dtype)

    def reference() -> np.ndarray:
        # The operands exactly as the kernel builds them: the weight dequantised in float32 and rounded to the
        # activation dtype (a no-op for float32), the activation already in its dtype; then a float64 product.
        w_deq = (w_q.astype(np.float32) * scale[None, :]).astype(dtype)
        return x.astype(np.float64) @ w_deq.astype(np.float64)

    return Case(
        fn=int8_weight_only_matmul,
        args=(x, w_q, scale),
        reference=reference,
        # Only float32 accumulation error is left (bf16 operands multiply exactly in float32): outputs are O(1),
        # sums of k terms of size ~1/sqrt(k). float32 activations may also meet TF32 on an accelerator: _f32_tol.
        rtol=1e-4 if act_dtype == "bfloat16" else _f32_tol(),
        atol=1e-4 if act_dtype == "bfloat16" else _f32_tol(),
        quality=_relative_error_metric(lambda: x32.astype(np.float64) @ w32.astype(np.float64)),
        flops=flops,  # see int8_weight_only_cost
        bytes_accessed=nbytes,
    )


# --- fp8 (e4m3) with per-tensor scales ------------------------------------------------------------------------


def fp8_scaled_matmul(a: jnp.ndarray, b: jnp.ndarray, a_scale: jnp.ndarray, b_scale: jnp.ndarray) -> jnp.ndarray:
    # The fp8 product accumulates in float32; the two per-tensor scales factor out of the sum, so they are
    # applied once to the output instead of once per operand element.
    out = jnp.matmul(a, b, preferred_element_type=jnp.float32)
    return out * (a_scale * b_scale)


def quantize_fp8_per_tensor(t: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """Per-tensor scale mapping max |t| onto the e4m3 maximum, then round-to-nearest into float8_e4m3fn."""
    scale = np.float32(np.abs(t).max() / FP8_E4M3_MAX)
    return (t / scale).astype(jnp.float8_e4m3fn), scale


def fp8_per_tensor_cost(m: int, k: int, n: int) -> tuple[float, float]:
    """2*m*k*n for the product plus one multiply per output element for the scales; bytes: both fp8 operands
    read once (1 byte each), f32 output written once."""
    return 2.0 * m * k * n + float(m * n), float(m * k + k * n + m * n * 4)


@benchmark(
    suite="quantized",
    params=grid(m=[16, 256, 1024], k=[1024], n=[1024]),
    cost=fp8_per_tensor_cost,
    quick=[{"m": 16, "k": 1024, "n": 1024}, {"m": 256, "k": 1024, "n": 1024}],
)
def fp8_per_tensor(m: int, k: int, n: int) -> Case:
    rng = np.random.default_rng(11)
    a32 = rng.standard_normal((m, k), dtype=np.float32)
    b32 = (rng.standard_normal((k, n), dtype=np.float32) / np.sqrt(k)).astype(np.float32)
    a, a_scale = quantize_fp8_per_tensor(a32)
    b, b_scale = quantize_fp8_per_tensor(b32)
    # 0-d arrays rather than Python floats: the scales are runtime inputs (they change with every batch of
    # activations), so XLA must not fold them into the program as constants.
    a_scale_arr = np.asarray(a_scale, dtype=np.float32)
    b_scale_arr = np.asarray(b_scale, dtype=np.float32)
    flops, nbytes = fp8_per_tensor_cost(m, k, n)

    def reference() -> np.ndarray:
        a_deq = a.astype(np.float64) * np.float64(a_scale)
        b_deq = b.astype(np.float64) * np.float64(b_scale)
        return a_deq @ b_deq

    return Case(
        fn=fp8_scaled_matmul,
        args=(a, b, a_scale_arr, b_scale_arr),
        reference=reference,
        # fp8 products are exact in float32; what is left is accumulation and the final scaling. 1e-3 rather than
        # 1e-4 on a CPU; on an accelerator 5e-3: fp8 GEMMs on Hopper accumulate with fewer than 23 mantissa bits (an
        # H200 gave 1.7e-3 at m = 256). Still far below the ~4e-2 that quantisation itself costs (rel_error), so a
        # wrong scale cannot pass.
        rtol=on_backend(1e-3, 5e-3),
        atol=on_backend(1e-3, 5e-3),
        quality=_relative_error_metric(lambda: a32.astype(np.float64) @ b32.astype(np.float64)),
        flops=flops,  # see fp8_per_tensor_cost
        bytes_accessed=nbytes,
    )
