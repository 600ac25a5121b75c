"""`kernelwatch calibrate`: the host's kept calibrations listed as roofs, and --measure measuring the host in a
real calibrate-only benchmark process and keeping it."""

from __future__ import annotations

import os
from pathlib import Path

from runners import calibration_cache
from tests.cli_inprocess import run_cli


def test_the_kept_roofs_are_listed_and_measure_keeps_a_new_one(tmp_path: Path) -> None:
    cache = tmp_path / "calibrations.json"
    env = {**os.environ, calibration_cache.CACHE_SETTING: str(cache)}
    empty = run_cli(["calibrate"], env)
    assert empty.returncode == 0 and "No calibration is kept in" in empty.stdout and not cache.exists()

    measured = run_cli(["calibrate", "--measure"], env)
    assert measured.returncode == 0, measured.stderr
    (key, entry), = calibration_cache.load(cache).items()
    assert key in measured.stdout and "measured and kept as" in measured.stderr
    assert "1 calibration(s) kept" in measured.stdout and "fp32" in measured.stdout
    assert "DRAM" in measured.stdout and len(entry["bandwidth"]) >= 10
    if entry.get("caches"):  # sysfs lists this host's caches: each is a roof of its own
        assert "L1 (" in measured.stdout
    listed = run_cli(["calibrate"], env)
    assert listed.stdout == measured.stdout  # listing reads what --measure kept, measuring nothing


def test_a_calibration_measured_busy_is_listed_as_provisional(tmp_path: Path) -> None:
    cache = tmp_path / "calibrations.json"
    env = {**os.environ, calibration_cache.CACHE_SETTING: str(cache)}
    figures = {"flops_per_s": 5e10, "bytes_per_s": 2e10, "dtype": "float32"}
    assert calibration_cache.store(cache, "a" * 32, figures, provisional=True)
    assert calibration_cache.store(cache, "b" * 32, figures)
    listed = run_cli(["calibrate"], env).stdout
    busy, quiet = listed.split("calibration " + "a" * 32)[1], listed.split("calibration " + "b" * 32)[1]
    assert "provisional: measured while the host stayed busy" in busy.split("calibration ")[0]
    assert "provisional" not in quiet.split("calibration ")[0]
