"""The calibration micro-benchmark at tiny sizes: it runs on the local backend and gives usable figures; a CPU
host's benchmark process announces the key of its host's calibration, which the runner swaps for the kept
figures, measured once in a process of their own and kept (runners/calibration_cache.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from kernelwatch.hardware import calibration_from_manifest, host_hardware
from kernelwatch.memory_hierarchy import CacheLevel
from runners import calibration_cache, child
from runners.calibrate import (
    PASSES,
    busy_share,
    calibrate,
    calibration_enabled,
    calibration_key,
    host_caches,
    ladder,
    quiet_budget,
    wait_for_quiet,
)
from runners.session import BenchmarkProcess, ChildConfig
from service.contract import EnvironmentInfo
from service.pipeline.identity import environment_fingerprint
from tests.conftest import REPO_ROOT

TINY = dict(matmul_sizes=(32, 64), dtypes=("float32",), working_sets=(1 << 12, 1 << 14), repeats=2, passes=1,
            bytes_per_timing=1 << 16, quiet_budget_s=0.0)


def test_calibration_gives_positive_finite_rates() -> None:
    c = calibrate(**TINY)  # type: ignore[arg-type]
    assert c.dtype == "float32"
    for rate in (c.flops_per_s, c.bytes_per_s, *(p.bytes_per_s for p in c.bandwidth)):
        assert rate > 0 and math.isfinite(rate)
    assert [p.working_set_bytes for p in c.bandwidth] == [1 << 12, 1 << 14]
    assert c.bytes_per_s == c.bandwidth[-1].bytes_per_s  # the one-roof figure is the largest working set's
    host = host_hardware(c)
    assert host.peak_flops("float32") == c.flops_per_s and host.memory_bytes_per_s == c.bytes_per_s
    # What the manifest carries reads back as the same calibration.
    assert calibration_from_manifest(c.as_manifest()) == c
    assert EnvironmentInfo.model_validate({
        "backend": "cpu", "device_kind": "cpu", "device_count": 1, "jax_version": "x", "jaxlib_version": "x",
        "calibration": c.as_manifest()}).calibration is not None


def test_calibration_refuses_empty_sizes() -> None:
    with pytest.raises(ValueError):
        calibrate(matmul_sizes=(0,))
    with pytest.raises(ValueError):
        calibrate(working_sets=())


def test_the_ladder_runs_past_the_last_cache() -> None:
    sizes = ladder([CacheLevel("L1", 48 << 10), CacheLevel("L3", 105 << 20)])
    assert sizes[0] == 16 << 10 and sizes[-1] >= 4 * (105 << 20)
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))
    assert ladder([])[-1] >= 64 << 20  # no caches known: still well past any


def test_this_host_lists_its_caches() -> None:
    caches = host_caches()
    if not Path("/sys/devices/system/cpu/cpu0/cache").is_dir():
        assert caches == ()
        return
    assert [c.name for c in caches][:1] == ["L1"]
    assert [c.size_bytes for c in caches] == sorted(c.size_bytes for c in caches)


def test_the_switch_reads_the_environment_variable() -> None:
    assert calibration_enabled({}) and calibration_enabled({"KERNELWATCH_CALIBRATE": "1"})
    for off in ("0", "false", "No", " off "):
        assert not calibration_enabled({"KERNELWATCH_CALIBRATE": off})


def test_the_key_follows_the_environment_not_the_noise() -> None:
    env = {"backend": "cpu", "jax_version": "0.8", "xla_flags": "", "cpu_threads": None}
    caches = (CacheLevel("L1", 1 << 15),)
    assert calibration_key(env, caches) == calibration_key(dict(env), caches)
    assert calibration_key(env, caches) != calibration_key({**env, "jax_version": "0.9"}, caches)
    assert calibration_key(env, caches) != calibration_key({**env, "xla_flags": "--xla_cpu_max_isa=AVX2"}, caches)
    assert calibration_key(env, caches) != calibration_key(env, (CacheLevel("L1", 1 << 16),))
    # What is measured afresh (the dirty flag, the hostname's other facts) is not part of it.
    assert calibration_key({**env, "extra": {"dirty": "true"}}, caches) == calibration_key(env, caches)


def test_a_cpu_host_announces_a_key_outside_the_fingerprint() -> None:
    plain = child.announced_environment(dirty=False, calibrate=False)
    keyed = child.announced_environment(dirty=False, calibrate=True)
    assert "calibration_key" not in plain and len(keyed["calibration_key"]) == 32
    keyed.pop("calibration_key")
    assert environment_fingerprint(EnvironmentInfo.model_validate(keyed).identity()) == \
        environment_fingerprint(EnvironmentInfo.model_validate(plain).identity())


def test_an_accelerator_host_does_not_calibrate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(child, "environment_info", lambda dirty: {"backend": "tpu", "device_kind": "TPU v5 lite"})
    monkeypatch.setattr(child, "host_key", lambda env: pytest.fail("keyed a TPU host's calibration"))
    assert "calibration_key" not in child.announced_environment(dirty=False, calibrate=True)


def announced_environment() -> dict[str, Any]:
    """The environment a real benchmark process of an empty suite announces to the runner, calibration swapped in
    (runners/session.py)."""
    config = ChildConfig(root=REPO_ROOT, suite="no-such-suite/*", extra_env={"KERNELWATCH_CALIBRATE": "1"})
    process = BenchmarkProcess(config)
    try:
        return process.environment
    finally:
        process.close()


def test_the_cache_keeps_only_well_formed_calibrations(tmp_path: Path) -> None:
    path = tmp_path / "c" / "calibrations.json"
    good = {"flops_per_s": 1e11, "bytes_per_s": 2e10, "dtype": "float32",
            "bandwidth": [{"working_set_bytes": 4096, "bytes_per_s": 3e11}]}
    assert calibration_cache.load(path) == {}
    assert calibration_cache.store(path, "a" * 32, good)
    assert not calibration_cache.store(path, "b" * 32, {**good, "bytes_per_s": float("inf")})
    assert not calibration_cache.store(path, "c" * 32, {**good, "bandwidth": [{"working_set_bytes": 0}]})
    assert not calibration_cache.store(path, "../escape", good)
    loaded = calibration_cache.load(path)
    assert list(loaded) == ["a" * 32] and loaded["a" * 32]["bandwidth"] == good["bandwidth"]
    # A file someone else broke is no calibration at all (measured again), not a crash of the run.
    path.write_text("{not json")
    assert calibration_cache.load(path) == {}
    path.write_text(json.dumps({"d" * 32: {"flops_per_s": -1, "bytes_per_s": 1, "dtype": "float32"}}))
    assert calibration_cache.load(path) == {}
    # The wrong type where a list goes, or JSON nested past Python's stack: the same (these once failed every run).
    for broken in ({**good, "bandwidth": 5}, {**good, "caches": "L1"}, {**good, "bandwidth": [5]},
                   {**good, "flops_by_dtype": [1, 2]}):
        path.write_text(json.dumps({"e" * 32: broken, "a" * 32: good}))
        assert list(calibration_cache.load(path)) == ["a" * 32], broken
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert calibration_cache.load(path) == {}


def test_the_runner_measures_a_host_once_and_keeps_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through real benchmark processes: the first finds nothing kept, has the host measured in a process of its
    own, and keeps it; the second is handed the kept figures without measuring (a planted entry under the same
    key proves it: its made-up rate comes back)."""
    cache = tmp_path / "calibrations.json"
    monkeypatch.setenv(calibration_cache.CACHE_SETTING, str(cache))
    environment = announced_environment()
    first = environment["calibration"]
    assert "calibration_key" not in environment
    assert first["flops_per_s"] > 1e6 and first["bytes_per_s"] > 1e6 and len(first["bandwidth"]) >= 10
    kept = calibration_cache.load(cache)
    assert len(kept) == 1
    (key, entry), = kept.items()
    assert calibration_cache.figures_of(entry) == first
    calibration_cache.store(cache, key, {**first, "flops_per_s": 12345.0})
    environment = announced_environment()
    assert environment["calibration"]["flops_per_s"] == 12345.0
    assert EnvironmentInfo.model_validate(environment).calibration is not None
    # Kept as measured while the host stayed busy: the next run measures it again and keeps the faster figures
    # (a demo beside another's build kept an fp32 roof its own matmuls then beat in every later run).
    calibration_cache.store(cache, key, {**first, "flops_per_s": 12345.0}, provisional=True)
    environment = announced_environment()
    assert environment["calibration"]["flops_per_s"] > 1e6
    again = calibration_cache.load(cache)[key]
    assert again["flops_per_s"] > 1e6 and calibration_cache.figures_of(again) == environment["calibration"]
    assert not calibration_cache.needs_measuring(again) or again[calibration_cache.REMEASURES] == 1


