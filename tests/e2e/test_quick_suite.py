"""The whole default suite, quick points, through `kernelwatch run` as a user runs it on this CPU: every
kernel passes its correctness check, collectives run over 8 simulated devices in a run of their own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from service.contract import parse_manifest
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

FAMILIES = {"matmul", "quantized", "attention", "norms", "softmax", "softmax_long", "sampling", "collectives"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=T", *args], check=True,
                   capture_output=True)


def test_quick_suite_runs_clean(tmp_path: Path) -> None:
    repo = tmp_path / "suite"
    shutil.copytree(REPO_ROOT / "kernels_under_test", repo / "kernels_under_test",
                    ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "suite")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWATCH_")}
    env["KERNELWATCH_HOME"] = str(tmp_path / "home")
    out = tmp_path / "manifests"
    proc = subprocess.run([sys.executable, "-m", "service.cli", "run", "--repo", str(repo), "--quick",
                           "--samples", "3", "--warmup", "1", "--no-ingest", "--output", str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifests = [parse_manifest(json.loads(p.read_text())) for p in sorted(out.iterdir())]
    by_devices = {m.environment.device_count: m for m in manifests}
    assert set(by_devices) == {1, 8}, [m.environment.device_count for m in manifests]
    failures = [f"{r.suite}/{r.name} {r.params_key()}: {r.message}" for m in manifests for r in m.results
                if r.status != "ok"]
    assert not failures, "\n".join(failures)
    assert all(m.status == "complete" for m in manifests)
    suites = {r.suite for m in manifests for r in m.results}
    assert FAMILIES <= suites, FAMILIES - suites
    assert {r.suite for r in by_devices[8].results} == {"collectives"}
    metrics = {(r.suite, r.metric) for m in manifests for r in m.results}
    assert ("collectives", "algbw") in metrics and ("quantized", "rel_error") in metrics
    assert ("sampling", "recall") in metrics
