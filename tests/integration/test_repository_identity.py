"""Two projects in folders of one name (two "kernels"): runs are filed under the folder's name, so before root
commits were recorded the second project's runs joined the first's repository and its benchmarks of the same name
joined the first's series. Now the second is refused before anything is measured, a clone of the first is the
first, and --repository-name files the second apart. Real git, real benchmark processes, the local store."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from sqlalchemy import func, select

from runners.gitrepo import first_commits
from service.store.db import make_engine, make_session_factory
from service.store.models import Commit, Repository, Run
from tests.cli_inprocess import run_cli
from tests.gitrepo import SCALE_KERNEL, commit_all, git, suite_repo
from tests.processes import clean_env


def project(root: Path, depth: int) -> str:
    """A suite repository at ``root`` (its folder name is what it is stored under) of one commit; its sha."""
    suite_repo(root, SCALE_KERNEL.replace("DEPTH = 0", f"DEPTH = {depth}"))
    return commit_all(root, f"kernels of depth {depth}")


def test_two_projects_of_one_folder_name_are_kept_apart(tmp_path: Path) -> None:
    first, second, clone = tmp_path / "a" / "kernels", tmp_path / "b" / "kernels", tmp_path / "c" / "kernels"
    first_sha, second_sha = project(first, 0), project(second, 1)
    subprocess.run(["git", "clone", "-q", str(first), str(clone)], check=True, capture_output=True)
    env = clean_env(tmp_path / "home")
    measure = ["--samples", "2", "--warmup", "1", "--no-capture"]

    stored = run_cli(["run", "--repo", str(first), *measure], env)
    assert stored.returncode == 0, stored.stderr[-3000:]
    assert re.search(r"  tiny/scale n=1024 +[0-9.]+[mµn]?s \(median of 2\)\n", stored.stdout), stored.stdout  # a figure
    refused = run_cli(["run", "--repo", str(second), *measure], env)
    assert refused.returncode == 2, (refused.stdout, refused.stderr[-3000:])
    assert "'kernels' in this store is another project" in refused.stderr
    assert f"this one's {second_sha[:12]}" in refused.stderr and "--repository-name" in refused.stderr
    assert "[1/" not in refused.stderr and "ok," not in refused.stdout  # refused before anything was measured
    gate = run_cli(["ci", "--repo", str(second), "--base", "HEAD", "--head", "HEAD", *measure], env)
    assert gate.returncode == 2 and "another project" in gate.stderr and "[1/" not in gate.stderr, gate.stderr
    again = run_cli(["run", "--repo", str(clone), *measure], env)  # the same project, wherever its clone lies
    assert again.returncode == 0, again.stderr[-3000:]
    assert "is new to this store" not in again.stderr
    # A clone in a folder of another name starts a project of its own, said before measuring with the name that
    # would file it with the history it shares.
    renamed = tmp_path / "e" / "kernels-work"
    subprocess.run(["git", "clone", "-q", str(first), str(renamed)], check=True, capture_output=True)
    apart = run_cli(["run", "--repo", str(renamed), *measure], env)
    assert apart.returncode == 0, apart.stderr[-3000:]
    assert ("'kernels-work' is new to this store, but its history is that of 'kernels'" in apart.stderr
            and "--repository-name kernels" in apart.stderr), apart.stderr
    named = run_cli(["run", "--repo", str(second), "--repository-name", "kernels-b", *measure], env)
    assert named.returncode == 0, named.stderr[-3000:]
    for bad in ("", "a/b", "k" * 201, "kernels b"):
        usage = run_cli(["run", "--repo", str(second), "--repository-name", bad, *measure], env)
        assert usage.returncode == 2 and "--repository-name" in usage.stderr, usage.stderr

    # The project can name itself, for every runner and user at once (kernelwatch.toml's name); the option wins.
    third = tmp_path / "d" / "kernels"
    suite_repo(third, SCALE_KERNEL.replace("DEPTH = 0", "DEPTH = 2"))
    (third / "kernelwatch.toml").write_text('name = "kernels-c"\n')
    third_sha = commit_all(third, "a project that names itself")
    assert run_cli(["run", "--repo", str(third), *measure], env).returncode == 0
    (third / "kernelwatch.toml").write_text('name = "kernels c"\n')
    misnamed = run_cli(["run", "--repo", str(third), *measure], env)
    assert misnamed.returncode == 2 and "name 'kernels c' is not" in misnamed.stderr, misnamed.stderr

    engine = make_engine(f"sqlite:///{tmp_path / 'home' / 'kernelwatch.db'}")
    with make_session_factory(engine)() as s:
        runs = dict(s.execute(select(Repository.name, func.count(Run.id)).select_from(Repository).join(Commit)
                              .join(Run)
                              .group_by(Repository.name)).all())
        roots = dict(s.execute(select(Repository.name, Repository.first_commits)).all())
    engine.dispose()
    assert runs == {"kernels": 2, "kernels-b": 1, "kernels-c": 1, "kernels-work": 1}
    assert roots == {"kernels": [first_sha], "kernels-b": [second_sha], "kernels-c": [third_sha],
                     "kernels-work": [first_sha]}


def test_a_shallow_clone_knows_no_root(tmp_path: Path) -> None:
    """A CI job's checkout of depth 1: its oldest commit is no root (and differs from job to job), so it names
    none, and is filed by name alone as before; a full history names its roots, a merged one both."""
    origin = tmp_path / "origin"
    root = project(origin, 0)
    (origin / "NOTES").write_text("more\n")
    tip = commit_all(origin, "notes")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", origin.as_uri(), str(shallow)], check=True,
                   capture_output=True)
    assert first_commits(shallow, tip) == [] and first_commits(origin, tip) == [root]
    other = tmp_path / "other"
    other_root = project(other, 1)
    git(origin, "fetch", "-q", str(other), "main:other")
    git(origin, "merge", "-q", "-s", "ours", "--allow-unrelated-histories", "-m", "merge", "other")
    assert first_commits(origin, git(origin, "rev-parse", "HEAD")) == sorted([root, other_root])


def test_the_demo_made_again_is_the_same_project_and_a_changed_one_is_named_apart(tmp_path: Path) -> None:
    """`kernelwatch demo` twice with one home: fixed dates make the same history, stored under "kernels-demo" both
    times. A demo of another version (its first commit copies that version's suite: another root) would be refused
    under the old one's name; it is stored under a name of its own instead of failing."""
    from service.cli.common import open_context
    from service.demo import create_demo_repository, demo_repository_name
    from service.settings import load_settings
    from tests import builders

    first = create_demo_repository(tmp_path / "one")[1][0][0]
    assert create_demo_repository(tmp_path / "two")[1][0][0] == first
    ctx = open_context(load_settings({"KERNELWATCH_HOME": str(tmp_path / "home")}))  # as `demo` opens it
    try:
        assert demo_repository_name(ctx, first) == "kernels-demo"  # nothing stored yet
        stored = builders.manifest(repo="kernels-demo")
        stored["repository"]["first_commits"] = [first]
        ctx.submit(stored)
        assert demo_repository_name(ctx, first) == "kernels-demo"
        assert demo_repository_name(ctx, "0" * 40) == "kernels-demo-00000000"
    finally:
        ctx.close()



def test_a_subdirectory_of_a_repository_measures_the_repository(tmp_path: Path) -> None:
    """`--repo src/` (or `ci` run from a package's folder, its --repo "."): git cannot clone a subdirectory, and the
    command said "cannot clone .../src: repository ... does not exist". It measures the repository, says so, and
    stores it under the repository's name, not the subdirectory's."""
    root = tmp_path / "kernels"
    project(root, 0)
    (root / "src").mkdir()
    (root / "src" / "README").write_text("the package\n")
    sha = commit_all(root, "a package folder")
    env = clean_env(tmp_path / "home")
    measure = ["--samples", "2", "--warmup", "1", "--no-capture"]
    done = run_cli(["run", "--repo", str(root / "src"), *measure], env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"measuring the repository at {root} (the top of the git work tree holding {root / 'src'})" in done.stderr
    engine = make_engine(f"sqlite:///{tmp_path / 'home' / 'kernelwatch.db'}")
    with make_session_factory(engine)() as s:
        stored = s.execute(select(Repository.name, Commit.sha).join(Commit).join(Run)).all()
    engine.dispose()
    assert [tuple(row) for row in stored] == [("kernels", sha)]
    # ci from the package's folder too; and --base naming the commit --head names is said to be an A/A check.
    gate = run_cli(["ci", "--repo", str(root / "src"), "--base", "HEAD", "--rounds", "1", *measure], env)
    assert gate.returncode == 0, gate.stderr[-3000:]
    assert "measuring the repository at" in gate.stderr
    assert f"--base HEAD and --head HEAD are one commit ({sha[:12]}): this compares its code with itself" \
        in gate.stderr, gate.stderr
    outside = run_cli(["run", "--repo", str(tmp_path), *measure], env)  # no work tree at all: git's error, one line
    assert outside.returncode == 2 and "Traceback" not in outside.stderr, outside.stderr[-2000:]
