"""A measured repository is not trusted: its config, hooks and attributes must not make the runner's git calls
run a program, a location or revision must not be read as an option or an exotic transport, and a transport
that hangs must time out. Real git, real repositories; a marker file proves whether anything ran."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runners.gitrepo import (
    GitError,
    check_location,
    checkout,
    commit_facts,
    current_branch,
    ensure_repository,
    first_parent_range,
    is_ancestor,
    is_dirty,
    private_clone,
    prune_checkouts,
)
from tests.gitrepo import SCALE_KERNEL, commit_all, git, suite_repo


def hostile_repo(root: Path, marker: Path) -> list[str]:
    """A suite repository whose own config and hooks would each create ``marker`` if git ever ran them: a
    post-checkout hook (in .git/hooks and in a core.hooksPath), core.fsmonitor, a smudge/clean filter every file
    is under, a textconv driver, core.sshCommand and a pager. Two commits."""
    module = suite_repo(root, SCALE_KERNEL)
    (root / ".gitattributes").write_text("* filter=evil diff=evil\n")
    first = commit_all(root, "suite")
    module.write_text(SCALE_KERNEL.replace("DEPTH = 0", "DEPTH = 2"))
    second = commit_all(root, "deeper")
    script = root.parent / "evil.sh"
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\ncat\n")
    script.chmod(0o755)
    hooks = root / ".git" / "hooks"
    for hook in ("post-checkout", "pre-auto-gc", "reference-transaction", "post-index-change"):
        (hooks / hook).write_text(f"#!/bin/sh\necho hook {hook} >> {marker}\n")
        (hooks / hook).chmod(0o755)
    other_hooks = root.parent / "other-hooks"
    other_hooks.mkdir()
    (other_hooks / "post-checkout").write_text(f"#!/bin/sh\necho hooksPath >> {marker}\n")
    (other_hooks / "post-checkout").chmod(0o755)
    for key, value in (("core.fsmonitor", str(script)), ("filter.evil.smudge", str(script)),
                       ("filter.evil.clean", str(script)), ("filter.evil.process", str(script)),
                       ("filter.evil.required", "true"), ("diff.evil.textconv", str(script)),
                       ("core.sshCommand", str(script)), ("core.pager", str(script)),
                       ("core.hooksPath", str(other_hooks)), ("core.untrackedCache", "true")):
        git(root, "config", key, value)
    return [first, second]


def test_no_git_call_of_the_runner_runs_a_repository_program(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    repo = tmp_path / "lib"
    repo.mkdir()
    first, second = hostile_repo(repo, marker)
    # The setup itself is hostile: the same repository's own git, unguarded, does run them.
    subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True)
    assert marker.exists(), "the fixture must be able to run a program through plain git"
    marker.unlink()

    home = tmp_path / "home"
    facts = commit_facts(repo, "HEAD")
    assert facts.sha == second and facts.parents == [first] and facts.position == 1
    assert current_branch(repo) == "main" and is_ancestor(repo, first, "main")
    assert first_parent_range(repo, first, second) == [second]
    clone = private_clone(repo, home / "repos", second)
    worktree = checkout(clone, second, home / "worktrees" / "lib")
    assert "DEPTH = 2" in (worktree / "kernels_under_test" / "tiny.py").read_text()
    assert not is_dirty(worktree)
    # reused when clean, made again at another commit
    assert checkout(clone, second, home / "worktrees" / "lib") == worktree
    older = checkout(clone, first, home / "worktrees" / "lib")
    assert "DEPTH = 0" in (older / "kernels_under_test" / "tiny.py").read_text()
    assert not marker.exists(), marker.read_text()
    # Nothing registered in the user's repository, and the clone is KernelWatch's own.
    assert not (repo / ".git" / "worktrees").exists()
    assert home / "repos" in clone.parents

    # A commit made after the clone is fetched into it.
    (repo / "README").write_text("docs\n")
    tame = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "filter.evil.process=",
            "-c", "filter.evil.clean=cat", "-c", "filter.evil.required=false"]
    git(repo, *tame, "add", "-A")
    git(repo, *tame, "commit", "-q", "-m", "docs")
    third = git(repo, *tame, "rev-parse", "HEAD")
    assert private_clone(repo, home / "repos", third) == clone
    checkout(clone, third, home / "worktrees" / "lib")
    assert not marker.exists(), marker.read_text()


def test_a_run_of_a_hostile_repository_measures_and_runs_nothing_of_it(tmp_path: Path) -> None:
    """End to end through `kernelwatch run`: the benchmark runs (in its sandbox), no hook, filter or fsmonitor
    does, and the user's repository gains no worktree."""
    marker = tmp_path / "ran"
    repo = tmp_path / "lib"
    repo.mkdir()
    hostile_repo(repo, marker)
    env = {**os.environ, "KERNELWATCH_HOME": str(tmp_path / "home"), "SLACK_TOKEN": "xoxb-secret"}
    env.pop("KERNELWATCH_DATABASE_URL", None)
    env.pop("KERNELWATCH_REDIS_URL", None)
    proc = subprocess.run([sys.executable, "-m", "service.cli", "run", "--repo", str(repo), "--samples", "3",
                           "--output", str(tmp_path / "out")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [manifest] = list((tmp_path / "out").glob("*.json"))
    assert '"tiny"' in manifest.read_text() and '"status": "ok"' in manifest.read_text()
    assert not marker.exists(), marker.read_text()
    assert not (repo / ".git" / "worktrees").exists()


@pytest.mark.parametrize("location", [
    "fd::3", "ext::sh -c touch% {marker}", "--upload-pack=touch {marker}", "-uevil", "http://example.com/r.git",
    "ftp://example.com/r.git", "https://-oProxyCommand=x/r", "host::path", "", "ssh://\nexample.com/r",
])
def test_hostile_locations_are_refused_before_git_sees_them(tmp_path: Path, location: str) -> None:
    marker = tmp_path / "ran"
    started = time.monotonic()
    with pytest.raises(GitError, match="not a repository location"):
        ensure_repository(location.format(marker=marker), tmp_path / "repos", "main")
    assert time.monotonic() - started < 5 and not marker.exists()
    assert not (tmp_path / "repos").exists()


def test_locations_a_user_may_name_pass_the_check(tmp_path: Path) -> None:
    for location in ("https://github.com/jax-ml/jax.git", "ssh://git@github.com/o/r.git", "git@github.com:o/r.git",
                     "git://example.com/r.git", f"file://{tmp_path}", str(tmp_path)):
        assert check_location(location) == location


@pytest.mark.parametrize("rev", ["--output=/tmp/kw-evil", "-h", "--all", "main\nHEAD", ""])
def test_option_like_revisions_are_refused(tmp_path: Path, rev: str) -> None:
    repo = tmp_path / "lib"
    repo.mkdir()
    suite_repo(repo, SCALE_KERNEL)
    commit_all(repo, "suite")
    with pytest.raises(GitError, match="not a revision"):
        commit_facts(repo, rev)
    with pytest.raises(GitError):
        ensure_repository(str(repo), tmp_path / "repos", rev)
    assert not Path("/tmp/kw-evil").exists()


def test_a_hung_transport_times_out(tmp_path: Path) -> None:
    """A git:// server that accepts and never answers: the clone ends at its timeout with a clear error, and
    no half-made clone is left to be taken for a whole one."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        with pytest.raises(GitError, match="timed out"):
            ensure_repository(f"git://127.0.0.1:{port}/r.git", tmp_path / "repos", "main", timeout_s=3)
        assert time.monotonic() - started < 15
        assert not [p for p in (tmp_path / "repos").glob("*") if p.exists()]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def test_prune_removes_unused_checkouts_and_an_older_version_s_registrations(tmp_path: Path) -> None:
    repo = tmp_path / "lib"
    repo.mkdir()
    suite_repo(repo, SCALE_KERNEL)
    sha = commit_all(repo, "suite")
    cache = tmp_path / "home" / "worktrees"
    # What KernelWatch did before: a worktree registered in the user's own repository.
    legacy = cache / "lib" / ("0" * 40)
    legacy.parent.mkdir(parents=True)
    git(repo, "worktree", "add", "--detach", str(legacy), sha)
    assert (repo / ".git" / "worktrees").exists()
    ours = checkout(private_clone(repo, tmp_path / "home" / "repos", sha), sha, cache / "lib")
    assert prune_checkouts(cache, 3600, time.time()) == []  # both used just now
    assert sorted(prune_checkouts(cache, 0, time.time() + 1, dry_run=True)) == sorted([legacy, ours])
    assert legacy.exists() and ours.exists()
    assert sorted(prune_checkouts(cache, 0, time.time() + 1)) == sorted([legacy, ours])
    assert not legacy.exists() and not ours.exists() and not (cache / "lib").exists()
    assert git(repo, "worktree", "list").count("\n") == 0  # the user's repository knows only itself again
