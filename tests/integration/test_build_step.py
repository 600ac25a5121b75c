"""Issue 17: "how to install the project at a commit". The project file's ``build`` runs in each checkout before its
benchmarks (runners/build_step.py), sandboxed as benchmark code is, so a library whose kernels need a build step
(compiled extensions built in place) is measured with what that commit builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runners.build_step import BuildFailed, command_for, parse_build, run_build
from runners.project_file import ProjectFileError, read_project_settings
from runners.sandbox import Limits
from tests.gitrepo import FASTOPS_BENCHMARK, FASTOPS_LIBRARY, commit_all, git

# The "compiled extension": a module the build writes into the package, from a template the commit holds (so each
# commit's build makes that commit's code), plus what the build saw of its surroundings.
BUILD_SCRIPT = '''import json, os, pathlib, sys
here = pathlib.Path.cwd()
template = (here / "fastops" / "_native.py.in").read_text()
(here / "fastops" / "_native.py").write_text(template)
(here / "build-facts.json").write_text(json.dumps({
    "cwd": str(here), "env": sorted(os.environ), "home": os.environ.get("HOME"), "python": sys.executable}))
'''

LIBRARY = '''"""fastops: its kernel lives in a module only the build makes."""
from fastops._native import chain  # noqa: F401
'''


def built_library(root: Path, build: str | None) -> str:
    (root / "fastops").mkdir(parents=True)
    (root / "fastops" / "__init__.py").write_text(LIBRARY)
    (root / "fastops" / "_native.py.in").write_text(FASTOPS_LIBRARY.format(steps=8))
    (root / "build.py").write_text(BUILD_SCRIPT)
    (root / ".gitignore").write_text("fastops/_native.py\nbuild-facts.json\n")
    if build is not None:
        (root / "kernelwatch.toml").write_text(f'benchmarks = "benchmarks"\nbuild = {json.dumps(build)}\n')
    else:
        (root / "kernelwatch.toml").write_text('benchmarks = "benchmarks"\n')
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "chains.py").write_text(FASTOPS_BENCHMARK)
    git(root, "init", "-q", "-b", "main")
    return commit_all(root, "fastops")


def test_the_build_setting_is_read_and_checked(tmp_path: Path) -> None:
    assert parse_build("python setup.py build_ext --inplace", "f") == ("python", "setup.py", "build_ext", "--inplace")
    assert parse_build(["make", "-C", "csrc"], "f") == ("make", "-C", "csrc")
    assert command_for(("python", "build.py"), Path("/env/bin/python")) == ["/env/bin/python", "build.py"]
    assert command_for(("make",), None) == ["make"]
    for bad in ("", "  ", "python 'unclosed", 3, ["make", 1], []):
        with pytest.raises(ValueError, match="build"):
            parse_build(bad, "kernelwatch.toml")
    (tmp_path / "kernelwatch.toml").write_text("build = 7\n")
    with pytest.raises(ProjectFileError, match="build must be a command"):
        read_project_settings(tmp_path)
    (tmp_path / "kernelwatch.toml").write_text('build = "python build.py"\n')
    assert read_project_settings(tmp_path).build == ("python", "build.py")


def test_the_build_runs_sandboxed_in_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = tmp_path / "checkout"
    built_library(checkout, "python build.py")
    monkeypatch.setenv("KERNELWATCH_SLACK_TOKEN", "xoxb-not-for-repositories")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nor-this")
    run_build(("python", "build.py"), checkout, None, Limits(memory_mb=2048))
    assert (checkout / "fastops" / "_native.py").read_text() == FASTOPS_LIBRARY.format(steps=8)
    facts = json.loads((checkout / "build-facts.json").read_text())
    assert facts["cwd"] == str(checkout) and facts["python"] == sys.executable
    assert not {"KERNELWATCH_SLACK_TOKEN", "AWS_SECRET_ACCESS_KEY"} & set(facts["env"]), facts["env"]
    assert facts["home"] != os.environ.get("HOME") and "kw-build-" in facts["home"]


def test_a_failing_or_hanging_build_is_one_clear_error_and_leaves_nothing_running(tmp_path: Path) -> None:
    (tmp_path / "fail.py").write_text('import sys\nprint("compiling csrc/chain.cc")\nsys.exit("error: no CUDA")\n')
    with pytest.raises(BuildFailed, match=r"exited 1:\n  compiling csrc/chain.cc\n  error: no CUDA"):
        run_build(("python", "fail.py"), tmp_path, None, Limits(memory_mb=None))
    # A build that starts a helper and hangs: stopped at its limit with the helper, whatever it started.
    pid_file = tmp_path / "helper.pid"
    (tmp_path / "hang.py").write_text(
        "import subprocess, sys, time, pathlib\n"
        "helper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(helper.pid))\n"
        "print('waiting for a lock', flush=True)\ntime.sleep(300)\n")
    started = time.monotonic()
    with pytest.raises(BuildFailed, match=r"ran past 3 s and was stopped:\n  waiting for a lock"):
        run_build(("python", "hang.py"), tmp_path, None, Limits(memory_mb=None), timeout_s=3)
    assert time.monotonic() - started < 60
    helper = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{helper}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # killed with its group; the zombie is reaped by init
    status = Path(f"/proc/{helper}/status")
    assert not status.exists() or "zombie" in status.read_text(), "the build's helper outlived it"
    with pytest.raises(BuildFailed, match="exited 1:\n  cannot run 'no-such-build-tool-anywhere': No such file"):
        run_build(("no-such-build-tool-anywhere",), tmp_path, None, Limits(memory_mb=None))


def test_a_run_builds_each_checkout_before_its_benchmarks(tmp_path: Path) -> None:
    """End to end: without the build the package cannot import (its kernel is a build product) and the run says
    so in one line; with it, the commit is measured, and the build's products never make the run dirty."""
    env = {**os.environ, "KERNELWATCH_HOME": str(tmp_path / "home")}
    for name in ("KERNELWATCH_DATABASE_URL", "KERNELWATCH_REDIS_URL", "KERNELWATCH_URL", "KERNELWATCH_TOKEN"):
        env.pop(name, None)
    unbuilt = tmp_path / "unbuilt"
    built_library(unbuilt, None)
    out = tmp_path / "out-unbuilt"
    ran = subprocess.run([sys.executable, "-m", "service.cli", "run", "--repo", str(unbuilt), "--samples", "2",
                          "--no-capture", "--no-ingest", "--output", str(out)], env=env, capture_output=True,
                         text=True, timeout=600, check=False)
    assert ran.returncode == 2 and "fastops._native" in ran.stderr and "Traceback" not in ran.stderr, ran.stderr

    repo = tmp_path / "fastops"
    sha = built_library(repo, "python build.py")
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, "-m", "service.cli", "run", "--repo", str(repo), "--samples", "2",
                          "--no-capture", "--no-ingest", "--output", str(out)], env=env, capture_output=True,
                         text=True, timeout=600, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    [manifest] = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert manifest["commit"]["sha"] == sha and manifest["environment"]["extra"].get("dirty") != "true"
    [result] = manifest["results"]
    assert result["status"] == "ok", result
    assert not (repo / "fastops" / "_native.py").exists()  # built in KernelWatch's checkout, not the user's

    (repo / "kernelwatch.toml").write_text('benchmarks = "benchmarks"\nbuild = "python -c \'raise SystemExit(3)\'"\n')
    commit_all(repo, "a build that fails")
    failed = subprocess.run([sys.executable, "-m", "service.cli", "run", "--repo", str(repo), "--samples", "2",
                             "--no-capture", "--no-ingest"], env=env, capture_output=True, text=True, timeout=600,
                            check=False)
    assert failed.returncode == 2 and "the project's build (python -c 'raise SystemExit(3)') exited 3" in failed.stderr
    assert "Traceback" not in failed.stderr, failed.stderr
