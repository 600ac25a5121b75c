"""Roofline, collective bandwidth and cost cross-check on hand-computed examples."""

from __future__ import annotations

import pytest

from kernelwatch.hardware import H200_SXM, TPU_V5E
from service.model.roofline import (
    bus_factor,
    collective_bandwidth,
    cost_disagreements,
    ridge_point,
    roofline,
    roofline_on,
)

# Round peaks so the expected figures are easy to check by hand: 100 TFLOP/s, 1 TB/s, ridge at 100 FLOP/B.
PEAK_FLOPS, PEAK_BYTES = 100e12, 1e12


def test_the_ridge_point() -> None:
    assert ridge_point(PEAK_FLOPS, PEAK_BYTES) == 100.0
    at_ridge = roofline(flops=100e9, bytes_accessed=1e9, peak_flops_per_s=PEAK_FLOPS, peak_bytes_per_s=PEAK_BYTES)
    assert at_ridge.intensity == 100.0 == at_ridge.ridge
    assert at_ridge.compute_s == at_ridge.memory_s == pytest.approx(1e-3)
    assert at_ridge.bound == "compute" and at_ridge.achieved_fraction is None


def test_a_large_matmul_is_compute_bound() -> None:
    # 1024³ bf16 matmul: 2·1024³ = 2,147,483,648 FLOPs; A, B and C once each: 3·1024²·2 B = 6,291,456 B.
    flops, nbytes = 2 * 1024**3, 3 * 1024**2 * 2
    r = roofline(flops, nbytes, PEAK_FLOPS, PEAK_BYTES, measured_s=2 * flops / PEAK_FLOPS)
    assert r.intensity == pytest.approx(341.33, rel=1e-4) and r.bound == "compute"
    assert r.roofline_s == pytest.approx(21.47e-6, rel=1e-3)  # flops / peak; bytes would take 6.3 µs
    assert r.achieved_fraction == pytest.approx(0.5)


def test_a_softmax_is_memory_bound() -> None:
    # 4096×4096 fp32 softmax: read and write each element once, 2·4096²·4 = 134,217,728 B; ~5 FLOPs an element
    # (max, subtract, exp, sum, divide): 83,886,080 FLOPs. I = 0.625 FLOP/B, far below the ridge.
    flops, nbytes = 5 * 4096**2, 2 * 4096**2 * 4
    r = roofline(flops, nbytes, PEAK_FLOPS, PEAK_BYTES, measured_s=4 * nbytes / PEAK_BYTES)
    assert r.intensity == 0.625 and r.bound == "memory"
    assert r.roofline_s == pytest.approx(134.2e-6, rel=1e-3)
    assert r.achieved_fraction == pytest.approx(0.25)


def test_against_the_table() -> None:
    r = roofline_on(H200_SXM, "bfloat16", flops=2 * 4096**3, bytes_accessed=3 * 4096**2 * 2, measured_s=2e-4)
    assert r is not None and r.bound == "compute"
    assert r.roofline_s == pytest.approx(2 * 4096**3 / 989.5e12)  # ≈ 139 µs
    assert r.achieved_fraction == pytest.approx(0.6944, rel=1e-3)
    assert roofline_on(TPU_V5E, "float32", 1e9, 1e9) is None  # no published fp32 peak: no roofline


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        roofline(-1.0, 1e6, PEAK_FLOPS, PEAK_BYTES)
    with pytest.raises(ValueError):
        roofline(1e6, 0, PEAK_FLOPS, PEAK_BYTES)
    with pytest.raises(ValueError):
        roofline(1e6, 1e6, PEAK_FLOPS, 0)
    with pytest.raises(ValueError):
        roofline(1e6, 1e6, PEAK_FLOPS, PEAK_BYTES, measured_s=float("nan"))


@pytest.mark.parametrize(("collective", "ranks", "factor"), [
    ("all-reduce", 8, 1.75),  # 2(n-1)/n
    ("all-reduce", 2, 1.0),
    ("all-reduce", 1, 0.0),  # nothing crosses a link
    ("all-gather", 8, 0.875),  # (n-1)/n
    ("reduce-scatter", 8, 0.875),
    ("all-to-all", 4, 0.75),
    ("broadcast", 8, 1.0),
    ("reduce", 8, 1.0),
])
def test_bus_factors_follow_nccl_tests(collective: str, ranks: int, factor: float) -> None:
    assert bus_factor(collective, ranks) == pytest.approx(factor)  # type: ignore[arg-type]


def test_collective_bandwidth_against_nvlink() -> None:
    # 1 GB all-reduced over 8 H200s in 5 ms: algbw 200 GB/s, busbw 350 GB/s, of NVLink's 450 GB/s a direction.
    bw = collective_bandwidth("all-reduce", 1e9, 5e-3, 8, H200_SXM)
    assert bw.algbw_bytes_per_s == pytest.approx(200e9) and bw.busbw_bytes_per_s == pytest.approx(350e9)
    assert bw.peak_bytes_per_s == 450e9 and bw.fraction_of_peak == pytest.approx(350 / 450)
    assert collective_bandwidth("all-gather", 1e9, 5e-3, 8).fraction_of_peak is None  # no hardware, no peak
    with pytest.raises(ValueError):
        bus_factor("all-reduce", 0)


def test_analytic_and_xla_counts_disagree_only_past_the_tolerance() -> None:
    xla = {"flops": 2.1e9, "bytes accessed": 1.5e6, "transcendentals": 0.0}
    found = cost_disagreements(analytic_flops=2e9, analytic_bytes=1e6, xla_cost=xla, tolerance=0.1)
    assert [(d.quantity, d.analytic, d.xla) for d in found] == [("bytes", 1e6, 1.5e6)]  # flops: 5 %, within
    assert found[0].relative_difference == pytest.approx(0.5)
    under = cost_disagreements(2e9, None, {"flops": 1e9}, tolerance=0.1)
    assert [(d.quantity, round(d.relative_difference, 3)) for d in under] == [("flops", -0.5)]
    assert cost_disagreements(None, None, xla) == [] and cost_disagreements(2e9, 1e6, {}) == []
    with pytest.raises(ValueError):
        cost_disagreements(1.0, 1.0, xla, tolerance=-1)
