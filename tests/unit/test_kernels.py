"""The default suite itself: every single-device quick point compiles, passes its reference check and is timed;
the expected families and quality metrics exist; the top-p check really rejects a token outside the nucleus.

Instances are discovered at collection time so that each one is a test of its own, named by its key: a failure
says which kernel broke. Two samples and no warm-up: this checks answers and plumbing, not speed.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from runners.harness import Measurement, TimingPlan, measure
from runners.suite import BenchmarkInstance, BenchmarkSpec, Case, Params, discover, select
from tests.conftest import REPO_ROOT

SPECS: list[BenchmarkSpec] = discover(REPO_ROOT)
QUICK: dict[str, BenchmarkInstance] = {i.key: i for i in select(SPECS, quick=True)}
SINGLE_DEVICE_QUICK = sorted(key for key, i in QUICK.items() if i.spec.devices == 1)
PLAN = TimingPlan(samples=2, warmup=0)


@functools.cache
def measured(key: str) -> tuple[Measurement, ...]:
    """Measure a quick instance once per test session, whichever test asks first."""
    return tuple(measure(QUICK[key], PLAN))


def _failures(results: tuple[Measurement, ...]) -> list[str]:
    return [f"{m.metric}: {m.message}" for m in results if m.status != "ok"]


@pytest.mark.parametrize("key", SINGLE_DEVICE_QUICK)
def test_quick_point_is_correct_and_timed(key: str) -> None:
    results = measured(key)
    assert not _failures(results), "\n".join(_failures(results))
    timing = next(m for m in results if m.metric == "wall_time")
    assert len(timing.samples) == PLAN.samples and all(t > 0 for t in timing.samples)
    # Every benchmark carries a FLOP and byte model (all-gather, pure data movement, is the only 0-FLOP one).
    assert timing.flops is not None and timing.flops > 0, "no FLOP model"
    assert timing.bytes_accessed is not None and timing.bytes_accessed > 0, "no byte model"


def test_the_expected_families_are_declared() -> None:
    by_suite: dict[str, set[str]] = {}
    for spec in SPECS:
        by_suite.setdefault(spec.suite, set()).add(spec.name)
    expected = {
        "matmul": {"matmul_dense", "matmul_bf16"},
        "softmax": {"softmax_rows"},
        "softmax_long": {"softmax_long_rows"},
        "quantized": {"int8_weight_only", "fp8_per_tensor"},
        "attention": {"flash_attention_pallas", "attention_xla", "paged_attention_decode"},
        "norms": {"rmsnorm", "layernorm"},
        "sampling": {"topk_exact", "topk_approx", "topp_sampling"},
        "collectives": {"all_reduce", "all_gather", "reduce_scatter", "ring_all_reduce_ppermute"},
    }
    for suite, names in expected.items():
        assert names <= by_suite.get(suite, set()), f"{suite}: missing {names - by_suite.get(suite, set())}"
    # The new families all name their quick points; collectives need 8 devices, everything else one.
    for spec in SPECS:
        if spec.suite not in ("matmul", "softmax"):
            assert spec.quick, f"{spec.suite}/{spec.name} has no quick points"
        assert spec.devices == (8 if spec.suite == "collectives" else 1), f"{spec.suite}/{spec.name}"
    # Both norm benchmarks are measured fused and unfused.
    for name in ("rmsnorm", "layernorm"):
        assert {p["fused"] for p in quick_points("norms", name)} == {True, False}


def quick_points(suite: str, name: str) -> list[Params]:
    return [i.params for i in QUICK.values() if i.spec.suite == suite and i.spec.name == name]


def _metric(key: str, metric: str) -> Measurement:
    found = [m for m in measured(key) if m.metric == metric]
    assert found, f"{key} reports no {metric!r}: {[m.metric for m in measured(key)]}"
    return found[0]


@pytest.mark.parametrize("name", ["int8_weight_only", "fp8_per_tensor"])
def test_quantized_kernels_report_their_error_against_f32(name: str) -> None:
    keys = [k for k in SINGLE_DEVICE_QUICK if k.startswith(f"quantized/{name}[")]
    assert keys
    for key in keys:
        m = _metric(key, "rel_error")
        # Quantisation costs something (not 0: the metric would be measuring nothing) but not everything.
        assert m.direction == "lower_is_better" and 0 < m.samples[0] < 0.1, m


def test_approximate_top_k_reports_recall() -> None:
    keys = [k for k in SINGLE_DEVICE_QUICK if k.startswith("sampling/topk_approx[")]
    assert keys
    for key in keys:
        m = _metric(key, "recall")
        assert m.direction == "higher_is_better" and 0.5 <= m.samples[0] <= 1.0, m


TOPP_QUICK = sorted(k for k in SINGLE_DEVICE_QUICK if k.startswith("sampling/topp_sampling["))


def _case_and_output(key: str) -> tuple[Case, np.ndarray]:
    case = QUICK[key].make_case()
    output = np.asarray(jax.jit(case.fn)(*case.args))
    return case, output


@pytest.mark.parametrize("key", TOPP_QUICK)
def test_topp_check_rejects_a_token_outside_the_nucleus(key: str) -> None:
    case, good = _case_and_output(key)
    assert case.check is not None
    case.check(good)  # the real sampler's tokens pass, so the rejections below are not vacuous
    logits = np.asarray(case.args[0])
    # The least likely token of every row: never in a p < 1 nucleus.
    with pytest.raises(AssertionError, match="outside the nucleus"):
        case.check(np.argmin(logits, axis=-1).astype(np.int32))
    # One bad row among good ones is enough.
    one_bad = good.copy()
    one_bad[3] = int(np.argmin(logits[3]))
    with pytest.raises(AssertionError, match=r"rows \[3\]"):
        case.check(one_bad)
    with pytest.raises(AssertionError, match="outside the vocabulary"):
        case.check(np.full_like(good, logits.shape[1]))


def test_approx_top_k_check_rejects_values_that_do_not_match_their_indices() -> None:
    instance = next(i for i in QUICK.values() if i.spec.name == "topk_approx")
    case = instance.make_case()
    assert case.check is not None
    values, indices = (np.asarray(o) for o in jax.jit(case.fn)(*case.args))
    case.check((values, indices))
    with pytest.raises(AssertionError):
        case.check((values, np.roll(indices, 1, axis=-1)))


def test_collectives_refuse_to_run_on_fewer_than_eight_devices() -> None:
    if jax.device_count() >= 8:
        pytest.skip("this process has 8 devices; tests/integration/test_collectives.py runs them")
    instance = next(i for i in QUICK.values() if i.spec.suite == "collectives")
    with pytest.raises(RuntimeError, match="xla_force_host_platform_device_count=8"):
        instance.make_case()
