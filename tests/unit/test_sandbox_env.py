"""The benchmark process's environment allow-list, the limit settings, and the limits as a real process gets them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from runners.sandbox import (
    DEFAULT_OPEN_FILES,
    BadLimitSetting,
    Limits,
    child_environment,
    explain_failure,
    host_memory_mb,
    limits_from_env,
)
from runners.session import describe_exit

RUNNER_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/runner",
    "TMPDIR": "/var/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONPATH": "/somewhere/else",
    "LD_PRELOAD": "/tmp/evil.so",
    "XLA_FLAGS": "--xla_cpu_max_isa=AVX2",
    "LIBTPU_INIT_ARGS": "--xla_tpu_foo=1",
    "JAX_PLATFORMS": "cpu",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "NVIDIA_VISIBLE_DEVICES": "all",
    "TPU_NAME": "v5e",
    "KERNELWATCH_CALIBRATE": "0",
    "KERNELWATCH_TOKEN": "kw_1",
    "KERNELWATCH_RUNNER_TOKEN": "kw_2",
    "KERNELWATCH_SLACK_TOKEN": "xoxb",
    "KERNELWATCH_GITHUB_WEBHOOK_SECRET": "s",
    "KERNELWATCH_SECRET_KEY": "s",
    "KERNELWATCH_DATABASE_URL": "postgresql://u:p@h/d",
    "KERNELWATCH_REDIS_URL": "redis://:p@h",
    "KERNELWATCH_URL": "https://kw",
    "GITHUB_TOKEN": "ghp",
    "GH_TOKEN": "ghp",
    "AWS_ACCESS_KEY_ID": "a",
    "AWS_SECRET_ACCESS_KEY": "a",
    "SLACK_BOT_TOKEN": "xoxb",
    "SSH_AUTH_SOCK": "/tmp/agent",
    "XLA_UPLOAD_TOKEN": "t",
    "TPU_API_KEY": "k",
    "CUDA_AUTH_SECRET": "c",
}


def test_only_the_allow_list_reaches_the_child() -> None:
    env = child_environment(RUNNER_ENV, {})
    assert env == {k: RUNNER_ENV[k] for k in (
        "PATH", "LANG", "LC_ALL", "XLA_FLAGS", "LIBTPU_INIT_ARGS", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES", "TPU_NAME", "KERNELWATCH_CALIBRATE")}


def test_what_the_session_sets_wins() -> None:
    extra = {"HOME": "/tmp/kw-bench-1/home", "TMPDIR": "/tmp/kw-bench-1/tmp", "PYTHONPATH": "/srv/kernelwatch",
             "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    env = child_environment(RUNNER_ENV, extra)
    assert {k: env[k] for k in extra} == extra
    assert "LD_PRELOAD" not in env and "KERNELWATCH_TOKEN" not in env


def test_an_empty_runner_environment_gives_only_the_extra() -> None:
    assert child_environment({}, {"HOME": "/h"}) == {"HOME": "/h"}


def test_limit_defaults() -> None:
    limits = limits_from_env({})
    assert limits.open_files == DEFAULT_OPEN_FILES and limits.cpu_s is None
    assert limits.memory_mb == int(host_memory_mb() * 0.75) and limits.memory_mb > 0


def test_limit_settings() -> None:
    limits = limits_from_env({"KERNELWATCH_RUNNER_MEMORY_LIMIT_MB": " 2048 ", "KERNELWATCH_RUNNER_CPU_LIMIT_S": "30",
                              "KERNELWATCH_RUNNER_OPEN_FILES": "256"})
    assert limits == Limits(memory_mb=2048, cpu_s=30, open_files=256)
    assert limits.cpu_budget(600.0) == 30
    assert limits_from_env({"KERNELWATCH_RUNNER_MEMORY_LIMIT_MB": "unlimited"}).memory_mb is None


def test_derived_cpu_budget_outlasts_the_deadline_on_every_core() -> None:
    import os

    assert Limits(memory_mb=None).cpu_budget(10.0) >= 10 * (os.cpu_count() or 1)


@pytest.mark.parametrize("name, value", [
    ("KERNELWATCH_RUNNER_MEMORY_LIMIT_MB", "1.5G"),
    ("KERNELWATCH_RUNNER_MEMORY_LIMIT_MB", "0"),
    ("KERNELWATCH_RUNNER_CPU_LIMIT_S", "-5"),
    ("KERNELWATCH_RUNNER_OPEN_FILES", "lots"),
    ("KERNELWATCH_RUNNER_OPEN_FILES", "unlimited"),
])
def test_bad_limit_settings_say_what_to_set(name: str, value: str) -> None:
    with pytest.raises(BadLimitSetting, match=name):
        limits_from_env({name: value})


def test_memory_failures_name_the_limit() -> None:
    numpy_error = "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 4.00 GiB"
    assert explain_failure(numpy_error, 1536, "cpu").startswith(
        "exceeded its memory limit (1536 MB, KERNELWATCH_RUNNER_MEMORY_LIMIT_MB): numpy")
    assert explain_failure("MemoryError", 1536, "tpu").startswith("exceeded its memory limit")
    xla_error = "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 4294967296 bytes."
    assert explain_failure(xla_error, 1536, "cpu").startswith("exceeded its memory limit")
    assert explain_failure(xla_error, 1536, "gpu") == xla_error  # the device's memory, not the rlimit
    assert explain_failure(numpy_error, None, "cpu") == numpy_error
    assert explain_failure("ValueError: no MemoryError here", 1536, "cpu") == "ValueError: no MemoryError here"


def test_exits_past_a_limit_say_which() -> None:
    assert describe_exit(-signal.SIGXCPU).startswith("killed by SIGXCPU: CPU-time limit exceeded")
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL (out of memory?)"


def test_a_process_gets_the_limits() -> None:
    probe = """
import json, resource
from runners.sandbox import Limits, allow_cpu, apply_limits
apply_limits(Limits(memory_mb=1024, open_files=64))
allow_cpu(7)
print(json.dumps({k: resource.getrlimit(getattr(resource, k)) for k in
                  ("RLIMIT_DATA", "RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_CPU")}))
"""
    out = json.loads(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                                    text=True).stdout)
    assert out["RLIMIT_DATA"] == [2**30, 2**30]
    assert out["RLIMIT_NOFILE"] == [64, 64]
    assert out["RLIMIT_CORE"] == [0, 0]
    assert 7 <= out["RLIMIT_CPU"][0] <= 9
