"""The collectives' quick points, run for real on 8 simulated CPU devices.

JAX fixes its device count when it initialises, so the 8-device run happens in a subprocess started with
XLA_FLAGS=--xla_force_host_platform_device_count=8; it prints its measurements as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

SCRIPT = """
import dataclasses, json, sys
from pathlib import Path

import jax

from runners.harness import TimingPlan, measure
from runners.suite import discover, select

instances = list(select(discover(Path(sys.argv[1])), "collectives/*", quick=True))
results = [dataclasses.asdict(m) for i in instances for m in measure(i, TimingPlan(samples=3, warmup=1))]
print(json.dumps({"device_count": jax.device_count(), "instances": [i.key for i in instances], "results": results}))
"""

EXPECTED = {"all_reduce", "all_gather", "reduce_scatter", "ring_all_reduce_ppermute"}


def run_collectives() -> dict:  # type: ignore[type-arg]
    env = dict(os.environ)
    # Keep any flags already set, add the device count; CPU only, so the count applies whatever is installed.
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(REPO_ROOT)], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-5000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_collectives_run_on_eight_devices_and_report_bandwidth() -> None:
    report = run_collectives()
    assert report["device_count"] == 8
    results = report["results"]
    failed = [f"{r['key']} {r['metric']}: {r['message']}" for r in results if r["status"] != "ok"]
    assert not failed, "\n".join(failed)
    names = {r["name"] for r in results}
    assert names == EXPECTED, names
    for name in EXPECTED:
        mine = [r for r in results if r["name"] == name]
        timing = [r for r in mine if r["metric"] == "wall_time"]
        algbw = [r for r in mine if r["metric"] == "algbw"]
        assert timing and all(t > 0 for r in timing for t in r["samples"]), name
        # Algorithm bandwidth, one value per sample, in GB/s and higher is better.
        assert algbw, f"{name} reports no algbw"
        for r in algbw:
            assert r["unit"] == "GB/s" and r["direction"] == "higher_is_better"
            assert len(r["samples"]) == len(timing[0]["samples"]) and all(v > 0 for v in r["samples"])
