"""Branch and tag names resolved with git: in a local repository, in a runner's clone when the remote cannot be
reached, and the commit of an annotated tag read from ``git ls-remote`` output."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.gitrepo import clone_path
from service.pipeline.git_refs import GitRefResolver, _peeled
from tests.gitrepo import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "kernels"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    for n in range(2):
        (path / "f.txt").write_text(f"{n}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"commit {n}")
    git(path, "tag", "-a", "v1", "-m", "annotated", "HEAD~1")
    git(path, "branch", "feature", "HEAD~1")
    return path


def test_a_local_repository_resolves_branches_tags_and_expressions(repo: Path, tmp_path: Path) -> None:
    refs = GitRefResolver(tmp_path / "repos")
    first, second = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    for url in (str(repo), repo.as_uri()):
        assert refs(url, "main") == second
        assert refs(url, "v1") == first  # the commit, not the tag object
        assert refs(url, "feature") == first and refs(url, "main~1") == first
        assert refs(url, first[:8]) == first
        assert refs(url, "no-such-branch") is None
        assert refs(url, "--all") is None  # never an option to git


def test_a_runners_clone_answers_when_the_remote_cannot(repo: Path, tmp_path: Path) -> None:
    url = "https://git.invalid/team/kernels.git"
    clone = clone_path(url, tmp_path / "repos")
    clone.parent.mkdir(parents=True)
    git(tmp_path, "clone", "-q", str(repo), str(clone))  # as ensure_repository keeps it: branches under origin/
    refs = GitRefResolver(tmp_path / "repos", network=False)
    assert refs(url, "feature") == git(repo, "rev-parse", "feature")  # origin/feature
    assert refs(url, "main") == git(repo, "rev-parse", "main")
    assert refs(url, "nope") is None
    assert GitRefResolver(tmp_path / "elsewhere", network=False)(url, "main") is None  # no clone: nothing known


def test_ls_remote_output_prefers_branches_then_the_peeled_tag() -> None:
    listing = "\n".join([
        "1111111111111111111111111111111111111111\trefs/heads/release",
        "2222222222222222222222222222222222222222\trefs/tags/release",
        "3333333333333333333333333333333333333333\trefs/tags/v1",
        "4444444444444444444444444444444444444444\trefs/tags/v1^{}",
        "5555555555555555555555555555555555555555\trefs/pull/7/head",
    ])
    assert _peeled(listing, "release") == "1" * 40
    assert _peeled(listing, "v1") == "4" * 40  # the commit an annotated tag points at
    assert _peeled(listing, "refs/pull/7/head") == "5" * 40
    assert _peeled(listing, "main") is None and _peeled("", "main") is None


def test_a_remote_is_asked_with_ls_remote(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A file:// URL is a local directory; taken for a remote, git answers it as it would a server.
    import service.pipeline.git_refs as git_refs

    monkeypatch.setattr(git_refs, "local_path", lambda url: None)
    refs = GitRefResolver(tmp_path / "repos")
    assert refs(repo.as_uri(), "v1") == git(repo, "rev-parse", "v1^{commit}")
    assert refs(repo.as_uri(), "main") == git(repo, "rev-parse", "main")
    assert refs(repo.as_uri(), "nope") is None
