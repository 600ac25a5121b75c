"""The commit's own code, proven: with the project installed editable in the runner's own environment (how every
developer works), each commit's benchmarks still import the project from that commit's checkout. Real pip, a
real editable install, real benchmark processes; the probe is a quality metric each commit's code reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from runners.project_imports import foreign_modules, project_names, source_roots
from tests.gitrepo import commit_all, git

PROBE_SUITE = '''import jax.numpy as jnp
import numpy as np

import {package}
from runners.suite import Case, QualityMetric, benchmark


@benchmark(suite="probe", params=[{{"n": 64}}])
def which(n: int) -> Case:
    x = np.ones(n, dtype=np.float32)
    return Case(fn={package}.kernel, args=(jnp.asarray(x),),
                quality=lambda out: [QualityMetric("code_version", float({package}.VERSION))])
'''

LIBRARY = '''VERSION = {version}


def kernel(x):
    return x * {version}.0
'''

PYPROJECT = '''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{package}"
version = "0.0.1"

[tool.setuptools.packages.find]
where = ["src"]
'''


def library_repo(root: Path, package: str) -> list[str]:
    """A src-layout library, shaped like a real one: two commits whose code reports VERSION 1 and 2."""
    code = root / "src" / package
    code.mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT.format(package=package))
    (root / "kernels_under_test").mkdir()
    (root / "kernels_under_test" / "__init__.py").write_text("")
    (root / "kernels_under_test" / "probe.py").write_text(PROBE_SUITE.format(package=package))
    (code / "__init__.py").write_text(LIBRARY.format(version=1))
    git(root, "init", "-q", "-b", "main")
    first = commit_all(root, "v1")
    (code / "__init__.py").write_text(LIBRARY.format(version=2))
    return [first, commit_all(root, "v2")]


def test_an_editable_install_of_the_project_does_not_shadow_the_measured_commit(tmp_path: Path) -> None:
    package = f"kwprobe_{uuid.uuid4().hex[:8]}"  # a name nothing else in the environment has
    repo = tmp_path / "lib"
    repo.mkdir()
    first, second = library_repo(repo, package)
    # The working copy is edited past both commits, and installed editable into the runner's environment.
    (repo / "src" / package / "__init__.py").write_text(LIBRARY.format(version=99))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", "-e", str(repo)], check=True,
                   capture_output=True, timeout=300)
    try:
        installed = subprocess.run([sys.executable, "-c", f"import {package}; print({package}.VERSION)"],
                                   capture_output=True, text=True, check=True, cwd=tmp_path)
        assert installed.stdout.strip() == "99"  # without KernelWatch's finder, every commit would measure 99
        env = {**os.environ, "KERNELWATCH_HOME": str(tmp_path / "home")}
        env.pop("KERNELWATCH_DATABASE_URL", None)
        env.pop("KERNELWATCH_REDIS_URL", None)
        versions = {}
        for sha in (first, second):
            out = tmp_path / f"out-{sha[:8]}"
            proc = subprocess.run([sys.executable, "-m", "service.cli", "run", "--repo", str(repo), "--commit", sha,
                                   "--samples", "2", "--no-capture", "--output", str(out)], env=env,
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stderr[-3000:]
            [manifest] = [json.loads(p.read_text()) for p in out.glob("*.json")]
            [probe] = [r for r in manifest["results"] if r["metric"] == "code_version"]
            assert probe["status"] == "ok", probe
            versions[sha] = probe["samples"][0]
        assert versions == {first: 1.0, second: 2.0}
    finally:
        subprocess.run([*pip, "uninstall", "-y", package], capture_output=True, timeout=300)


def test_project_names_and_foreign_modules(tmp_path: Path) -> None:
    (tmp_path / "src" / "mylib").mkdir(parents=True)
    (tmp_path / "src" / "mylib" / "__init__.py").write_text("")
    (tmp_path / "tool.py").write_text("")
    (tmp_path / "json.py").write_text("")  # never served from the checkout: the standard library's name
    (tmp_path / "docs").mkdir()  # not a package
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "runners").mkdir()
    (tmp_path / "runners" / "__init__.py").write_text("")
    roots = source_roots(tmp_path)
    assert roots == [tmp_path / "src", tmp_path]
    names = project_names(roots, {"runners": object()})
    assert names == {"mylib": tmp_path / "src", "tool": tmp_path}

    class Module:
        def __init__(self, file: str | None) -> None:
            self.__file__ = file

    modules = {"mylib": Module(str(tmp_path / "src" / "mylib" / "__init__.py")),
               "mylib.ops": Module("/elsewhere/mylib/ops.py"), "tool": Module(None), "numpy": Module("/x/numpy.py")}
    assert foreign_modules(names, tmp_path, modules) == ["mylib.ops (/elsewhere/mylib/ops.py)"]  # type: ignore[arg-type]
