"""The calibration micro-benchmark at tiny sizes: it runs on the local backend and gives usable figures; a CPU
host's benchmark process announces it with its environment, outside the fingerprint."""

from __future__ import annotations

import math

import pytest

from kernelwatch.hardware import Calibration, host_hardware
from runners import calibrate as calibrate_module
from runners import child
from runners.calibrate import calibrate, calibration_enabled, host_calibration
from runners.session import BenchmarkProcess, ChildConfig
from service.contract import EnvironmentInfo
from service.pipeline.identity import environment_fingerprint
from tests.conftest import REPO_ROOT


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


def test_the_switch_reads_the_environment_variable() -> None:
    assert calibration_enabled({}) and calibration_enabled({"KERNELWATCH_CALIBRATE": "1"})
    for off in ("0", "false", "No", " off "):
        assert not calibration_enabled({"KERNELWATCH_CALIBRATE": off})


def test_a_cpu_host_announces_its_calibration_outside_the_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    measured = {"flops_per_s": 5e10, "bytes_per_s": 2e10, "dtype": "float32"}
    monkeypatch.setattr(child, "host_calibration", lambda: measured)
    plain = child.announced_environment(dirty=False, calibrate=False)
    calibrated = child.announced_environment(dirty=False, calibrate=True)
    assert "calibration" not in plain and calibrated["calibration"] == measured
    with_it, without = (EnvironmentInfo.model_validate(e) for e in (calibrated, plain))
    assert with_it.calibration is not None and with_it.calibration.flops_per_s == 5e10
    # A figure measured afresh by every run must not start a new series every run.
    assert environment_fingerprint(with_it.identity()) == environment_fingerprint(without.identity())


def test_an_accelerator_host_does_not_calibrate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(child, "environment_info", lambda dirty: {"backend": "tpu", "device_kind": "TPU v5 lite"})
    monkeypatch.setattr(child, "host_calibration", lambda: pytest.fail("calibrated a TPU host"))
    assert "calibration" not in child.announced_environment(dirty=False, calibrate=True)


def test_the_benchmark_process_announces_a_measured_calibration_once() -> None:
    """Through the real child process, at the runner's sizes (about half a second of the process's start)."""
    config = ChildConfig(root=REPO_ROOT, suite="no-such-suite/*", extra_env={"KERNELWATCH_CALIBRATE": "1"})
    process = BenchmarkProcess(config)
    try:
        calibration = process.environment["calibration"]
    finally:
        process.close()
    assert calibration["dtype"] == "float32"
    assert calibration["flops_per_s"] > 1e6 and calibration["bytes_per_s"] > 1e6


def test_the_host_is_measured_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int, int]] = []

    def fake(size: int, copy_bytes: int, repeats: int) -> Calibration:
        calls.append((size, copy_bytes, repeats))
        return Calibration(1e9, 2e9, "float32")

    monkeypatch.setattr(calibrate_module, "calibrate", fake)
    host_calibration.cache_clear()
    try:
        first, second = host_calibration(), host_calibration()
    finally:
        host_calibration.cache_clear()
    assert first is second and first == {"flops_per_s": 1e9, "bytes_per_s": 2e9, "dtype": "float32"}
    assert calls == [(calibrate_module.RUNNER_MATMUL_SIZE, calibrate_module.RUNNER_COPY_BYTES,
                      calibrate_module.RUNNER_REPEATS)]
