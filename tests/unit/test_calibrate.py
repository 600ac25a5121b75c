"""The calibration micro-benchmark at tiny sizes: it runs on the local backend and gives usable figures."""

from __future__ import annotations

import math

import pytest

from runners.calibrate import calibrate
from service.model.hardware import host_hardware


def test_calibration_gives_positive_finite_rates() -> None:
    c = calibrate(matmul_size=64, copy_bytes=1 << 16, repeats=2)
    assert c.dtype == "float32"
    for rate in (c.flops_per_s, c.bytes_per_s):
        assert rate > 0 and math.isfinite(rate)
    host = host_hardware(c)
    assert host.peak_flops("float32") == c.flops_per_s and host.memory_bytes_per_s == c.bytes_per_s


def test_calibration_refuses_empty_sizes() -> None:
    with pytest.raises(ValueError):
        calibrate(matmul_size=0)
