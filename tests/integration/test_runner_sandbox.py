"""Benchmark code is untrusted: its process sees no secret of the runner, works in a directory of its own, and a
kernel past a resource limit is recorded as failed while the rest of the suite still runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.local import RunRequest, run_at_commit
from service.contract import parse_manifest
from tests.gitrepo import commit_all, suite_repo

SECRETS = {
    "KERNELWATCH_TOKEN": "kw_secret_token_xyz",
    "KERNELWATCH_RUNNER_TOKEN": "kw_secret_runner_xyz",
    "KERNELWATCH_SLACK_TOKEN": "xoxb-kw_secret_slack",
    "KERNELWATCH_GITHUB_WEBHOOK_SECRET": "kw_secret_webhook",
    "KERNELWATCH_DATABASE_URL": "postgresql://kw:kw_secret_pw@db/kw",
    "KERNELWATCH_REDIS_URL": "redis://:kw_secret_redis@broker:6379/0",
    "GITHUB_TOKEN": "ghp_kw_secret_github",
    "AWS_SECRET_ACCESS_KEY": "kw_secret_aws",
    "XLA_UPLOAD_TOKEN": "kw_secret_in_an_allowed_prefix",
}
MEMORY_LIMIT_MB = 1536  # JAX on CPU starts in ~0.3 GB of data; 4 GB arrays are far past it

# SEEN is replaced by a path outside the sandbox: what the kernel saw must outlive its process to be checked.
HOSTILE_SUITE = '''
import json, os, sys, tempfile, time
import jax.numpy as jnp
import numpy as np
import kernels_under_test
from runners.suite import Case, benchmark

def ok_case():
    x = np.ones(64, dtype=np.float32)
    return Case(fn=lambda v: v * 2, args=(x,), reference=lambda: x * 2)

@benchmark(suite="hostile")
def a_fine():
    return ok_case()

@benchmark(suite="hostile")
def b_snoops():
    seen = {"environ": dict(os.environ), "cwd": os.getcwd(), "home": os.path.expanduser("~"),
            "tmp": tempfile.gettempdir(), "suite": kernels_under_test.__file__, "path": sys.path}
    with open(SEEN, "w") as f:
        json.dump(seen, f)
    raise ValueError("saw " + repr(sorted(os.environ)) + " in " + os.getcwd())

@benchmark(suite="hostile")
def c_opens_files():
    files = [open(os.devnull) for _ in range(10_000)]
    return ok_case()

@benchmark(suite="hostile")
def d_numpy_hog():
    x = np.empty(4 * 2**30, dtype=np.uint8)  # never touched: without a limit this costs no memory
    return ok_case()

@benchmark(suite="hostile")
def e_jax_hog():
    x = jnp.ones((2**30,), dtype=jnp.float32)
    return Case(fn=lambda v: v * 2, args=(x,))

@benchmark(suite="hostile", timeout_s=120)
def f_burns_cpu():
    while True:
        pass

@benchmark(suite="hostile")
def g_fine_after():
    return ok_case()
'''


@pytest.fixture
def runner_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # a harmless XLA setting: it gets through
    monkeypatch.setenv("KERNELWATCH_RUNNER_MEMORY_LIMIT_MB", str(MEMORY_LIMIT_MB))
    monkeypatch.setenv("KERNELWATCH_RUNNER_CPU_LIMIT_S", "5")


def test_hostile_kernels_see_no_secret_and_hit_their_limits(tmp_path: Path, runner_settings: None) -> None:
    seen_file = tmp_path / "seen.json"
    repo = tmp_path / "repo"
    suite_repo(repo, HOSTILE_SUITE.replace("SEEN", repr(str(seen_file))), module="hostile")
    commit_all(repo, "hostile suite")
    cache = (tmp_path / "cache").resolve()

    [doc] = run_at_commit(RunRequest(repo=repo, rev="HEAD", samples=2, warmup=0), cache)

    manifest = parse_manifest(doc)
    results = {r.name: r for r in manifest.results if r.metric == "wall_time"}
    assert manifest.status == "partial"
    assert results["a_fine"].status == "ok" and results["g_fine_after"].status == "ok"

    # (a) no secret anywhere the kernel could look, nor in anything it reported
    seen = json.loads(seen_file.read_text())
    for text in (json.dumps(seen), json.dumps(doc)):
        assert "kw_secret" not in text
    assert not set(SECRETS) & set(seen["environ"])
    assert seen["environ"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert "KERNELWATCH_CALIBRATE" in seen["environ"]
    assert "saw [" in (results["b_snoops"].message or "")

    # (b) a working directory, HOME and TMPDIR of its own, gone afterwards; the suite is the checkout's
    sandbox = Path(seen["cwd"])
    assert sandbox.name.startswith("kw-bench-") and not sandbox.is_relative_to(cache)
    assert Path(seen["home"]).parent == sandbox and Path(seen["tmp"]).parent == sandbox
    assert not sandbox.exists()
    assert Path(seen["suite"]).resolve().is_relative_to(cache)
    assert str(sandbox) not in seen["path"] and "" not in seen["path"]

    # (c) the open-files limit
    assert "Too many open files" in (results["c_opens_files"].message or "")

    # (d) the memory limit, for numpy's allocations and XLA's
    for name in ("d_numpy_hog", "e_jax_hog"):
        assert f"exceeded its memory limit ({MEMORY_LIMIT_MB} MB" in (results[name].message or ""), name
    assert "MemoryError" in (results["d_numpy_hog"].message or "")
    assert "RESOURCE_EXHAUSTED" in (results["e_jax_hog"].message or "")

    # (e) the CPU-time limit ends the process; the next benchmark runs in a fresh one
    assert "killed by SIGXCPU: CPU-time limit exceeded" in (results["f_burns_cpu"].message or "")
    assert all(not results[n].samples for n in ("b_snoops", "c_opens_files", "d_numpy_hog", "e_jax_hog",
                                                "f_burns_cpu"))
