"""Small composable builders of test data: a manifest, a result, a commit; override what a test cares about."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from service.detect.compare import Side


def sha_for(label: str) -> str:
    return hashlib.sha1(label.encode()).hexdigest()


def environment(**overrides: Any) -> dict[str, Any]:
    env = {
        "backend": "cpu", "device_kind": "cpu", "device_count": 1, "jax_version": "0.10.2",
        "jaxlib_version": "0.10.2", "xla_flags": "", "cpu_model": "Test CPU", "host_isa": "x86_64+avx2",
        "python_version": "3.11.7", "extra": {"hostname": "test"},
    }
    env.update(overrides)
    return env


def calibration(**overrides: Any) -> dict[str, Any]:
    """A CPU host's calibration as a runner announces it (round figures: 100 GFLOP/s, 10 GB/s, ridge at 10)."""
    c: dict[str, Any] = {"flops_per_s": 100e9, "bytes_per_s": 10e9, "dtype": "float32"}
    c.update(overrides)
    return c


H200 = {"backend": "gpu", "device_kind": "NVIDIA H200", "cpu_model": "Host CPU"}


def result(suite: str = "softmax", name: str = "softmax_rows", samples: list[float] | None = None,
           **overrides: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "suite": suite, "name": name, "params": {"rows": 256, "cols": 4096}, "metric": "wall_time", "unit": "s",
        "direction": "lower_is_better", "status": "ok",
        "samples": samples if samples is not None else [1e-3, 1.01e-3, 0.99e-3],
        "compile_time_s": 0.05, "flops": 5.0 * 256 * 4096, "bytes_accessed": 8.0 * 256 * 4096, "max_abs_error": 1e-7,
    }
    r.update(overrides)
    return r


def commit(position: int, repo: str = "demo", **overrides: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "sha": sha_for(f"{repo}-{position}"),
        "parents": [sha_for(f"{repo}-{position - 1}")] if position else [],
        "author": "Ada Park <ada@example.com>",
        "authored_at": (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=position)).isoformat(),
        "subject": f"commit number {position}",
        "position": position,
    }
    c.update(overrides)
    return c


def manifest(position: int = 0, results: list[dict[str, Any]] | None = None, repo: str = "demo",
             **overrides: Any) -> dict[str, Any]:
    started = datetime(2026, 2, 1, tzinfo=UTC) + timedelta(minutes=position)
    m: dict[str, Any] = {
        "format_version": 1,
        "run_id": uuid.uuid4().hex,
        "repository": {"name": repo, "url": f"file:///tmp/{repo}", "default_branch": "main"},
        "commit": commit(position, repo),
        "branch": "main",
        "trigger": "push",
        "environment": environment(),
        "started_at": started.isoformat(),
        "finished_at": (started + timedelta(seconds=30)).isoformat(),
        "status": "complete",
        "results": results if results is not None else [result()],
    }
    m.update(overrides)
    return m


def step_series_manifests(levels: list[float], noise: float = 0.01, seed: int = 0, repo: str = "demo",
                          samples: int = 10) -> list[dict[str, Any]]:
    """One manifest per commit whose single result's samples sit around ``levels[i]`` seconds."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for position, level in enumerate(levels):
        values = [float(level * (1 + noise * rng.standard_normal())) for _ in range(samples)]
        out.append(manifest(position, [result(samples=values)], repo=repo))
    return out


def runs_of(samples: tuple[float, ...], runs: int = 3, shift: float = 0.002) -> Side:
    """A comparison side of ``runs`` runs (benchmark processes) made of these samples, dealt round-robin, each run
    a little off the others (by ``shift``): the run is the unit a comparison counts, so a side of one run could
    not be decided at all. Deterministic, so golden files do not move."""
    dealt = [[v * (1 + shift * (r - (runs - 1) / 2)) for v in samples[r::runs]] for r in range(runs)]
    return Side.of_runs([d for d in dealt if d])


def replicated(doc: dict[str, Any], runs: int = 3, shift: float = 0.003) -> list[dict[str, Any]]:
    """The manifest as ``runs`` runs of the same commit (as `kernelwatch run --rounds` makes them): new run ids,
    a minute apart, each run's samples a little off the others' (by ``shift``), so that a comparison has the
    replicates it counts. The first is the manifest itself."""
    import copy

    out = [doc]
    started = datetime.fromisoformat(doc["started_at"])
    for r in range(1, runs):
        twin = copy.deepcopy(doc)
        twin["run_id"] = uuid.uuid4().hex
        twin["started_at"] = (started + timedelta(minutes=r)).isoformat()
        twin["finished_at"] = (started + timedelta(minutes=r, seconds=30)).isoformat()
        factor = 1 + shift * (r if r % 2 else -r)
        for result in twin["results"]:
            result["samples"] = [v * factor for v in result.get("samples") or []]
        out.append(twin)
    return out
