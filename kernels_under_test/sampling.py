"""Token sampling over large vocabularies: exact top-k, approximate top-k, and top-p (nucleus) sampling.

Each works on a batch of logit rows (one per sequence being decoded) scaled by a temperature. The temperature is
a runtime input (a 0-d array), as it is in a serving stack, so XLA cannot fold it into the program.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from runners.suite import Case, QualityMetric, benchmark, grid


def _logits(batch: int, vocab: int, seed: int) -> np.ndarray:
    # Standard-normal logits scaled by 4: a peaked distribution like a language model's, where the nucleus at
    # p=0.9 holds a small fraction of the vocabulary and a wrong sampler is easy to catch.
    return (np.random.default_rng(seed).standard_normal((batch, vocab), dtype=np.float32) * 4.0).astype(np.float32)


def _scaled(logits: np.ndarray, temperature: float) -> np.ndarray:
    """The tempered logits in float64, the reference's view of the kernel's input."""
    return logits.astype(np.float64) / temperature


def _sampling_cost(batch: int, vocab: int, passes: float) -> tuple[float, float]:
    """A sort/selection is not a FLOP-bound operation; count ``passes`` operations per logit (compare-and-select
    steps, divisions) and one float32 read of the logits. Both are rough, and are there to normalise series."""
    return float(passes * batch * vocab), 4.0 * batch * vocab


# --- exact top-k ---------------------------------------------------------------------------------------------


def top_k_exact(logits: jax.Array, temperature: jax.Array, *, k: int) -> tuple[jax.Array, jax.Array]:
    # lax.top_k is the exact path: sorted values, and the lower index first among equal values.
    return jax.lax.top_k(logits / temperature, k)


def _exact_top_k(scaled: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy top-k: values in descending order and their indices (stable: lower index first on ties)."""
    order = np.argsort(-scaled, axis=-1, kind="stable")[:, :k]
    return np.take_along_axis(scaled, order, axis=-1), order.astype(np.int32)


def topk_exact_cost(batch: int, vocab: int, k: int, temperature: float) -> tuple[float, float]:
    """One division plus ~log2(k) comparisons per logit (a heap/partial-sort selection); the float32 logits read
    once, the k outputs per row negligible."""
    return _sampling_cost(batch, vocab, passes=1.0 + np.log2(k))


@benchmark(
    suite="sampling",
    params=grid(batch=[8], vocab=[32768, 131072, 262144], k=[8, 64], temperature=[0.7]),
    cost=topk_exact_cost,
    # A selection's time grows with k (2.8x from 8 to 64 at a 4k vocabulary here), which its memory-bound counts
    # cannot show: each k is a variant of its own to `kernelwatch predict`, its sizes the vocabulary.
    variants=("k",),
    quick=[{"batch": 8, "vocab": 32768, "k": 64, "temperature": 0.7}],
)
def topk_exact(batch: int, vocab: int, k: int, temperature: float) -> Case:
    logits = _logits(batch, vocab, seed=50)
    scaled = _scaled(logits, temperature)
    # Indices are compared exactly, so the top-k must be unambiguous: the k+1 largest tempered logits of every row
    # are further apart (relatively) than the ~6e-8 of a float32 rounding, so the kernel's float32 division cannot
    # tie or reorder them. A property of the fixed seed, asserted here so that a new seed cannot break it quietly.
    top = -np.sort(-scaled, axis=-1)[:, : k + 1]
    assert np.min(-np.diff(top, axis=-1) / np.abs(top[:, 1:])) > 1e-6, "near-ties in the top-k: change the seed"
    flops, nbytes = topk_exact_cost(batch, vocab, k, temperature)
    return Case(
        fn=functools.partial(top_k_exact, k=k),
        args=(logits, np.float32(temperature)),
        reference=lambda: _exact_top_k(scaled, k),
        # Values: one float32 division away from the float64 reference.
        rtol=1e-6,
        atol=1e-6,
        flops=flops,  # see topk_exact_cost
        bytes_accessed=nbytes,
    )


# --- approximate top-k ---------------------------------------------------------------------------------------


def top_k_approx(logits: jax.Array, temperature: jax.Array, *, k: int,
                 recall_target: float) -> tuple[jax.Array, jax.Array]:
    # approx_max_k trades exactness for speed on TPU (it reduces within bins, then sorts the survivors); on CPU
    # and GPU XLA may fall back to an exact top-k, which shows up as recall 1.0.
    return jax.lax.approx_max_k(logits / temperature, k, recall_target=recall_target)


def _recall(indices: np.ndarray, exact_indices: np.ndarray) -> float:
    """Mean over rows of |approx ∩ exact| / k."""
    hits = [len(np.intersect1d(a, e)) for a, e in zip(indices, exact_indices, strict=True)]
    return float(np.mean(hits) / exact_indices.shape[-1])