def test_a_provisional_calibration_is_measured_again_a_few_times_keeping_the_faster_figures() -> None:
    kept = {"flops_per_s": 5e10, "bytes_per_s": 2e10, "dtype": "float32", "flops_by_dtype": {"fp32": 5e10,
                                                                                            "bf16": 9e10},
            "bandwidth": [{"working_set_bytes": 4096, "bytes_per_s": 3e11},
                          {"working_set_bytes": 8192, "bytes_per_s": 1e11}],
            calibration_cache.KEPT_AT: 1.0, calibration_cache.PROVISIONAL: True, calibration_cache.REMEASURES: 1}
    measured = {"flops_per_s": 7e10, "bytes_per_s": 1e10, "dtype": "float32", "flops_by_dtype": {"fp32": 7e10,
                                                                                                "bf16": 8e10},
                "bandwidth": [{"working_set_bytes": 4096, "bytes_per_s": 2e11},
                              {"working_set_bytes": 8192, "bytes_per_s": 2e11}]}
    merged = calibration_cache.faster(kept, measured)
    assert (merged["flops_per_s"], merged["bytes_per_s"]) == (7e10, 2e10)
    assert merged["flops_by_dtype"] == {"fp32": 7e10, "bf16": 9e10}
    assert [p["bytes_per_s"] for p in merged["bandwidth"]] == [3e11, 2e11]
    assert calibration_cache.KEPT_AT not in merged and calibration_cache.PROVISIONAL not in merged
    assert calibration_cache.needs_measuring(None) and calibration_cache.needs_measuring(kept)
    assert not calibration_cache.needs_measuring({**kept, calibration_cache.REMEASURES:
                                                  calibration_cache.MAX_REMEASURES})
    assert not calibration_cache.needs_measuring(calibration_cache.figures_of(kept))  # measured quiet: kept


