"""The runner side of a `run_suite` task: get the repository, run the suite, hand over the manifests.

Kept apart from Celery and from the service: the task wrapper (service/tasks.py) passes in where the
manifests go (ingest in-process in the embedded default; the HTTP API once runners upload remotely) and the
task id, which becomes the run id, so that a task delivered twice (its first worker was killed) produces the
same run ids and is stored once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners.gitrepo import ensure_repository
from runners.local import RunRequest, run_commits

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

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> SuiteTask:
        known = {k: v for k, v in kwargs.items() if k in cls.__dataclass_fields__}
        known["also"] = tuple(known.get("also", ()))  # a list once it has crossed the broker as JSON
        return cls(**known)


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
    requests = [RunRequest(repo=repo, rev=sha, samples=task.samples, suite=task.suite, params=task.params,
                           quick=task.quick, branch=task.branch, trigger=task.trigger, pr_number=task.pr_number,
                           capture_dir=home / "artifacts" if task.capture else None, origin=task.repo)
                for sha in commits]
    # Derived ids, so that a redelivered task stores each of its commits' runs under the same id again.
    run_ids = [run_id] + [f"{run_id}-c{i}" for i in range(1, len(commits))]
    manifests = [m for per_commit in run_commits(requests, home / "worktrees", run_ids=run_ids,
                                                 rounds=max(1, task.rounds))
                 for m in per_commit]
    for manifest in manifests:
        upload(manifest)
    return [m["run_id"] for m in manifests]
