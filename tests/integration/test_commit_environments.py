"""Each commit measured in its own environment: a library (src layout) whose requirements.txt pins an older JAX
than KernelWatch's, then moves to KernelWatch's own. With ``environment = "commit"`` in its project file, every
commit's benchmarks run in an environment built from that commit's pins (uv, cached: two commits with the same
pins share one), the harness imported from a copy of its own, and each run's environment records the JAX it
really ran. A declaration that would build a package (code of the repository's choosing) is refused before
anything of it runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from runners.envs import Declaration, environment_key, prune_environments, pyproject_dependencies
from tests.gitrepo import commit_all, git
from tests.processes import clean_env

OLD_JAX = "0.4.38"  # older than any JAX KernelWatch itself runs (pyproject.toml: jax>=0.10)

LIBRARY = '''"""oldlib: kernels written for the JAX its requirements pin."""
import jax.numpy as jnp


def scale(x):
    return jnp.tanh(x * 2.0).sum()
'''

BENCHMARK = '''import jax
import numpy as np

import oldlib
from runners.suite import Case, benchmark


@benchmark(suite="oldlib", params=[{"n": 256}])
def scale(n: int) -> Case:
    x = jax.numpy.asarray(np.ones((n, n), dtype=np.float32))
    return Case(fn=oldlib.scale, args=(x,))
'''


def pins(jax_version: str) -> str:
    return f"jax=={jax_version}\njaxlib=={jax_version}\n"


def kernelwatch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], env=env, capture_output=True, text=True,
                          timeout=1200)


def test_each_commit_runs_in_the_environment_its_own_pins_declare(tmp_path: Path) -> None:
    repo, bench, home = tmp_path / "oldlib", tmp_path / "benchmarks", tmp_path / "home"
    (repo / "src" / "oldlib").mkdir(parents=True)
    (repo / "src" / "oldlib" / "__init__.py").write_text(LIBRARY)
    (repo / "pyproject.toml").write_text('[project]\nname = "oldlib"\nversion = "0.1"\ndependencies = ["jax"]\n')
    (repo / "requirements.txt").write_text(pins(OLD_JAX))
    git(repo, "init", "-q", "-b", "main")
    shas = [commit_all(repo, "oldlib")]
    (repo / "README.md").write_text("docs\n")
    shas.append(commit_all(repo, "docs"))
    runner_jax = version("jax")
    (repo / "requirements.txt").write_text(pins(runner_jax))
    shas.append(commit_all(repo, f"move to jax {runner_jax}"))
    bench.mkdir()
    (bench / "scale.py").write_text(BENCHMARK)
    (repo / "kernelwatch.toml").write_text('benchmarks = "../benchmarks"\nenvironment = "commit"\n')
    env = clean_env(home)

    out = tmp_path / "manifests"
    ran = kernelwatch(env, "run", "--repo", str(repo), "--commit", shas[0], "--samples", "3", "--no-capture",
                      "--output", str(out))
    assert ran.returncode == 0, ran.stderr[-3000:]
    # A minute of silence was all a first build said.
    assert f"building the environment of {shas[0]} from its requirements.txt" in ran.stderr, ran.stderr[-2000:]
    ranged = kernelwatch(env, "run", "--repo", str(repo), "--commits", f"{shas[0]}..main", "--samples", "3",
                         "--no-capture", "--output", str(out))
    assert ranged.returncode == 0, ranged.stderr[-3000:]
    manifests = [json.loads(p.read_text()) for p in out.glob("*.json")]
    ran_with = {m["commit"]["sha"]: m["environment"]["jax_version"] for m in manifests}
    assert ran_with == {shas[0]: OLD_JAX, shas[1]: OLD_JAX, shas[2]: runner_jax}, ran_with
    # Across the pin, on the same host: compared (was refused as "different environments"), saying what changed.
    across = kernelwatch(env, "compare", shas[1], shas[2], "--format", "json", "--fail-on", "none")
    assert across.returncode == 0, across.stderr[-3000:]
    document = json.loads(across.stdout)
    assert [b["name"] for b in document["benchmarks"] if b["metric"] == "wall_time"] == ["scale"], document
    assert any(f"jax {OLD_JAX} → {runner_jax}" in note and "toolchain together" in note
               for note in document["notes"]), document["notes"]
    # A pull request that moves the pin, gated by ci: its kernels measured under both toolchains and compared, the
    # toolchain change named in the job summary (the gate passed it "not compared", unmeasured, before).
    summary = tmp_path / "summary.md"
    gate = kernelwatch({**env, "GITHUB_STEP_SUMMARY": str(summary)}, "ci", "--repo", str(repo), "--base", shas[1],
                       "--head", shas[2], "--rounds", "1", "--samples", "2", "--no-capture", "--fail-on", "none")
    assert gate.returncode == 0, gate.stderr[-3000:]
    assert "not compared" not in gate.stderr and "not compared" not in summary.read_text()
    assert f"jax {OLD_JAX} → {runner_jax}" in summary.read_text() and "`oldlib/scale n=256`" in summary.read_text()
    for m in manifests:
        [result] = [r for r in m["results"] if r["metric"] == "wall_time"]
        assert result["status"] == "ok", result
    # Two commits with the same pins share one environment: two built for three commits.
    built = [p for p in (home / "envs").iterdir() if (p / "kernelwatch-environment.json").is_file()]
    assert len(built) == 2, sorted(p.name for p in (home / "envs").iterdir())
    # Each holds its packages' bytecode: a benchmark process writes none (PYTHONDONTWRITEBYTECODE), so without it
    # every run would compile jax from source (bench/bytecode.py).
    for environment in built:
        [jax_dir] = environment.glob("lib/python*/site-packages/jax")
        assert list((jax_dir / "__pycache__").glob("__init__.*.pyc")), environment
    # A user-named interpreter instead (--python overrides the project file): the old environment's, at the commit
    # that moved on; its run says it ran the old JAX.
    [old] = [p for p in built if OLD_JAX in (p / "requirements.txt").read_text()]
    named = tmp_path / "named"
    pinned = kernelwatch(env, "run", "--repo", str(repo), "--commit", shas[2], "--python", str(old / "bin" / "python"),
                         "--samples", "3", "--no-capture", "--output", str(named))
    assert pinned.returncode == 0, pinned.stderr[-3000:]
    [manifest] = [json.loads(p.read_text()) for p in named.glob("*.json")]
    assert manifest["environment"]["jax_version"] == OLD_JAX
    # The old JAX's commits compare with each other (one series), not with the new JAX's (another series).
    same = kernelwatch(env, "compare", shas[0], shas[1], "--format", "json", "--fail-on", "none")
    assert same.returncode == 0, same.stderr[-2000:]
    assert [b["verdict"] for b in json.loads(same.stdout)["benchmarks"] if b["metric"] == "wall_time"] != []

    # Pruned with the checkouts once no run has used them for a while (just used here: none goes).
    kept = kernelwatch(env, "prune", "--checkouts", "--older-than", "1h")
    assert kept.returncode == 0 and "deleted 0 environment(s)" in kept.stdout, kept.stdout + kept.stderr
    later = time.time() + 7200
    assert sorted(prune_environments(home / "envs", 3600, later, dry_run=True)) == sorted(built)
    assert sorted(prune_environments(home / "envs", 3600, later)) == sorted(built)
    assert [p.name for p in (home / "envs").iterdir()] == ["harness"]  # the harness copy stays (small, shared)


def test_a_declaration_that_would_build_repository_code_is_refused(tmp_path: Path) -> None:
    """requirements.txt naming a directory with a setup.py: building it would run that file outside the sandbox.
    Only wheels are installed, so the build never starts: exit 2, one line, and the marker it would write is
    absent."""
    repo, bench, home = tmp_path / "lib", tmp_path / "benchmarks", tmp_path / "home"
    marker = tmp_path / "setup-py-ran"
    (repo / "evil").mkdir(parents=True)
    (repo / "evil" / "setup.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                            "from setuptools import setup\nsetup(name='evil', version='1')\n")
    (repo / "requirements.txt").write_text("./evil\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "lib")
    bench.mkdir()
    (bench / "scale.py").write_text(BENCHMARK)
    env = clean_env(home)
    ran = kernelwatch(env, "run", "--repo", str(repo), "--benchmarks", str(bench), "--environment", "commit",
                      "--samples", "2", "--no-capture")
    assert ran.returncode == 2, ran.stderr[-3000:]
    assert "building its environment from requirements.txt" in ran.stderr and "Traceback" not in ran.stderr
    assert not marker.exists()
    assert not [p for p in (home / "envs").glob("*") if p.name != "harness"]  # nothing half-built left


def test_what_an_environment_is_keyed_by() -> None:
    """The same requirements on the same interpreter and builder are one environment; any change is another."""
    a = Declaration("requirements.txt", pins(OLD_JAX))
    key = environment_key(a, "/usr/bin/python3.11 3.11.2", "uv 0.13.8")
    assert key == environment_key(Declaration("uv.lock", pins(OLD_JAX)), "/usr/bin/python3.11 3.11.2", "uv 0.13.8")
    assert key != environment_key(Declaration("requirements.txt", pins("0.4.37")), "/usr/bin/python3.11 3.11.2",
                                  "uv 0.13.8")
    assert key != environment_key(a, "/usr/bin/python3.12 3.12.1", "uv 0.13.8")
    assert key != environment_key(a, "/usr/bin/python3.11 3.11.2", "uv 0.14.0")
    assert pyproject_dependencies('[project]\nname = "x"\ndependencies = ["jax>=0.4", "numpy"]\n') == ["jax>=0.4",
                                                                                                     "numpy"]
    assert pyproject_dependencies('[project]\nname = "x"\n') is None


def test_a_uv_lock_is_read_first_and_its_project_left_out(tmp_path: Path) -> None:
    """A commit with uv.lock (made here by `uv lock`, as its developers would have) declares the locked versions,
    not the ranges of its pyproject.toml, and never the project itself (imported from the checkout)."""
    from runners.envs import _uv, find_declaration

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "locked"\nversion = "0.1"\nrequires-python = ">=3.11"\n'
                                             f'dependencies = ["jax>=0.4.30,<={OLD_JAX}"]\n')
    (tmp_path / "requirements.txt").write_text("numpy\n")  # the lock wins over it
    subprocess.run([_uv(), "lock", "--quiet", "--no-config", "--project", str(tmp_path)], check=True, timeout=300,
                   capture_output=True)
    declaration = find_declaration(tmp_path)
    assert declaration.source == "uv.lock"
    lines = [line.split(";")[0].strip() for line in declaration.requirements.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert f"jax=={OLD_JAX}" in lines and f"jaxlib=={OLD_JAX}" in lines, lines
    assert not any(line.startswith(("locked", "-e", ".")) for line in lines), lines