def test_a_cache_that_cannot_be_written_costs_a_measurement_not_the_run(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The cache's directory cannot be made (a file stands where it would go): the run still gets the figures
    measured for it, says why they were not kept, and the next run measures again."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file")
    cache = blocker / "calibrations.json"
    monkeypatch.setenv(calibration_cache.CACHE_SETTING, str(cache))
    environment = announced_environment()
    assert environment["calibration"]["flops_per_s"] > 1e6 and environment["calibration"]["bytes_per_s"] > 1e6
    assert EnvironmentInfo.model_validate(environment).calibration is not None
    assert f"could not keep the host's calibration in {cache}" in capsys.readouterr().err
    assert blocker.read_text() == "a file"


def test_a_calibration_waits_for_a_quiet_host_within_its_budget() -> None:
    """A roof is the host's best: a pass waits for a window in which the rest of the machine is mostly idle, and
    gives up once its budget is spent (a host that is never quiet is measured as it is)."""
    clock = iter(range(100))
    readings = iter([0.9, 0.6, 0.1, 0.9])
    waited = wait_for_quiet(10.0, load=lambda: next(readings), clock=lambda: float(next(clock)))
    assert waited == (3.0, True) and next(readings) == 0.9  # stopped at the first quiet window
    busy_always = wait_for_quiet(4.0, load=lambda: 0.8, clock=lambda: float(next(clock)))
    assert busy_always == (4.0, False)  # the budget, not forever, and said to have found the host busy
    unknown = wait_for_quiet(10.0, load=lambda: None)
    assert unknown.spent < 1.0 and unknown.quiet  # no /proc/stat: nothing to wait for


