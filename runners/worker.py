"""The runner side of a `run_suite` task: get the repository, run the suite, hand over the manifests.

Kept apart from Celery and from the service: the task wrapper (service/tasks.py) passes in where the
manifests go (ingest in-process in the embedded default; the HTTP API once runners upload remotely) and the
task id, which becomes the run id, so that a task delivered twice (its first worker was killed) produces the
same run ids and is stored once.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwatch.vocabulary import Trigger
from runners.gitrepo import GitError, ensure_repository, git, resolve
from runners.local import RunRequest, checkout_at, run_commits
from runners.pinning import runner_noise_settings
from runners.project_file import ProjectFileError, ProjectSettings, read_project_settings

Upload = Callable[[dict[str, Any]], object]  # whatever it returns is not used


@dataclass(frozen=True)
class SuiteTask:
    """The arguments of a run_suite task: plain JSON types only, as they travel over the broker."""

    repo: str
    commit: str
    suite: str = "*"
    params: str = ""
    quick: bool = False
    samples: int = 20
    trigger: str = "push"
    branch: str | None = None
    capture: bool = True
    # More commits to run with ``commit``, benchmark by benchmark interleaved on this one machine (confirmation
    # runs: base and head must see the same machine state, or their difference is the machine's).
    also: tuple[str, ...] = ()
    pr_number: int | None = None  # the pull request these runs are for (trigger "pr")
    rounds: int = 1  # runs per commit, each a fresh process (runners.local.run_commits): the replicates
    # A person asked for this run (`kernelwatch submit`): a selection that holds no benchmark at any of its commits
    # fails the task (runners.local.NothingSelected, naming what the suites declare) rather than store runs with no
    # results. Off for the service's own tasks: a pull request's merge-base, a scheduled tip, a bisection step may
    # predate the suite, and an empty run is then what there is to store.
    selection_required: bool = False

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> SuiteTask:
        known = {k: v for k, v in kwargs.items() if k in cls.__dataclass_fields__}
        known["also"] = tuple(known.get("also", ()))  # a list once it has crossed the broker as JSON
        return cls(**known)


def project_settings(repo: Path, rev: str, home: Path) -> ProjectSettings:
    """The repository's project file as of ``rev`` (read from KernelWatch's checkout of that commit), which a
    worker measures every commit of the task with: its benchmarks are the suite as of that commit, as asv applies
    one benchmark directory to any commit. A repository is not the runner's to configure, so its file may not
    point outside itself nor name an interpreter of the runner's (``environment = "commit"`` builds one)."""
    # A branch the task names only as a label (submit --branch) may not be in the clone: then the repository's HEAD.
    sha = _first_resolved(repo, [rev, f"origin/{rev}", "HEAD"] if rev != "HEAD" else [rev])
    if not _has_settings(repo, sha):  # most tasks: no checkout of the tip just to find no file
        return ProjectSettings(None)
    tree = checkout_at(repo, sha, home / "worktrees", home / "repos")
    source = next((tree / n for n in ("kernelwatch.toml", "pyproject.toml") if (tree / n).is_file()), None)
    try:
        settings = read_project_settings(tree)
    except ProjectFileError as exc:
        raise ProjectFileError(f"{rev}: {exc}") from None
    if settings.python is not None:
        raise ProjectFileError(f"{rev}: {source.name if source else 'the project file'}: python names an interpreter "
                               "of the runner, which a repository may not choose (give environment = \"commit\")")
    if settings.benchmarks is not None and not settings.benchmarks.is_relative_to(tree.resolve()):
        raise ProjectFileError(f"{rev}: {source.name if source else 'the project file'}: benchmarks must lie inside "
                               "the repository")
    return settings


def _has_settings(repo: Path, sha: str) -> bool:
    """Whether the commit has a kernelwatch.toml, or a pyproject.toml with a [tool.kernelwatch] table (read
    from git's objects, nothing checked out)."""
    files = git(repo, "ls-tree", "--name-only", "--end-of-options", sha).splitlines()
    if "kernelwatch.toml" in files:
        return True
    if "pyproject.toml" not in files:
        return False
    text = git(repo, "cat-file", "blob", "--end-of-options", f"{sha}:pyproject.toml")
    try:
        tool = tomllib.loads(text).get("tool")
    except tomllib.TOMLDecodeError:
        return False  # not the project file's to complain about: the project's own tools will
    return isinstance(tool, dict) and "kernelwatch" in tool


def _first_resolved(repo: Path, revs: list[str]) -> str:
    """The first of ``revs`` the repository has (a branch of a clone is ``origin/<branch>`` there)."""
    for rev in revs[:-1]:
        try:
            return resolve(repo, rev)
        except GitError:
            continue
    return resolve(repo, revs[-1])


def _any_round(_manifests: list[list[dict[str, Any]]]) -> None:
    """Nothing to check of a first round beyond what run_commits checks once it is given a check: that the
    selection held a benchmark somewhere (``SuiteTask.selection_required``)."""


def run_id_for(task_id: str) -> str:
    return task_id.replace("-", "")


def execute(task: SuiteTask, task_id: str, home: Path, upload: Upload) -> list[str]:
    """Run one task; returns the run ids handed to ``upload``.

    A redelivered task runs again rather than trusting what an earlier delivery stored: that delivery may have
    died between two of its environments' uploads. The upload of a run id already stored is refused by ingest
    (same id, other samples) and ``upload`` treats that as done.
    """
    run_id = run_id_for(task_id)
    commits = [task.commit, *task.also]
    repo = ensure_repository(task.repo, home / "repos", commits[-1])
    # The suite and environment as of the branch the task is for (else the repository's HEAD: a clone's default
    # branch), the same for every commit of the task.
    project = project_settings(repo, task.branch or "HEAD", home)
    if task.trigger == Trigger.PR and task.also:
        # A pull request's are its head's, as `kernelwatch ci` in the pull request's own job measures with the
        # checked-out head: a pull request that adds a benchmark, or the whole suite, is measured with it at both
        # commits (where its merge-base cannot run one, that one fails there). The stored project's name stays the
        # default branch's: a pull request, a fork's included, cannot file its runs under another project.
        project = dataclasses.replace(project_settings(repo, commits[-1], home), name=project.name)
    noise = runner_noise_settings(dict(os.environ))
    requests = [RunRequest(repo=repo, rev=sha, samples=task.samples, suite=task.suite, params=task.params,
                           benchmarks=project.benchmarks, environment=project.environment or "runner",
                           build=project.build, quick=task.quick, branch=task.branch, trigger=task.trigger,
                           pr_number=task.pr_number,
                           cpu_affinity=noise.cpu_affinity, xla_single_thread=noise.xla_single_thread,
                           keep_pages=noise.keep_pages,
                           capture_dir=home / "artifacts" if task.capture else None, origin=task.repo,
                           repository_name=project.name)
                for sha in commits]
    # Derived ids, so that a redelivered task stores each of its commits' runs under the same id again.
    run_ids = [run_id] + [f"{run_id}-c{i}" for i in range(1, len(commits))]
    manifests = [m for per_commit in run_commits(requests, home / "worktrees", run_ids=run_ids,
                                                 rounds=max(1, task.rounds),
                                                 after_first_round=_any_round if task.selection_required else None)
                 for m in per_commit]
    for manifest in manifests:
        upload(manifest)
    return [m["run_id"] for m in manifests]
