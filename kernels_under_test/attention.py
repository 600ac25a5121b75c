"""Attention: a Pallas flash-attention forward kernel, the plain XLA attention it replaces, and decode-time paged
attention over a shared pool of fixed-size K/V pages.

On a CPU host Pallas runs in interpret mode (the kernel body is evaluated as ordinary JAX ops over a scan of the
grid), which is slow and says little about the GPU/TPU kernel's speed; the quick points are therefore small.
What it does catch on CPU is a wrong answer and a change in the amount of work the kernel does.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from runners.suite import Case, benchmark, grid

# A large finite negative instead of -inf for masked scores: exp() of it is 0, and (unlike -inf) subtracting
# it from itself cannot produce NaN when a whole block of a row is masked.
MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)


def _tol() -> float:
    """Absolute tolerance of the float32 attention outputs (|o| < ~1) on the backend the case runs on.

    Accelerators run float32 matmuls at reduced input precision by default (TF32 on NVIDIA GPUs, bf16 passes on
    TPU): ~1e-3 relative error in the scores, against ~1e-7 on CPU. Factories run in the benchmark's own process,
    so CPU keeps the tight check. A wrong mask or softmax moves outputs by O(0.1-1), far above either. A function
    rather than a constant so that importing the module initialises no backend.
    """
    return 1e-5 if jax.default_backend() == "cpu" else 5e-3


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v in float64, batch and heads leading: (b, h, s, d)."""
    q64, k64, v64 = (t.astype(np.float64) for t in (q, k, v))
    scores = (q64 @ k64.swapaxes(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        seq_q, seq_k = scores.shape[-2:]
        keep = np.arange(seq_q)[:, None] >= np.arange(seq_k)[None, :]
        scores = np.where(keep, scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v64


def _attention_inputs(batch: int, heads: int, seq: int, head_dim: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    shape = (batch, heads, seq, head_dim)
    return tuple(rng.standard_normal(shape, dtype=np.float32) for _ in range(3))


def _attention_cost(batch: int, heads: int, seq: int, head_dim: int, causal: bool) -> tuple[float, float]:
    """(flops, bytes) of one forward pass: two matmuls of 2*s*s*d FLOPs per head (QK^T and PV), halved by a
    causal mask; bytes: q, k, v read once and the output written once, in float32 (scores stay on chip)."""
    flops = 4.0 * batch * heads * seq * seq * head_dim
    if causal:
        flops /= 2.0
    return flops, 4.0 * batch * heads * seq * head_dim * 4


# --- (a) Pallas flash attention ------------------------------------------------------------------------------------


# The online-softmax state carried across key/value blocks: (accumulator, running max, running denominator).
_Carry = tuple[jax.Array, jax.Array, jax.Array]


def _flash_kernel(q_ref: Any, k_ref: Any, v_ref: Any, o_ref: Any, *, block_q: int, block_k: int, causal: bool,
                  sm_scale: float) -> None:
    """One program computes one block of queries for one (batch, head): it streams over the key/value blocks
    keeping a running max ``m``, a running denominator ``l`` and an unnormalised accumulator (online softmax),
    so the seq x seq score matrix never exists in memory."""
    q_index = pl.program_id(2)
    q = q_ref[...].astype(jnp.float32) * sm_scale  # scaling q once is cheaper than scaling every score block
    head_dim = q.shape[-1]
    seq_k = k_ref.shape[0]

    def body(kv_index: jax.Array, carry: _Carry) -> _Carry:
        acc, m_prev, l_prev = carry
        start = pl.multiple_of(kv_index * block_k, block_k)
        k = k_ref[pl.ds(start, block_k), :].astype(jnp.float32)
        v = v_ref[pl.ds(start, block_k), :].astype(jnp.float32)
        # q @ k^T written as a dot_general contracting head_dim, so no transpose of k is materialised.
        s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
        if causal:
            rows = q_index * block_q + jax.lax.broadcasted_iota(jnp.int32, (block_q, block_k), 0)
            cols = start + jax.lax.broadcasted_iota(jnp.int32, (block_q, block_k), 1)
            s = jnp.where(rows >= cols, s, MASK_VALUE)
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1))
        # Rescale what was accumulated under the old max before adding this block's contribution.
        correction = jnp.exp(m_prev - m_new)
        p = jnp.exp(s - m_new[:, None])
        l_new = correction * l_prev + jnp.sum(p, axis=-1)
        acc = acc * correction[:, None] + jnp.dot(p, v, preferred_element_type=jnp.float32)
        return acc, m_new, l_new

    if causal:
        # Key blocks entirely above the diagonal contribute nothing: stop at the last one this query block sees.
        num_kv = pl.cdiv((q_index + 1) * block_q, block_k)
    else:
        num_kv = seq_k // block_k
    init = (
        jnp.zeros((block_q, head_dim), jnp.float32),
        jnp.full((block_q,), -jnp.inf, jnp.float32),
        jnp.zeros((block_q,), jnp.float32),
    )
    acc, _, l_final = jax.lax.fori_loop(0, num_kv, body, init)
    o_ref[...] = (acc / l_final[:, None]).astype(o_ref.dtype)


def flash_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, causal: bool, block_q: int = 64,
                    block_k: int = 64) -> jax.Array:
    """Flash-attention forward over (batch, heads, seq, head_dim) inputs."""
    batch, heads, seq, head_dim = q.shape
    if seq % block_q or seq % block_k:
        raise ValueError(f"seq {seq} must be a multiple of block_q {block_q} and block_k {block_k}")
    kernel = functools.partial(_flash_kernel, block_q=block_q, block_k=block_k, causal=causal,
                               sm_scale=1.0 / math.sqrt(head_dim))
    # The grid walks (batch, head, query block); None squeezes batch and head out of the kernel's refs. K and V
    # are handed over whole per (batch, head) and sliced inside the kernel's loop.
    q_spec = pl.BlockSpec((None, None, block_q, head_dim), lambda b, h, i: (b, h, i, 0))
    kv_spec = pl.BlockSpec((None, None, seq, head_dim), lambda b, h, i: (b, h, 0, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(batch, heads, seq // block_q),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        # Interpret on CPU (Pallas has no CPU compiler); compiled (Triton/Mosaic) on GPU and TPU. Decided at
        # trace time, i.e. on the backend the benchmark actually runs on.
        interpret=jax.default_backend() == "cpu",
    )(q, k, v)


@benchmark(
    suite="attention",
    params=grid(batch=[1], heads=[1, 2], seq=[128, 256, 512, 1024], head_dim=[64], causal=[False, True]),
    quick=[
        {"batch": 1, "heads": 2, "seq": 256, "head_dim": 64, "causal": False},
        {"batch": 1, "heads": 1, "seq": 256, "head_dim": 64, "causal": True},
    ],
    timeout_s=120,
    cost=_attention_cost,
)
def flash_attention_pallas(batch: int, heads: int, seq: int, head_dim: int, causal: bool) -> Case:
    q, k, v = _attention_inputs(batch, heads, seq, head_dim, seed=20)
    flops, nbytes = _attention_cost(batch, heads, seq, head_dim, causal)
    return Case(
        fn=functools.partial(flash_attention, causal=causal),
        args=(q, k, v),
        reference=lambda: attention_reference(q, k, v, causal),
        # Outputs are convex combinations of N(0,1) values, |o| < ~1; see _tol.
        rtol=10 * _tol(),
        atol=_tol(),
        flops=flops,  # see _attention_cost: 4*b*h*s*s*d (halved when causal)
        bytes_accessed=nbytes,  # q, k, v in and o out, float32
    )


# --- (b) plain XLA attention -----------------------------------------------------------------------------------


def attention_xla_cost(batch: int, heads: int, seq: int, head_dim: int, causal: bool) -> tuple[float, float]:
    """4*b*h*s*s*d FLOPs: QK^T and PV over the full square even when causal (XLA computes the masked half too);
    bytes: q, k, v in and o out, plus the float32 score matrix written and read back once."""
    flops, _ = _attention_cost(batch, heads, seq, head_dim, causal=False)
    return flops, 4.0 * batch * heads * (4 * seq * head_dim + 2 * seq * seq)


def xla_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, causal: bool) -> jax.Array:
    """The textbook formulation XLA fuses as it can: the full score matrix is materialised."""
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        seq_q, seq_k = scores.shape[-2:]
        keep = jnp.arange(seq_q)[:, None] >= jnp.arange(seq_k)[None, :]
        scores = jnp.where(keep, scores, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


@benchmark(
    suite="attention",
    params=grid(batch=[1], heads=[1, 2, 4], seq=[256, 512, 1024, 2048], head_dim=[64], causal=[False, True]),
    # The first quick point is the Pallas kernel's first quick point, so the two series compare directly.
    quick=[{"batch": 1, "heads": 2, "seq": 256, "head_dim": 64, "causal": False},
           {"batch": 1, "heads": 4, "seq": 1024, "head_dim": 64, "causal": True}],
    cost=attention_xla_cost,
)
def attention_xla(batch: int, heads: int, seq: int, head_dim: int, causal: bool) -> Case:
    q, k, v = _attention_inputs(batch, heads, seq, head_dim, seed=20)
    flops, nbytes = attention_xla_cost(batch, heads, seq, head_dim, causal)
    return Case(
        fn=functools.partial(xla_attention, causal=causal),
        args=(q, k, v),
        reference=lambda: attention_reference(q, k, v, causal),
        rtol=10 * _tol(),
        atol=_tol(),
        flops=flops,  # see attention_xla_cost
        bytes_accessed=nbytes,
    )


# --- (c) decode-time paged attention -------------------------------------------------------------------------


def paged_attention(q: jax.Array, k_pages: jax.Array, v_pages: jax.Array, block_tables: jax.Array,
                    lengths: jax.Array) -> jax.Array:
    """One query token per sequence against that sequence's K/V, scattered over pages of a shared pool.

    q: (batch, heads, d); k_pages, v_pages: (num_pages, page_size, heads, d); block_tables: (batch,
    pages_per_seq) int32, logical page -> physical page; lengths: (batch,) int32, tokens in each sequence.
    """
    batch, pages_per_seq = block_tables.shape
    _, page_size, heads, head_dim = k_pages.shape
    max_len = pages_per_seq * page_size
    # Gather each sequence's pages in logical order; positions past its length are garbage and get masked.
    k = k_pages[block_tables].reshape(batch, max_len, heads, head_dim)
    v = v_pages[block_tables].reshape(batch, max_len, heads, head_dim)
    scores = jnp.einsum("bhd,bthd->bht", q, k) / math.sqrt(head_dim)
    valid = jnp.arange(max_len)[None, None, :] < lengths[:, None, None]
    scores = jnp.where(valid, scores, -jnp.inf)
    return jnp.einsum("bht,bthd->bhd", jax.nn.softmax(scores, axis=-1), v)


def paged_attention_reference(q: np.ndarray, k_pages: np.ndarray, v_pages: np.ndarray, block_tables: np.ndarray,
                              lengths: np.ndarray) -> np.ndarray:
    """Sequence by sequence in float64: walk the block table, keep exactly ``length`` tokens, attend."""
    page_size = k_pages.shape[1]
    out = np.empty(q.shape, dtype=np.float64)
    for b in range(q.shape[0]):
        n = int(lengths[b])
        pages = block_tables[b, : -(-n // page_size)]
        k = np.concatenate([k_pages[p] for p in pages]).astype(np.float64)[:n]  # (n, heads, d)
        v = np.concatenate([v_pages[p] for p in pages]).astype(np.float64)[:n]
        scores = np.einsum("hd,thd->ht", q[b].astype(np.float64), k) / math.sqrt(q.shape[-1])
        scores -= scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        out[b] = np.einsum("ht,thd->hd", p, v)
    return out


def paged_attention_cost(batch: int, heads: int, head_dim: int, page_size: int, max_len: int) -> tuple[float, float]:
    """4*b*h*max_len*d FLOPs: q.k and p.v over every gathered slot (the kernel computes masked slots too); bytes:
    the gathered K and V pages (float32), q in and out, block table and lengths (int32)."""
    pages_per_seq = max_len // page_size
    flops = 4.0 * batch * heads * max_len * head_dim
    nbytes = 4.0 * (2 * batch * max_len * heads * head_dim + 2 * batch * heads * head_dim) \
        + 4.0 * (batch * pages_per_seq + batch)
    return flops, nbytes


@benchmark(
    suite="attention",
    params=grid(batch=[8, 32], heads=[8], head_dim=[64], page_size=[16], max_len=[512, 2048]),
    quick=[{"batch": 8, "heads": 8, "head_dim": 64, "page_size": 16, "max_len": 512}],
    cost=paged_attention_cost,
)
def paged_attention_decode(batch: int, heads: int, head_dim: int, page_size: int, max_len: int) -> Case:
    rng = np.random.default_rng(21)
    pages_per_seq = max_len // page_size
    # A pool with spare pages, handed out in a shuffled order: physical pages of one sequence are neither
    # contiguous nor in order, as in a real server after some sequences came and went.
    num_pages = batch * pages_per_seq + 2 * pages_per_seq
    physical = rng.permutation(num_pages).astype(np.int32)
    block_tables = physical[: batch * pages_per_seq].reshape(batch, pages_per_seq)
    # Ragged lengths, including a full sequence, a one-token sequence and one ending inside a page.
    lengths = rng.integers(1, max_len + 1, size=batch).astype(np.int32)
    lengths[0], lengths[1], lengths[2] = max_len, 1, page_size + 3
    # Table entries past a sequence's last page point at page 0, as an allocator's padding would.
    used = -(-lengths // page_size)
    block_tables = np.where(np.arange(pages_per_seq)[None, :] < used[:, None], block_tables, 0).astype(np.int32)
    q = rng.standard_normal((batch, heads, head_dim), dtype=np.float32)
    k_pages = rng.standard_normal((num_pages, page_size, heads, head_dim), dtype=np.float32)
    v_pages = rng.standard_normal((num_pages, page_size, heads, head_dim), dtype=np.float32)
    return Case(
        fn=paged_attention,
        args=(q, k_pages, v_pages, block_tables, lengths),
        reference=lambda: paged_attention_reference(q, k_pages, v_pages, block_tables, lengths),
        rtol=10 * _tol(),
        atol=_tol(),
        flops=paged_attention_cost(batch, heads, head_dim, page_size, max_len)[0],  # see paged_attention_cost
        bytes_accessed=paged_attention_cost(batch, heads, head_dim, page_size, max_len)[1],
    )