def test_the_busy_share_is_read_from_this_host() -> None:
    share = busy_share(0.05)
    if not Path("/proc/stat").exists():
        assert share is None
        return
    assert share is not None and 0.0 <= share <= 1.0


def test_the_quiet_budget_is_a_setting() -> None:
    assert quiet_budget({}) == 20.0 and quiet_budget({"KERNELWATCH_CALIBRATION_QUIET_S": "0"}) == 0.0
    assert quiet_budget({"KERNELWATCH_CALIBRATION_QUIET_S": " 2.5 "}) == 2.5
    for bad in ("soon", "-1", "nan", "inf"):
        with pytest.raises(ValueError, match="KERNELWATCH_CALIBRATION_QUIET_S"):
            quiet_budget({"KERNELWATCH_CALIBRATION_QUIET_S": bad})


def test_the_runner_hands_its_quiet_budget_to_the_calibration_process(tmp_path: Path) -> None:
    """The sandbox passes no KERNELWATCH_ variable to a benchmark process, so the budget travels as an argument
    that the process reads (CI's parallel tier sets 0: its calibrations waited 50 s each for a quiet host)."""
    from runners.sandbox import Limits
    from runners.session import child_command

    config = ChildConfig(root=tmp_path)
    limits = Limits(memory_mb=None)
    def budget(command: list[str]) -> str:
        return command[command.index("--quiet-budget") + 1]

    cmd = child_command(config, limits, True, {"KERNELWATCH_CALIBRATION_QUIET_S": "0"})
    assert budget(cmd) == "0.0" and budget(child_command(config, limits, True, {})) == "20.0"
    assert "--quiet-budget" not in child_command(config, limits, False, {"KERNELWATCH_CALIBRATION_QUIET_S": "0"})
    assert child.parse_args(cmd[cmd.index("runners.child") + 1:]).quiet_budget == 0.0
    # The passes travel the same way (CI's parallel tier sets 1): refused outside 1-10 where they are set.
    passes = child_command(config, limits, True, {"KERNELWATCH_CALIBRATION_PASSES": "1"})
    assert child.parse_args(passes[passes.index("runners.child") + 1:]).passes == 1
    assert child.parse_args(cmd[cmd.index("runners.child") + 1:]).passes == PASSES  # unset: the default
    with pytest.raises(ValueError, match="KERNELWATCH_CALIBRATION_PASSES"):
        child_command(config, limits, True, {"KERNELWATCH_CALIBRATION_PASSES": "0"})


def test_a_calibration_measured_on_a_host_that_stays_busy_says_so() -> None:
    """Every core spinning in other processes for the whole of its short wait: the calibration is measured anyway
    and says it was measured busy (the runner then keeps it provisional); with no wait asked for, it says
    nothing of the host."""
    import os
    import subprocess
    import sys

    from runners.calibrate import calibrate

    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        small = {"matmul_sizes": (8,), "working_sets": (4096,), "repeats": 1, "passes": 1,
                 "caches": (CacheLevel("L1", 32768),)}
        assert calibrate(**small, quiet_budget_s=1.0).measured_busy  # type: ignore[arg-type]
        assert not calibrate(**small, quiet_budget_s=0.0).measured_busy  # type: ignore[arg-type]
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