def topk_approx_cost(batch: int, vocab: int, k: int, temperature: float, recall_target: float) -> tuple[float, float]:
    """One division and about one comparison per logit (bin-wise max), then a small sort; the float32 logits
    read once."""
    return _sampling_cost(batch, vocab, passes=2.0)


@benchmark(
    suite="sampling",
    params=grid(batch=[8], vocab=[32768, 131072, 262144], k=[8, 64], temperature=[0.7], recall_target=[0.95]),
    cost=topk_approx_cost,
    variants=("k",),  # as topk_exact's
    quick=[{"batch": 8, "vocab": 32768, "k": 64, "temperature": 0.7, "recall_target": 0.95}],
)
def topk_approx(batch: int, vocab: int, k: int, temperature: float, recall_target: float) -> Case:
    logits = _logits(batch, vocab, seed=50)
    scaled = _scaled(logits, temperature)
    _, exact_indices = _exact_top_k(scaled, k)

    def check(output: tuple[jax.Array, jax.Array]) -> None:
        # No tolerance can judge an approximate answer: check what must hold whatever the recall.
        values, indices = (np.asarray(o) for o in output)
        assert values.shape == (batch, k) and indices.shape == (batch, k), f"shapes {values.shape}, {indices.shape}"
        assert np.all((indices >= 0) & (indices < vocab)), "an index outside the vocabulary"
        assert all(len(np.unique(row)) == k for row in indices), "a repeated index within a row"
        # Every value is the tempered logit at its index, and they come sorted, largest first.
        at_index = np.take_along_axis(scaled, indices.astype(np.int64), axis=-1)
        np.testing.assert_allclose(values, at_index, rtol=1e-6, atol=1e-6, err_msg="values do not match indices")
        assert np.all(np.diff(values.astype(np.float64), axis=-1) <= 0), "values not in descending order"
        # A floor well under the target: below it the kernel is broken rather than approximate.
        recall = _recall(indices, exact_indices)
        assert recall >= 0.5 * recall_target, f"recall {recall:.3f} is far below the target {recall_target}"

    def quality(output: tuple[jax.Array, jax.Array]) -> list[QualityMetric]:
        return [QualityMetric("recall", _recall(np.asarray(output[1]), exact_indices), "1", "higher_is_better")]

    flops, nbytes = topk_approx_cost(batch, vocab, k, temperature, recall_target)
    return Case(
        fn=functools.partial(top_k_approx, k=k, recall_target=recall_target),
        args=(logits, np.float32(temperature)),
        check=check,
        quality=quality,
        flops=flops,  # see topk_approx_cost
        bytes_accessed=nbytes,
    )


# --- top-p (nucleus) sampling --------------------------------------------------------------------------------


def _sample_from(scaled: jax.Array, keep: jax.Array, key: jax.Array) -> jax.Array:
    # categorical samples proportionally to exp(logit): with everything outside the nucleus at -inf, that is the
    # renormalised nucleus distribution.
    return jax.random.categorical(jax.random.wrap_key_data(key), jnp.where(keep, scaled, -jnp.inf), axis=-1)


def top_p_sample_sort(logits: jax.Array, temperature: jax.Array, key: jax.Array, *, top_p: float) -> jax.Array:
    """Textbook nucleus sampling: sort each row, keep the smallest prefix whose mass reaches ``top_p``, sample."""
    scaled = logits / temperature
    # Sort descending, carrying the token ids along (one sort instead of sort + argsort).
    vocab_ids = jax.lax.broadcasted_iota(jnp.int32, scaled.shape, 1)
    neg_sorted, sorted_ids = jax.lax.sort_key_val(-scaled, vocab_ids, dimension=-1)
    sorted_logits = -neg_sorted
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    # In the nucleus if the mass strictly before the token is below top_p: the first token always, and the one
    # that crosses top_p, i.e. the smallest prefix whose mass reaches top_p.
    mass_before = jnp.cumsum(probs, axis=-1) - probs
    position = _sample_from(sorted_logits, mass_before < top_p, key)
    return jnp.take_along_axis(sorted_ids, position[:, None], axis=-1)[:, 0]


# Bisection steps of the sort-free variant: 32 halvings shrink the bracket to span / 2^32, under 2^-25 for these
# inputs (tempered logits span < 2^7). That is below float32 spacing for thresholds of magnitude >= 1/4, so the
# bounds end as adjacent float32 values and the nucleus is exact; nearer 0 a token would have to lie within 2^-25
# of the threshold to be misplaced, and the check's slack absorbs it.
BISECT_STEPS = 32


