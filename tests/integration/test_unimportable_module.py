"""A suite module that does not import at one commit costs its own benchmarks there, not the whole suite: the
pull request that adds a kernel and its benchmark (the benchmarks applied to every commit, as a project file
sets them) passes its gate with the new benchmark failed at the merge-base, a head that breaks a module's import
fails it (worked in base, fails in head), and a module no commit can import is one line and exit 2. Real git,
real benchmark processes, `kernelwatch ci` and `run` as a CI job calls them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.gitrepo import commit_all, git
from tests.processes import clean_env

BENCH = '''
import numpy as np
from runners.suite import Case, benchmark, grid
from tinyk import {kernel}

@benchmark(suite="tiny", params=grid(n=[256]))
def {kernel}d(n):
    x = np.arange(n, dtype=np.float32)
    return Case(fn={kernel}, args=(x,), reference=lambda: x * {factor})
'''
# One round a side: these check what is failed where, not a verdict (which needs rounds, and the timing tier).
FAST = ["--samples", "3", "--warmup", "1", "--no-capture"]


def kernelwatch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def library(root: Path) -> Path:
    """tinyk with one kernel and its benchmark, then a commit adding a second kernel and its benchmark."""
    (root / "tinyk").mkdir(parents=True)
    (root / "benchmarks").mkdir()
    (root / "kernelwatch.toml").write_text('benchmarks = "benchmarks"\nname = "tinyk"\n')
    (root / "tinyk" / "__init__.py").write_text("def double(x):\n    return x * 2\n")
    (root / "benchmarks" / "bench_double.py").write_text(BENCH.format(kernel="double", factor=2))
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "double, and its benchmark")
    (root / "tinyk" / "__init__.py").write_text("def double(x):\n    return x * 2\n\n\n"
                                                "def triple(x):\n    return x * 3\n")
    (root / "benchmarks" / "bench_triple.py").write_text(BENCH.format(kernel="triple", factor=3))
    commit_all(root, "triple, and its benchmark")
    return root


def rows(stdout: str) -> dict[str, dict[str, object]]:
    return {b["name"]: b for b in json.loads(stdout)["benchmarks"] if b["metric"] == "wall_time"}


def test_a_module_that_does_not_import_at_one_commit_costs_its_benchmarks_there(tmp_path: Path) -> None:
    repo = library(tmp_path / "tinyk")
    env = clean_env(tmp_path / "home")

    # The pull request adding triple: at the merge-base its benchmark module cannot import tinyk.triple.
    added = kernelwatch(["ci", "--repo", str(repo), "--base", "main~1", "--rounds", "1", "--format", "json", *FAST],
                        env)
    assert added.returncode == 0, added.stderr[-3000:]
    found = rows(added.stdout)
    assert found["doubled"]["verdict"] != "failed" and found["tripled"]["head"]["status"] == "ok", found
    assert found["tripled"]["base"]["status"] == "failed", found["tripled"]
    assert "'bench_triple' did not import at this commit: ImportError: cannot import name 'triple'" in \
        str(found["tripled"]["base"]["message"]), found["tripled"]

    # A selection that leaves the module out: nothing of it is lost at the base, nothing is said.
    narrow = kernelwatch(["ci", "--repo", str(repo), "--base", "main~1", "--rounds", "1", "--suite", "tiny/doubled",
                          "--format", "json", *FAST], env)
    assert narrow.returncode == 0, narrow.stderr[-3000:]
    assert set(rows(narrow.stdout)) == {"doubled"}
    # The stand-in failure carries the version of the code the other commit measured: it files with that series.
    out = tmp_path / "manifests"
    made = kernelwatch(["run", "--repo", str(repo), "--commit", "main~1", "--commit", "main", "--no-ingest",
                        "--output", str(out), *FAST], env)
    assert made.returncode == 0, made.stderr[-3000:]
    by_sha = {m["commit"]["sha"]: m for m in (json.loads(p.read_text()) for p in out.glob("*.json"))}
    base_doc, head_doc = by_sha[git(repo, "rev-parse", "main~1")], by_sha[git(repo, "rev-parse", "main")]
    [stand_in] = [r for r in base_doc["results"] if r["name"] == "tripled"]
    [measured] = [r for r in head_doc["results"] if r["name"] == "tripled"]
    assert stand_in["status"] == "failed" and stand_in["benchmark_version"] == measured["benchmark_version"]

    # A head that breaks a module's import: its benchmark worked in base and fails in head, and the gate fails.
    (repo / "tinyk" / "__init__.py").write_text("def twice(x):\n    return x * 2\n\n\n"
                                                "def triple(x):\n    return x * 3\n")
    commit_all(repo, "double renamed, its benchmark left behind")
    broken = kernelwatch(["ci", "--repo", str(repo), "--base", "main~1", "--rounds", "1", "--format", "json",
                          *FAST], env)
    assert broken.returncode == 1, broken.stderr[-3000:]
    found = rows(broken.stdout)
    assert found["doubled"]["base"]["status"] == "ok" and found["doubled"]["head"]["status"] == "failed", found
    assert "'bench_double' did not import at this commit" in str(found["doubled"]["head"]["message"])
    assert found["tripled"]["base"]["status"] == found["tripled"]["head"]["status"] == "ok"
    assert "Traceback" not in broken.stderr

    # The first commit alone, where the benchmarks' triple module cannot import: nothing else declares its
    # benchmarks, so it is said in one line, exit 2.
    alone = kernelwatch(["run", "--repo", str(repo), "--commit", "main~2", *FAST], env)
    assert alone.returncode == 2, alone.stderr[-3000:]
    assert "the benchmark module 'bench_triple' does not import at main~2: ImportError" in alone.stderr, alone.stderr
    assert "Traceback" not in alone.stderr and len(alone.stderr.strip().splitlines()) == 1


def test_ci_in_a_repository_with_no_suite_is_one_line_and_exit_2_and_the_commit_adding_one_passes(
        tmp_path: Path) -> None:
    """No suite at either commit was a traceback and exit 1 (the status a CI job reads as a regression found). The
    pull request that adds the suite (its merge-base has none) was a failed run: its benchmarks now fail at the
    merge-base alone, and the gate passes."""
    repo = tmp_path / "plain"
    repo.mkdir()
    (repo / "README.md").write_text("no benchmarks here\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "one")
    (repo / "README.md").write_text("still none\n")
    commit_all(repo, "two")
    env = clean_env(tmp_path / "home")
    done = kernelwatch(["ci", "--repo", str(repo), "--base", "main~1", *FAST], env)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "no benchmark suite at any of the 2 commits" in done.stderr and "kernels_under_test" in done.stderr, \
        done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr

    (repo / "kernels_under_test").mkdir()
    (repo / "kernels_under_test" / "__init__.py").write_text("")
    (repo / "kernels_under_test" / "bench_double.py").write_text(
        BENCH.replace("from tinyk import {kernel}", "").replace("fn={kernel}", "fn=lambda x: x * 2")
        .format(kernel="double", factor=2))
    commit_all(repo, "the suite")
    added = kernelwatch(["ci", "--repo", str(repo), "--base", "main~1", "--format", "json", *FAST], env)
    assert added.returncode == 0, added.stderr[-3000:]
    [row] = rows(added.stdout).values()
    assert row["head"]["status"] == "ok" and row["base"]["status"] == "failed", row  # type: ignore[index]
    assert "this commit has no benchmark suite" in str(row["base"]["message"]), row  # type: ignore[index]
