"""Git plumbing the runner needs: resolve a revision, read commit facts, check a commit out into a worktree.

The repository measured is not trusted. A repository's own config can make git run programs (``core.fsmonitor``
on any call that reads the index, hooks on checkout, ``filter.*.smudge`` on checkout, ``core.sshCommand`` on
fetch), and a runner's environment holds tokens. So every git call goes through :func:`git`:

- **no configuration but KernelWatch's own and the command line's** (``GIT_CONFIG_GLOBAL=/dev/null``,
  ``GIT_CONFIG_NOSYSTEM``), and command-line settings that beat the repository's own: hooks off, fsmonitor off,
  no pager, no automatic gc. Calls that reach the network (clone, fetch of a URL) keep the user's global config,
  for credentials and ssh settings; they run in KernelWatch's clones, whose config only git clone wrote.
- **a small environment**: PATH, HOME, locale, ssh-agent and proxy settings, never the runner's secrets, and
  ``GIT_ALLOW_PROTOCOL`` limited to the schemes a user may name (``file``, ``git``, ``https``, ``ssh``): ``ext::``
  and ``fd::`` transports never start.
- **a timeout** on every call, and ``--end-of-options`` / ``--`` before every revision, URL and path, which must
  not look like options anyway (:func:`check_rev`, :func:`check_location`).
- **checkouts of KernelWatch's own**: a commit is checked out from a clone under ``KERNELWATCH_HOME/repos`` (a
  local repository is cloned there too), never as a worktree registered in the user's repository, and with no
  working tree in the clone itself (``--no-checkout``), so that nothing is smudged or hooked on the way.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

GIT_TIMEOUT_S = 120.0  # one local call: plumbing or a checkout
NETWORK_TIMEOUT_S = 900.0  # a clone or fetch over the network; a transport that hangs ends here
ALLOWED_PROTOCOLS = "file:git:https:ssh"

# Command-line config is the highest scope: these override whatever the repository's .git/config says.
_SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.alternateRefsCommand=",
    "diff.external=",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.ext.allow=never",
    "protocol.fd.allow=never",
)
# What of the caller's environment git may see: enough to find itself, reach a host and authenticate over ssh.
_KEPT_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SSH_AUTH_SOCK",
             "GIT_SSH", "GIT_SSH_COMMAND", "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO",
             "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
SHA_RE = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")
_SCP_LIKE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9][A-Za-z0-9.-]*:(?!//)[^\s]+$")


class GitError(Exception):
    pass


def _environment(network: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _KEPT_ENV}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS, "GIT_OPTIONAL_LOCKS": "0",
                "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"})
    if not network:
        env["GIT_CONFIG_GLOBAL"] = os.devnull
        env.pop("GIT_SSH", None)
        env.pop("GIT_SSH_COMMAND", None)
    return env


def run_git(args: list[str], cwd: Path | None = None, network: bool = False,
            timeout_s: float | None = None) -> subprocess.CompletedProcess[str]:
    """``git <safe config> <args>``: the one way KernelWatch starts git (see the module's note)."""
    argv = ["git"]
    for setting in _SAFE_CONFIG:
        argv += ["-c", setting]
    argv += args
    limit = timeout_s if timeout_s is not None else (NETWORK_TIMEOUT_S if network else GIT_TIMEOUT_S)
    try:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=_environment(network),
                              timeout=limit, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0] if args else ''} timed out after {limit:.0f} s") from None


def git(repo: Path, *args: str, network: bool = False, timeout_s: float | None = None) -> str:
    proc = run_git(["-C", str(repo), *args], network=network, timeout_s=timeout_s)
    if proc.returncode != 0:
        said = proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}, no message"
        raise GitError(f"git {' '.join(args)} failed in {repo}: {said}")
    return proc.stdout.strip()


def check_rev(rev: str) -> str:
    """A revision as a user names one (a sha, a branch, ``HEAD~2``); never an option or a control character."""
    if not rev or rev.startswith("-") or len(rev) > 256 or any(ord(c) < 32 or c == "\x7f" for c in rev):
        raise GitError(f"not a revision: {rev[:80]!r} (a commit sha or a name such as main or HEAD~1)")
    return rev


def check_sha(sha: str) -> str:
    if not SHA_RE.match(sha):
        raise GitError(f"not a full commit sha: {sha[:80]!r}")
    return sha