def top_p_sample_bisect(logits: jax.Array, temperature: jax.Array, key: jax.Array, *, top_p: float) -> jax.Array:
    """Sort-free nucleus sampling: the nucleus is {tokens with logit >= t} for the largest t whose tokens hold
    at least ``top_p`` of the mass; find t by bisection on the logit value (a masked sum per step, no sort).

    Same nucleus as the sorted version (up to exact ties at the threshold, all of which it keeps), but each step is
    a streaming pass over the row, which suits wide hardware far better than a 128k-element sort.
    """
    scaled = logits / temperature
    probs = jax.nn.softmax(scaled, axis=-1)

    def mass_at_or_above(t: jax.Array) -> jax.Array:
        return jnp.sum(jnp.where(scaled >= t[:, None], probs, 0.0), axis=-1)

    def halve(_: int, bounds: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        # Invariant: mass(>= lo) >= top_p (lo starts at the row minimum, mass 1); hi only moves down onto values
        # whose mass is below top_p.
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        enough = mass_at_or_above(mid) >= top_p
        return jnp.where(enough, mid, lo), jnp.where(enough, hi, mid)

    lo, hi = jax.lax.fori_loop(0, BISECT_STEPS, halve, (jnp.min(scaled, axis=-1), jnp.max(scaled, axis=-1)))
    # hi never moved if the most likely token alone reaches top_p: then the nucleus is that token.
    threshold = jnp.where(mass_at_or_above(hi) >= top_p, hi, lo)
    return _sample_from(scaled, scaled >= threshold[:, None], key)


_TOP_P_IMPLS = {"sort": top_p_sample_sort, "bisect": top_p_sample_bisect}


def nucleus_check(scaled: np.ndarray, top_p: float, slack: float = 1e-4) -> Callable[[jax.Array], None]:
    """A check that every sampled token lies in its row's nucleus, computed in float64.

    ``slack`` widens the nucleus by that much probability mass, so that a token exactly at the boundary, where
    float32 cumulative sums and the float64 reference may disagree, is not called wrong.
    """
    probs = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    sorted_probs = -np.sort(-probs, axis=-1)
    mass_before = np.cumsum(sorted_probs, axis=-1) - sorted_probs
    # The least likely token of each (slightly widened) nucleus: every token at least that likely is inside.
    last = np.sum(mass_before < top_p + slack, axis=-1) - 1
    threshold = sorted_probs[np.arange(len(last)), last]

    def check(output: jax.Array) -> None:
        tokens = np.asarray(output)
        assert tokens.shape == (scaled.shape[0],), f"expected one token per row, got shape {tokens.shape}"
        assert np.all((tokens >= 0) & (tokens < scaled.shape[1])), f"token outside the vocabulary: {tokens}"
        chosen = probs[np.arange(len(tokens)), tokens]
        outside = np.flatnonzero(chosen < threshold * (1 - 1e-6))
        assert outside.size == 0, (
            f"rows {outside.tolist()} sampled tokens outside the nucleus: probability {chosen[outside].tolist()} "
            f"< the nucleus's least likely {threshold[outside].tolist()} "
            f"(nucleus sizes {(last + 1)[outside].tolist()})")

    return check


def topp_sampling_cost(algorithm: str, batch: int, vocab: int, top_p: float,
                       temperature: float) -> tuple[float, float]:
    """Per element: division, exp, sum, divide (softmax) and ~2 for categorical's Gumbel noise and argmax; plus
    ~log2(vocab) compare-exchanges (sort) or 2 per bisection step (compare, masked add). Bytes: the float32
    logits read once (intermediates are not counted)."""
    per_element = 6.0 + (np.log2(vocab) if algorithm == "sort" else 2.0 * (BISECT_STEPS + 1))
    return _sampling_cost(batch, vocab, passes=per_element)


@benchmark(
    suite="sampling",
    # The sort-based variant only at 32k: XLA's CPU sort takes ~0.1 s per 8 x 32k rows and 1 s at 256k.
    params=(*grid(algorithm=["bisect"], batch=[8], vocab=[32768, 131072, 262144], top_p=[0.9], temperature=[0.7, 1.0]),
            *grid(algorithm=["sort"], batch=[8], vocab=[32768], top_p=[0.9], temperature=[0.7, 1.0])),
    quick=[{"algorithm": "bisect", "batch": 8, "vocab": 32768, "top_p": 0.9, "temperature": 0.7},
           {"algorithm": "sort", "batch": 8, "vocab": 32768, "top_p": 0.9, "temperature": 0.7}],
    cost=topp_sampling_cost,
)
def topp_sampling(algorithm: str, batch: int, vocab: int, top_p: float, temperature: float) -> Case:
    logits = _logits(batch, vocab, seed=51)
    # A fixed key (raw uint32 data, as numpy can hold it): the same tokens at every commit unless the sampler
    # changes, so the check is reproducible.
    key = np.asarray(jax.random.key_data(jax.random.key(0)))
    flops, nbytes = topp_sampling_cost(algorithm, batch, vocab, top_p, temperature)
    return Case(
        fn=functools.partial(_TOP_P_IMPLS[algorithm], top_p=top_p),
        args=(logits, np.float32(temperature), key),
        check=nucleus_check(_scaled(logits, temperature), top_p),
        flops=flops,  # see topp_sampling_cost
        bytes_accessed=nbytes,
    )
