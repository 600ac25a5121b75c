"""The harness on real (tiny) JAX functions on the CPU."""

import jax.numpy as jnp
import numpy as np
import pytest

from kernelwatch.memory_hierarchy import FOOTPRINT_KEY
from runners.harness import TimingPlan, measure
from runners.suite import BenchmarkInstance, BenchmarkSpec, Case, QualityMetric

PLAN = TimingPlan(samples=5, warmup=1)


def instance(factory, **params) -> BenchmarkInstance:  # type: ignore[no-untyped-def]
    spec = BenchmarkSpec(suite="t", name=factory.__name__, grid=(params,), factory=factory)
    return BenchmarkInstance(spec=spec, params=params)


def good(n: int) -> Case:
    x = np.arange(n, dtype=np.float32)
    return Case(fn=lambda v: jnp.sin(v) * 2, args=(x,), reference=lambda: np.sin(x.astype(np.float64)) * 2,
                flops=2.0 * n, bytes_accessed=8.0 * n)


def wrong(n: int) -> Case:
    x = np.ones(n, dtype=np.float32)
    return Case(fn=lambda v: v + 1, args=(x,), reference=lambda: x * 3)


def broken(n: int) -> Case:
    x = np.ones(n, dtype=np.float32)
    return Case(fn=lambda v: v @ jnp.ones((n + 1, 2)), args=(x,))


def test_good_kernel_gets_every_sample_and_compile_time() -> None:
    [m] = measure(instance(good, n=1024), PLAN)
    assert m.status == "ok" and len(m.samples) == 5 and all(s > 0 for s in m.samples)
    assert m.compile_time_s is not None and m.compile_time_s > 0
    assert m.max_abs_error is not None and m.max_abs_error < 1e-5
    assert m.flops == 2048.0 and m.key == "t/good[n=1024]"
    # XLA's memory analysis sizes what the program holds: a 4 KiB input and a 4 KiB output, the working set the
    # roofline chooses a memory level by (kernelwatch/memory_hierarchy.py).
    assert m.cost is not None and m.cost[FOOTPRINT_KEY] == pytest.approx(2 * 4096, rel=0.5)


def test_wrong_answer_is_failed_and_never_timed() -> None:
    [m] = measure(instance(wrong, n=8), PLAN)
    assert m.status == "failed" and m.samples == []
    assert "differs from the reference" in (m.message or "")


def test_an_exception_in_the_kernel_becomes_a_failed_result() -> None:
    [m] = measure(instance(broken, n=8), PLAN)
    assert m.status == "failed" and m.message and "TypeError" in m.message
    # JAX's note about the traceback frames it hid (no traceback is kept) is not part of the message.
    assert "JAX has removed its internal frames" not in m.message and "----" not in m.message, m.message


def checked(n: int) -> Case:
    x = np.arange(n, dtype=np.float32)

    def must_be_sorted(out) -> None:  # type: ignore[no-untyped-def]
        assert bool(np.all(np.diff(np.asarray(out)) >= 0)), "not sorted"

    return Case(fn=lambda v: -v, args=(x,), check=must_be_sorted)


def with_metrics(n: int) -> Case:
    x = np.ones(n, dtype=np.float32)
    return Case(fn=lambda v: v * 2, args=(x,), bytes_moved=8.0 * n,
                quality=lambda out: [QualityMetric("recall", float(np.mean(np.asarray(out) == 2)), "1",
                                                   "higher_is_better")])


def test_a_failing_check_is_a_wrong_answer() -> None:
    [m] = measure(instance(checked, n=8), PLAN)
    assert m.status == "failed" and "fails its check: not sorted" in (m.message or "")


def test_quality_and_bandwidth_become_results_of_their_own() -> None:
    time_result, bandwidth, recall = measure(instance(with_metrics, n=1024), PLAN)
    assert (time_result.metric, bandwidth.metric, recall.metric) == ("wall_time", "algbw", "recall")
    assert bandwidth.unit == "GB/s" and bandwidth.direction == "higher_is_better"
    assert bandwidth.samples == pytest.approx([8192 / t / 1e9 for t in time_result.samples])
    assert recall.samples == [1.0] and recall.direction == "higher_is_better"