def check_location(location: str) -> str:
    """A repository location a user may name: a local directory, or a file, https, ssh or git URL (scp-like
    ``user@host:path`` too). Anything else (``ext::``, ``fd::``, plain http, an option) is refused before git
    sees it."""
    if not location or location.startswith("-") or any(ord(c) < 32 for c in location):
        raise GitError(f"not a repository location: {location[:80]!r}")
    if local_path(location) is not None:
        return location
    scheme, sep, rest = location.partition("://")
    if sep:
        if scheme.lower() in ("https", "ssh", "git", "file") and rest and not rest.startswith("-"):
            return location
    elif _SCP_LIKE.match(location) and "::" not in location:
        return location
    if location.startswith(("/", "~", "./", "../")):  # meant as a local path, which no directory answers
        raise GitError(f"no directory {location[:200]!r}: a local repository is named by its path")
    raise GitError(f"not a repository location KernelWatch accepts: {location[:80]!r} (a local path, or a "
                   "file://, https://, ssh:// or git:// URL, or user@host:path)")


def check_remote_location(location: str) -> str:
    """:func:`check_location` for a location a runner opens on its own host (a task's, a pull request's clone URL):
    an absolute path is its to find, and need not exist here."""
    if location.startswith("/") and not any(ord(c) < 32 for c in location):
        return location
    return check_location(location)


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
    """The full sha of the commit ``rev`` names in ``repo``; GitError saying which, where it names none (``rev-parse
    --quiet`` says nothing itself: an unknown name, an empty repository and an unborn branch all read alike)."""
    proc = run_git(["-C", str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options",
                    f"{check_rev(rev)}^{{commit}}"])
    if proc.returncode != 0:
        reason = proc.stderr.strip() or (f"{rev!r} names no commit there (an unknown branch, tag or sha, or a "
                                         f"repository with no commit yet)")
        if _shallow(repo):
            # A CI job's checkout (fetch-depth 1) holds no history and no other branch: the usual cause.
            reason += ("; this is a shallow clone, which holds only the commits it fetched: fetch the history "
                       "(actions/checkout with fetch-depth: 0, or git fetch --unshallow) or the base itself "
                       "(git fetch origin <base>)")
        raise GitError(f"cannot resolve {rev!r} in {repo}: {reason}")
    return proc.stdout.strip()


def _shallow(repo: Path) -> bool:
    proc = run_git(["-C", str(repo), "rev-parse", "--is-shallow-repository"])
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def commit_facts(repo: Path, rev: str) -> CommitFacts:
    sha = resolve(repo, rev)
    # NUL-separated so that a subject may hold any character.
    raw = git(repo, "show", "-s", "--no-show-signature", "--format=%H%x00%P%x00%an <%ae>%x00%aI%x00%s",
              "--end-of-options", sha)
    full, parents, author, when, subject = raw.split("\x00", 4)
    position = int(git(repo, "rev-list", "--count", "--first-parent", "--end-of-options", sha)) - 1
    return CommitFacts(
        sha=full,
        parents=parents.split() if parents else [],
        author=author,
        authored_at=datetime.fromisoformat(when),
        subject=subject,
        position=position,
    )


def first_parent_range(repo: Path, good: str, bad: str) -> list[str]:
    """The commits after ``good`` up to ``bad`` along the first parent, oldest first."""
    good, bad = resolve(repo, good), resolve(repo, bad)
    return git(repo, "rev-list", "--first-parent", "--reverse", "--end-of-options", f"{good}..{bad}").split()


def current_branch(repo: Path) -> str | None:
    try:
        return git(repo, "symbolic-ref", "--quiet", "--short", "HEAD") or None
    except GitError:
        return None


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    proc = run_git(["-C", str(repo), "merge-base", "--is-ancestor", "--end-of-options", check_rev(ancestor),
                    check_rev(descendant)])
    return proc.returncode == 0


def first_commits(repo: Path, sha: str) -> list[str]:
    """The root commits ``sha`` descends from (a history merged from two projects has two), sorted: what tells one
    project from another whatever folder it lies in, since every clone and fork of a project shares them. Empty
    for a shallow clone (a CI job's checkout of depth 1), whose oldest commit is no root and differs per job."""
    check_sha(sha)
    if git(repo, "rev-parse", "--is-shallow-repository") == "true":
        return []
    return sorted(git(repo, "rev-list", "--max-parents=0", sha).split())


def is_dirty(worktree: Path) -> bool:
    """Uncommitted changes in the checkout: its numbers would not be the commit's."""
    return bool(git(worktree, "status", "--porcelain", "--untracked-files=normal"))


