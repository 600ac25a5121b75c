"""A branch or tag name turned into the commit sha it names today, in a repository the service knows by URL.

The database stores commits, not refs: ``main`` names a different commit every day, so it is asked of git at the
moment of asking. In order: the repository itself when its URL is a local directory (``git rev-parse``, which
also takes ``HEAD~2`` and the like); the remote's current refs (``git ls-remote``, with a timeout); and, when the
remote cannot be reached, the clone a runner keeps under ``repos_dir`` (its remote-tracking branches, as of its
last fetch). Nothing is cloned or fetched here: a comparison reads, it does not mirror repositories.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from runners.gitrepo import GitError, check_location, clone_path, local_path, resolve, run_git

LS_REMOTE_TIMEOUT_S = 30.0


class RefResolver(Protocol):
    def __call__(self, repository_url: str, ref: str) -> str | None:
        """The full sha ``ref`` names in the repository at ``repository_url``; None when it names nothing."""


def _peeled(listing: str, ref: str) -> str | None:
    """The commit of ``ref`` in ``git ls-remote`` output: a branch, else a tag (its peeled ``^{}`` line, which
    is the commit an annotated tag points at), else the exact ref name given (``refs/pull/7/head``)."""
    refs: dict[str, str] = {}
    for line in listing.splitlines():
        sha, _, name = line.partition("\t")
        refs[name.strip()] = sha.strip()
    for name in (f"refs/heads/{ref}", f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", ref):
        if name in refs:
            return refs[name]
    return None


@dataclass(frozen=True)
class GitRefResolver:
    repos_dir: Path  # where runners keep their clones (Settings.repos_dir)
    network: bool = True  # False: never ask the remote, only local repositories and clones

    def __call__(self, repository_url: str, ref: str) -> str | None:
        if ref.startswith("-"):  # never an option to git
            return None
        local = local_path(repository_url)
        if local is not None:
            return self._rev_parse(local, ref)
        if self.network:
            try:
                check_location(repository_url)
                proc = run_git(["ls-remote", "--", repository_url, ref, f"{ref}^{{}}"], network=True,
                               timeout_s=LS_REMOTE_TIMEOUT_S)
            except GitError:  # timed out, or a location no git call may be given
                proc = None
            if proc is not None and proc.returncode == 0:
                found = _peeled(proc.stdout, ref)
                if found is not None:
                    return found
        clone = clone_path(repository_url, self.repos_dir)
        if (clone / ".git").is_dir():
            return self._rev_parse(clone, ref) or self._rev_parse(clone, f"origin/{ref}")
        return None

    @staticmethod
    def _rev_parse(repo: Path, ref: str) -> str | None:
        try:
            return resolve(repo, ref) or None
        except GitError:
            return None
