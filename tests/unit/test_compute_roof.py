"""One rule for which compute peak a benchmark is measured against (ingest, predict and /model share it)."""

from __future__ import annotations

import pytest

from kernelwatch.hardware import H100_SXM, H200_SXM, TPU_V4, TPU_V5E, Calibration, Hardware, host_hardware
from service.model.compute_roof import compute_roof, params_dtype


@pytest.mark.parametrize(("params", "dtype"), [
    ({"rows": 256}, "float32"),  # JAX's default
    ({"dtype": "bfloat16", "act_dtype": "float32"}, "bfloat16"),
    ({"act_dtype": "bfloat16"}, "bfloat16"),
    ({"dtype": ""}, "float32"),
])
def test_the_dtype_a_benchmark_computes_in(params: dict[str, object], dtype: str) -> None:
    assert params_dtype(params) == dtype


@pytest.mark.parametrize(("hardware", "dtype", "used", "peak"), [
    (H200_SXM, "bfloat16", "bf16", 989.5e12),
    (H100_SXM, "float32", "tf32", 494.5e12),  # TF32 tensor cores, not the 67 T fp32 vector rate
    (TPU_V5E, "float32", "bf16", 197e12),  # MXU passes in bf16
    (TPU_V5E, "int8", "int8", 393e12),
    (TPU_V4, "fp8", "bf16", 275e12),
])
def test_the_roof_is_the_fastest_path_the_dtype_can_take(hardware: Hardware, dtype: str, used: str,
                                                         peak: float) -> None:
    roof = compute_roof(hardware, dtype)
    assert roof is not None and (roof.used, roof.peak_flops_per_s) == (used, peak)
    assert (roof.note is None) == (roof.used == roof.requested)


def test_a_calibrated_host_has_a_rate_per_measured_dtype_and_bounds_the_rest_by_the_fastest() -> None:
    host = host_hardware(Calibration(flops_per_s=1e11, bytes_per_s=1e10, dtype="float32",
                                     flops_by_dtype=(("fp32", 1e11), ("bf16", 4e11))))
    fp32, bf16, int8 = (compute_roof(host, d) for d in ("float32", "bfloat16", "int8"))
    assert fp32 is not None and (fp32.used, fp32.peak_flops_per_s, fp32.note) == ("fp32", 1e11, None)
    assert bf16 is not None and (bf16.used, bf16.peak_flops_per_s) == ("bf16", 4e11)
    assert int8 is not None and int8.used == "bf16" and int8.note is not None  # not measured: the fastest
    # A benchmark that names no dtype may compute in any: the fastest measured rate bounds it.
    undeclared = compute_roof(host, "float32", declared=False)
    assert undeclared is not None and undeclared.peak_flops_per_s == 4e11 and undeclared.note is not None


def test_a_calibrated_host_has_one_rate_for_every_dtype() -> None:
    host = host_hardware(Calibration(flops_per_s=1e11, bytes_per_s=1e10, dtype="float32"))
    same = compute_roof(host, "float32")
    other = compute_roof(host, "bfloat16")
    assert same is not None and same.note is None and same.peak_flops_per_s == 1e11
    assert other is not None and other.used == "fp32" and other.note is not None and "bf16" in other.note
