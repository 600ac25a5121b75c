"""The accelerator table: each device_kind JAX reports maps to its published figures, anything else to None."""

from __future__ import annotations

import math

import pytest

from kernelwatch.hardware import (
    ACCELERATORS,
    H100_SXM,
    H200_SXM,
    TPU_V4,
    TPU_V5E,
    TPU_V5P,
    TPU_V6E,
    Calibration,
    Hardware,
    dtype_key,
    hardware_for,
    host_hardware,
)


@pytest.mark.parametrize(("backend", "kind", "expected"), [
    ("tpu", "TPU v4", TPU_V4),
    ("tpu", "TPU v5 lite", TPU_V5E),
    ("tpu", "TPU v5e", TPU_V5E),
    ("tpu", "TPU v5", TPU_V5P),
    ("tpu", "TPU v5p", TPU_V5P),
    ("tpu", "TPU v6 lite", TPU_V6E),
    ("TPU", "tpu  V6E", TPU_V6E),  # case and spacing do not matter
    ("gpu", "NVIDIA H100 80GB HBM3", H100_SXM),
    ("gpu", "NVIDIA H200", H200_SXM),
    ("cuda", "nvidia h200", H200_SXM),
])
def test_each_device_kind_maps_to_its_chip(backend: str, kind: str, expected: Hardware) -> None:
    assert hardware_for(backend, kind) is expected


@pytest.mark.parametrize(("backend", "kind"), [
    ("cpu", "cpu"),  # hosts have no published figures; a calibration stands in for them
    ("gpu", "NVIDIA H100 PCIe"),  # other boards have other clocks and bandwidth: not borrowed from the SXM
    ("gpu", "NVIDIA H200 NVL"),
    ("tpu", "TPU v4 lite"),
    ("gpu", "TPU v4"),  # the kind must belong to the backend
    ("tpu", "NVIDIA H200"),
    ("rocm", "AMD Instinct MI300X"),
])
def test_anything_else_is_unknown(backend: str, kind: str) -> None:
    assert hardware_for(backend, kind) is None


def test_every_entry_is_complete_where_published() -> None:
    for hw in ACCELERATORS:
        assert hw.source and not hw.measured
        assert hw.peak_flops("bf16") is not None and hw.memory_bytes_per_s > 0
        assert all(v > 0 for v in [*hw.matrix_flops_per_s.values(), *hw.vector_flops_per_s.values()])
        assert hw.memory_capacity_bytes is not None and hw.memory_capacity_bytes > 1e9


def test_datasheet_figures_are_dense() -> None:
    # The Hopper datasheets quote BF16 1,979 TFLOPS "with sparsity"; the dense rate is half.
    assert H100_SXM.peak_flops("bfloat16") == pytest.approx(989.5e12)
    assert H200_SXM.peak_flops("fp8") == pytest.approx(1979e12)
    assert H200_SXM.memory_bytes_per_s == pytest.approx(4.8e12) and H100_SXM.memory_bytes_per_s == 3.35e12
    assert TPU_V5E.peak_flops("bf16") == 197e12 and TPU_V6E.peak_flops("int8") == 1836e12


def test_a_dtype_without_a_matrix_figure_falls_to_the_vector_unit_or_to_none() -> None:
    assert H200_SXM.peak_flops("float32") == 67e12  # CUDA-core FP32
    assert TPU_V5E.peak_flops("float32") is None  # no fp32 figure published for the MXU
    assert TPU_V4.peak_flops("fp8") is None


def test_ridge_point_is_peak_over_bandwidth() -> None:
    ridge = H200_SXM.ridge_point("bf16")
    assert ridge is not None and ridge == pytest.approx(989.5e12 / 4.8e12)  # ≈ 206 FLOP/B
    assert TPU_V5E.ridge_point("bf16") == pytest.approx(197e12 / 819e9)  # ≈ 240 FLOP/B
    assert TPU_V5E.ridge_point("fp32") is None


def test_interconnects_are_compared_one_direction_at_a_time() -> None:
    assert H200_SXM.interconnect is not None and H200_SXM.interconnect.per_direction_bytes_per_s == 450e9
    assert TPU_V5P.interconnect is not None and TPU_V5P.interconnect.per_direction_bytes_per_s == 600e9
    assert TPU_V4.interconnect is None  # no per-chip figure published


def test_dtype_names_normalise() -> None:
    assert [dtype_key(d) for d in ("bfloat16", "float32", "float8_e4m3fn", "int8", "BF16")] == [
        "bf16", "fp32", "fp8", "int8", "bf16"]


def test_a_host_entry_comes_from_its_calibration() -> None:
    host = host_hardware(Calibration(flops_per_s=2e11, bytes_per_s=2e10, dtype="float32"))
    assert host.measured and host.peak_flops("fp32") == 2e11 and host.memory_bytes_per_s == 2e10
    assert host.ridge_point("float32") == 10.0 and host.peak_flops("bf16") is None
    assert host.interconnect is None and math.isclose(host.ridge_point("fp32") or 0, 10.0)
    with pytest.raises(ValueError):
        host_hardware(Calibration(flops_per_s=0.0, bytes_per_s=1e9, dtype="float32"))
