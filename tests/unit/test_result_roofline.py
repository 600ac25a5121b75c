"""A stored result's roofline figures and efficiency samples, on hand-checked examples."""

from __future__ import annotations

import pytest

from kernelwatch.hardware import H200_SXM, TPU_V5E, Calibration, host_hardware
from service.model.result_roofline import efficiency_samples, result_figures, run_hardware

HOST = Calibration(flops_per_s=100e9, bytes_per_s=10e9, dtype="float32")  # ridge at 10 FLOP/B


def test_published_figures_come_before_a_calibration() -> None:
    assert run_hardware("gpu", "NVIDIA H200", HOST) is H200_SXM
    host = run_hardware("cpu", "cpu", HOST)
    assert host is not None and host.measured and host.memory_bytes_per_s == 10e9
    assert run_hardware("cpu", "cpu", None) is None  # no figures rather than another chip's


def test_a_memory_bound_result_on_the_calibrated_host() -> None:
    # 5 FLOP/B under a ridge of 10: memory-bound; 8 MB at 10 GB/s is 0.8 ms; measured 1 ms → 80 %.
    f = result_figures(host_hardware(HOST), "float32", flops=40e6, bytes_accessed=8e6, median_s=1e-3)
    assert f is not None and f.bound == "memory" and f.intensity == 5.0
    assert f.roofline_s == pytest.approx(0.8e-3) and f.achieved_fraction == pytest.approx(0.8)
    assert (f.peak_flops_per_s, f.peak_bytes_per_s) == (100e9, 10e9)
    assert f.peak_source == "host (calibrated), fp32 peak (calibrated on this host)"


def test_a_dtype_the_host_did_not_calibrate_is_measured_against_the_calibrated_one() -> None:
    f = result_figures(host_hardware(HOST), "bfloat16", flops=4e9, bytes_accessed=1e6, median_s=0.1)
    assert f is not None and f.bound == "compute" and f.roofline_s == pytest.approx(0.04)
    assert "fp32 peak in place of bf16" in f.peak_source


def test_published_peaks_by_dtype_with_the_fastest_path_for_float32() -> None:
    bf16 = result_figures(H200_SXM, "bfloat16", flops=989.5e12, bytes_accessed=1e9, median_s=2.0)
    assert bf16 is not None and bf16.peak_flops_per_s == 989.5e12 and bf16.achieved_fraction == pytest.approx(0.5)
    assert bf16.peak_source.startswith("NVIDIA H200 SXM, bf16 peak (")
    # float32 dots take the TF32 tensor cores under JAX's default precision: that is the roof, not fp32's 67 T.
    fp32 = result_figures(H200_SXM, "float32", flops=494.5e12, bytes_accessed=1e9, median_s=2.0)
    assert fp32 is not None and fp32.peak_flops_per_s == 494.5e12 and "tf32 peak in place of fp32" in fp32.peak_source
    tpu = result_figures(TPU_V5E, "float32", flops=197e12, bytes_accessed=1e9, median_s=1.0)
    assert tpu is not None and tpu.peak_flops_per_s == 197e12 and "bf16 peak in place of fp32" in tpu.peak_source


def test_pure_data_movement_is_memory_bound_at_intensity_zero() -> None:
    f = result_figures(H200_SXM, "float32", flops=0.0, bytes_accessed=4.8e9, median_s=2e-3)
    assert f is not None and f.bound == "memory" and f.intensity == 0.0
    assert f.roofline_s == pytest.approx(1e-3) and f.achieved_fraction == pytest.approx(0.5)


@pytest.mark.parametrize(("flops", "bytes_accessed"), [(None, 1e6), (1e6, None), (-1.0, 1e6), (1e6, 0.0)])
def test_no_figures_without_counts_or_bytes(flops: float | None, bytes_accessed: float | None) -> None:
    assert result_figures(H200_SXM, "bf16", flops, bytes_accessed, 1e-3) is None


def test_no_achieved_fraction_without_a_positive_median() -> None:
    f = result_figures(H200_SXM, "bf16", 1e9, 1e6, 0.0)
    assert f is not None and f.achieved_fraction is None and f.roofline_s > 0


def test_efficiency_samples_are_the_roof_over_each_time() -> None:
    assert efficiency_samples(1e-3, [2e-3, 1e-3, 0.0, 4e-3]) == [0.5, 1.0, 0.25]
