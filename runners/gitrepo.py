"""Git plumbing the runner needs: resolve a revision, read commit facts, check a commit out into a worktree."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


class GitError(Exception):
    pass


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


@dataclass(frozen=True)
class CommitFacts:
    sha: str
    parents: list[str]
    author: str
    authored_at: datetime
    subject: str
    position: int  # first-parent ancestors before this commit

    def as_manifest(self) -> dict[str, object]:
        return {
            "sha": self.sha,
            "parents": self.parents,
            "author": self.author,
            "authored_at": self.authored_at.isoformat(),
            "subject": self.subject,
            "position": self.position,
        }


def resolve(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")


def commit_facts(repo: Path, rev: str) -> CommitFacts:
    sha = resolve(repo, rev)
    # NUL-separated so that a subject may hold any character.
    raw = git(repo, "show", "-s", "--format=%H%x00%P%x00%an <%ae>%x00%aI%x00%s", sha)
    full, parents, author, when, subject = raw.split("\x00", 4)
    position = int(git(repo, "rev-list", "--count", "--first-parent", sha)) - 1
    return CommitFacts(
        sha=full,
        parents=parents.split() if parents else [],
        author=author,
        authored_at=datetime.fromisoformat(when),
        subject=subject,
        position=position,
    )


def current_branch(repo: Path) -> str | None:
    try:
        return git(repo, "symbolic-ref", "--quiet", "--short", "HEAD") or None
    except GitError:
        return None


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    proc = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", ancestor, descendant],
                          capture_output=True)
    return proc.returncode == 0


def is_dirty(worktree: Path) -> bool:
    """Uncommitted changes in the checkout: its numbers would not be the commit's."""
    return bool(git(worktree, "status", "--porcelain"))


def checkout(repo: Path, sha: str, cache_dir: Path) -> Path:
    """A detached worktree of ``repo`` at ``sha`` under ``cache_dir``; reused when it is already there."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / sha
    if path.is_dir():
        try:
            if git(path, "rev-parse", "HEAD") == sha and not git(path, "status", "--porcelain"):
                return path
        except GitError:
            pass
        try:
            git(repo, "worktree", "remove", "--force", str(path))
        except GitError:  # a stale directory git no longer knows as a worktree
            shutil.rmtree(path)
    git(repo, "worktree", "prune")
    git(repo, "worktree", "add", "--detach", "--force", str(path), sha)
    return path


def local_path(location: str) -> Path | None:
    """The repository itself when ``location`` is a local directory (as a path, or as the file:// URL a manifest
    records); None for a remote URL."""
    local = Path(location[len("file://"):] if location.startswith("file://") else location).expanduser()
    return local.resolve() if local.is_dir() else None


def clone_path(location: str, cache_dir: Path) -> Path:
    """Where ``ensure_repository`` keeps its clone of a remote URL (whether or not it was made yet)."""
    import hashlib

    digest = hashlib.sha256(location.encode()).hexdigest()[:16]
    tail = location.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git") or "repo"
    return cache_dir / f"{tail}-{digest}"


def ensure_repository(location: str, cache_dir: Path, rev: str) -> Path:
    """A local repository holding ``rev``: the path itself when ``location`` is a local repository, else a
    clone of the URL kept under ``cache_dir`` and fetched when the revision is not there yet."""
    local = local_path(location)
    if local is not None:
        return local
    path = clone_path(location, cache_dir)
    if not (path / ".git").is_dir():
        cache_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["git", "clone", "--quiet", location, str(path)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise GitError(f"cannot clone {location}: {proc.stderr.strip()}")
    try:
        resolve(path, rev)
    except GitError:
        # Pull-request heads too: GitHub keeps every pull request's head, a fork's included, under refs/pull/ of
        # the base repository, and a pattern that matches nothing (another host) is no error.
        git(path, "fetch", "--quiet", "origin", "+refs/heads/*:refs/remotes/origin/*",
            "+refs/pull/*/head:refs/remotes/origin/pull/*")
    return path