def _worktree_owner(path: Path) -> Path | None:
    """The repository a worktree at ``path`` is registered in (its ``.git`` file names it), if any."""
    marker = path / ".git"
    try:
        text = marker.read_text().strip() if marker.is_file() else ""
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:"):].strip())
    # <repository>/.git/worktrees/<name>, or <bare repository>/worktrees/<name>
    return gitdir.parent.parent if gitdir.parent.name == "worktrees" else None


def remove_worktree(path: Path) -> None:
    """Delete a checkout made by ``checkout`` (or by an older KernelWatch, which registered its worktrees in the
    user's repository: that registration is pruned too, with git's own ``worktree prune``)."""
    owner = _worktree_owner(path)
    shutil.rmtree(path, ignore_errors=True)
    if owner is not None and owner.is_dir():
        try:
            git(owner, "worktree", "prune")
        except GitError:
            pass


def checkout(clone: Path, sha: str, cache_dir: Path) -> Path:
    """A detached worktree of KernelWatch's own ``clone`` at ``sha`` under ``cache_dir``; reused when it is
    already there, clean and at that commit."""
    check_sha(sha)
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / sha
    if path.is_dir():
        owner = _worktree_owner(path)
        try:
            if (owner is not None and owner.resolve() == clone.resolve() and git(path, "rev-parse", "HEAD") == sha
                    and not is_dirty(path)):
                os.utime(path)  # its last use, which prune_checkouts goes by
                return path
        except GitError:
            pass
        remove_worktree(path)
    git(clone, "worktree", "prune")
    git(clone, "worktree", "add", "--detach", "--force", "--", str(path), sha)
    return path


def tree_digest(root: Path) -> str:
    """The sha256 of the files under ``root`` (a copied working tree or a checkout, ``.git`` left out): each file's
    path relative to it, its kind, and its bytes (a symbolic link's target, not followed), in path order. Two
    copies with the same files have the same digest wherever they lie."""
    digest = hashlib.sha256()
    entries: list[tuple[str, Path]] = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        entries += [(os.path.relpath(Path(directory, name), root), Path(directory, name))
                    for name in [*filenames, *(d for d in dirnames if Path(directory, d).is_symlink())]
                    if name != ".git"]
    for relative, path in sorted(entries):
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
        if path.is_symlink():
            digest.update(b"link\0" + os.readlink(path).encode("utf-8", "surrogateescape") + b"\0")
        elif path.is_file():
            digest.update(b"file\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def copy_working_tree(repo: Path, parent: Path) -> Path:
    """The working copy of ``repo`` as it is (tracked files with their uncommitted edits, and the untracked files
    git does not ignore) copied under ``parent``, in a directory named by its content (``working-tree-<digest>``):
    what `run --working-tree` measures. Nothing is written to the repository (no stash, no commit, no index);
    symbolic links are copied as links.

    Named by content, never replaced: one ``working-tree`` directory per repository name was replaced by each copy,
    so two `ci --working-tree` running at once (two edits of one repository, or two repositories of one folder name)
    measured each other's code from their third round on, silently. A copy of the same content is the same code,
    and is reused."""
    proc = run_git(["-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"])
    if proc.returncode != 0:
        raise GitError(f"git ls-files failed in {repo}: {proc.stderr.strip()}")
    parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix="working-tree.partial-", dir=parent))
    for name in dict.fromkeys(n for n in proc.stdout.split("\0") if n):
        source, target = repo / name, partial / name
        if ".." in Path(name).parts or Path(name).is_absolute():  # never listed by git: refused all the same
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_file():  # deleted in the working copy, or a submodule's directory: nothing to copy
            shutil.copy2(source, target)
    dest = parent / f"working-tree-{tree_digest(partial)[:16]}"
    try:
        os.rename(partial, dest)  # fails where the same content was copied already (a directory that is not empty)
    except OSError:
        if not dest.is_dir():
            raise
        shutil.rmtree(partial, ignore_errors=True)
    os.utime(dest)  # its last use, which prune_checkouts goes by
    return dest


def prune_checkouts(cache_dir: Path, unused_for_s: float, now: float, dry_run: bool = False) -> list[Path]:
    """Delete the checkouts under ``cache_dir`` (``<repository>/<sha>``) no run has used for ``unused_for_s``
    seconds; they are made again when a run needs them. Returns what went (``dry_run``: what would)."""
    gone = []
    for repository in sorted(p for p in cache_dir.glob("*") if p.is_dir()) if cache_dir.is_dir() else []:
        for path in sorted(p for p in repository.iterdir() if p.is_dir()):
            if now - path.stat().st_mtime >= unused_for_s:
                if not dry_run:
                    remove_worktree(path)
                gone.append(path)
        if not dry_run and not any(repository.iterdir()):
            repository.rmdir()
    return gone


