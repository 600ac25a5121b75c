"""The whole default suite, quick points, through `kernelwatch run` as a user runs it on this CPU: every
kernel passes its correctness check, collectives run over 8 simulated devices in a run of their own."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from service.contract import parse_manifest
from service.model.result_roofline import ABOVE_ROOF_TOLERANCE
from service.store.db import make_engine, make_session_factory
from service.store.models import Artifact, HloModuleRecord, KernelCode, OpStat, Result, ResultArtifact, Run, Series
from tests.conftest import REPO_ROOT
from tests.gitrepo import git
from tests.processes import clean_env

# timing: it holds every result under the host's calibrated roofs, and a calibration or a benchmark measured beside
# the parallel tier's other tests measures them, not the host (Makefile runs this tier alone).
pytestmark = [pytest.mark.slow, pytest.mark.timing]

FAMILIES = {"matmul", "quantized", "attention", "norms", "softmax", "softmax_long", "sampling", "collectives"}




def test_quick_suite_runs_clean(tmp_path: Path) -> None:
    repo = tmp_path / "suite"
    shutil.copytree(REPO_ROOT / "kernels_under_test", repo / "kernels_under_test",
                    ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "suite")
    # Calibration on, as a user has it, kept in the test run's file (tests/conftest.py) as a runner keeps its own:
    # the host is measured once per environment (the 8-device run's XLA flags make it another) by whichever run of
    # this tier needs it first (the demo's, where it ran before), and every result is placed under its roofs.
    env = clean_env(tmp_path / "home", KERNELWATCH_CALIBRATE="1")
    out = tmp_path / "manifests"
    proc = subprocess.run([sys.executable, "-m", "service.cli", "run", "--repo", str(repo), "--quick",
                           "--samples", "3", "--warmup", "1", "--output", str(out)],
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

    # Every benchmark's trace, HLO and generated code are stored, parsed and linked by fusion name.
    engine = make_engine(f"sqlite:///{tmp_path / 'home' / 'kernelwatch.db'}")
    with make_session_factory(engine)() as s:
        walls = list(s.scalars(select(Result).join(Series).where(Series.metric == "wall_time")))
        assert len(walls) == 30
        for result in walls:
            label = f"result {result.id}"
            kinds = set(s.scalars(select(Artifact.kind).join(ResultArtifact)
                                  .where(ResultArtifact.result_id == result.id)))
            assert {"xplane", "hlo", "analysis"} <= kinds, (label, kinds)
            ops = {o.op for o in s.scalars(select(OpStat).where(OpStat.result_id == result.id))}
            modules = list(s.scalars(select(HloModuleRecord).where(HloModuleRecord.result_id == result.id)))
            assert ops and modules, label
            generated = {f["name"] for m in modules for f in m.fusions if f["kind"] in ("kLoop", "kInput", "kOutput")}
            # XLA CPU names the function of a non-fused op "<op>_kernel" (e.g. dot.2_kernel).
            kernels = {k.name.removesuffix("_kernel")
                       for k in s.scalars(select(KernelCode).where(KernelCode.result_id == result.id))}
            if generated:
                # Kernels of called computations (a sort's comparator, "region_0.1") link to no fusion; the
                # generated fusions must find their code.
                assert kernels & generated, (label, generated, kernels)
        assert s.scalar(select(func.count(Artifact.id)).where(Artifact.parse_error.is_not(None))) == 0

        # The cache-aware roofline bounds every result: each has figures against its host's calibration (the
        # memory roof of its working set's level) and none is measured faster than its roof allows, beyond the
        # measurement noise ABOVE_ROOF_TOLERANCE states (10 %: a best-of-15 calibration against a median).
        calibrations = [r.calibration for r in s.scalars(select(Run))]
        assert calibrations and all(c and len(c["bandwidth"]) >= 10 and c["caches"] for c in calibrations)
        placed = [r for r in walls if r.roofline_fraction is not None]
        assert len(placed) == len(walls)
        above = [(r.id, r.roofline_fraction, r.roofline_peak_source) for r in placed if r.roofline_above]
        assert not above, above
        assert all(r.roofline_fraction <= 1 + ABOVE_ROOF_TOLERANCE for r in placed)
    engine.dispose()