def work_tree_top(path: Path) -> Path:
    """The top of the git work tree that holds ``path``: a command given a subdirectory of a repository (run from
    ``src/``, ``--repo .`` in a package's folder) measures the repository, whose clone is made from its top (git
    cannot clone a subdirectory) and whose project file lies there. ``path`` itself where git finds no work tree
    (its error comes later, naming the path), or where it is the top already."""
    path = path.expanduser()
    if not path.is_dir():
        return path
    proc = run_git(["-C", str(path), "rev-parse", "--show-toplevel"])
    top = proc.stdout.strip()
    if proc.returncode != 0 or not top:
        return path
    return path if Path(top).resolve() == path.resolve() else Path(top)


def local_path(location: str) -> Path | None:
    """The repository itself when ``location`` is a local directory (as a path, or as the file:// URL a manifest
    records); None for a remote URL."""
    local = Path(location[len("file://"):] if location.startswith("file://") else location).expanduser()
    try:
        return local.resolve() if local.is_dir() else None
    except (OSError, RuntimeError):  # a name too long for the file system, a loop of links: no directory
        return None


def clone_path(location: str, cache_dir: Path) -> Path:
    """Where KernelWatch keeps its clone of ``location`` (a URL, or a local repository's resolved path),
    whether or not it was made yet."""
    digest = hashlib.sha256(location.encode()).hexdigest()[:16]
    tail = location.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git") or "repo"
    return cache_dir / f"{tail}-{digest}"


def _has_commit(repo: Path, sha: str) -> bool:
    return run_git(["-C", str(repo), "cat-file", "-e", "--end-of-options", f"{sha}^{{commit}}"]).returncode == 0


def _clone(source: str, path: Path, network: bool, timeout_s: float | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        proc = run_git(["clone", "--quiet", "--no-checkout", "--", source, str(partial)], network=network,
                       timeout_s=timeout_s)
    except GitError:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise GitError(f"cannot clone {source}: {proc.stderr.strip()}")
    partial.rename(path)  # a clone cut short is never taken for a whole one


def _fetch(clone: Path, network: bool, timeout_s: float | None) -> None:
    # Pull-request heads too: GitHub keeps every pull request's head, a fork's included, under refs/pull/ of the
    # base repository, and a pattern that matches nothing (another host) is no error.
    git(clone, "fetch", "--quiet", "--no-write-fetch-head", "origin", "+refs/heads/*:refs/remotes/origin/*",
        "+refs/tags/*:refs/tags/*", "+refs/pull/*/head:refs/remotes/origin/pull/*", network=network,
        timeout_s=timeout_s)


def private_clone(repo: Path, cache_dir: Path, sha: str) -> Path:
    """KernelWatch's own clone of the local repository ``repo``, holding ``sha``: checkouts are made from it, so
    nothing is registered in (or run from) the user's repository. A local clone hard-links the objects."""
    check_sha(sha)
    repo = repo.resolve()
    if cache_dir.resolve() in repo.parents:  # already one of ours (a URL's clone)
        return repo
    path = clone_path(str(repo), cache_dir)
    if not path.is_dir():
        _clone(str(repo), path, network=False, timeout_s=None)
    if not _has_commit(path, sha):
        _fetch(path, network=False, timeout_s=None)
        if not _has_commit(path, sha):
            # a commit no branch or tag reaches (a detached HEAD's): ask for it by name
            git(path, "fetch", "--quiet", "--no-write-fetch-head", "origin", sha)
    return path


def ensure_repository(location: str, cache_dir: Path, rev: str, timeout_s: float | None = None) -> Path:
    """A local repository holding ``rev``: the path itself when ``location`` is a local repository, else a
    clone of the URL kept under ``cache_dir`` and fetched when the revision is not there yet. ``timeout_s``:
    how long a clone or fetch may take (default ``NETWORK_TIMEOUT_S``)."""
    check_location(location)
    check_rev(rev)
    local = local_path(location)
    if local is not None:
        return local
    path = clone_path(location, cache_dir)
    if not (path / ".git").is_dir():
        _clone(location, path, network=True, timeout_s=timeout_s)
    try:
        resolve(path, rev)
    except GitError:
        _fetch(path, network=True, timeout_s=timeout_s)
    return path
