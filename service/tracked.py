"""Tracked branches: what `KERNELWATCH_TRACK` names, the Celery beat schedule made of it, and the identity of the
scheduled run of a branch tip. Pure: no git, no broker, no database (those are in service/pipeline/tracking.py).

An entry is ``REPO_URL_OR_PATH@BRANCH[@HARDWARE]``. A repository URL may itself hold ``@``
(``git@github.com:org/kernels.git``, ``https://user@host/kernels``), so an entry is read from the right: the last
field is the hardware only when what stays on its left still reads as a repository and a branch.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from service.task_names import HARDWARE_NAME, RUN_TRACKED_TASK

# The beat's ticks go to the detect queue: a tick is one `git ls-remote` (or rev-parse) and one indexed query,
# cheap bookkeeping next to detection, and a queue of its own would need one more worker consuming it.
TRACK_QUEUE = "detect"
SCHEDULE_TRIGGER = "schedule"
DEFAULT_HARDWARE = "cpu"
# Namespace of the scheduled runs' task ids (uuid5): the same tip on the same hardware is always the same task id,
# hence the same run id once stored (the task id becomes the run id).
_SCHEDULE_NAMESPACE = uuid.UUID("6b1f7d2e-4c57-5a0e-9d55-2f3c8e1a9b40")

# What reads as a hardware field at all (so that `...@main@CPU` is not re-read as a branch named "main@CPU");
# a field of this shape that is not a runner queue's name (task_names.HARDWARE_NAME) is refused, not scheduled to
# a queue no worker consumes.
_HARDWARE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


class TrackError(ValueError):
    """An entry of KERNELWATCH_TRACK that cannot be read; the message names the entry and what to write."""


@dataclass(frozen=True)
class TrackedBranch:
    repo: str  # a URL git can ls-remote, or a local repository's path
    branch: str
    hardware: str = DEFAULT_HARDWARE  # the runner queue's suffix: runner.<hardware>

    @property
    def label(self) -> str:
        return f"{self.repo}@{self.branch}@{self.hardware}"


def valid_branch_name(name: str) -> bool:
    """git check-ref-format's rules, enough to tell a branch from part of a URL."""
    if not name or name.startswith(("-", "/")) or name.endswith(("/", ".", ".lock")) or name == "@":
        return False
    if any(c in name for c in " ~^:?*[\\\t\n") or ".." in name or "@{" in name or "//" in name:
        return False
    return not any(part.startswith(".") for part in name.split("/"))


def looks_like_repository(location: str) -> bool:
    """A URL with a host or a file path, an scp-like ``[user@]host:path``, or a local path."""
    if not location or location != location.strip():
        return False
    if "://" in location:
        parts = urlsplit(location)
        if parts.scheme == "file":
            return parts.path not in ("", "/")
        # "ssh://git" is what is left of "ssh://git@host/kernels@main" split at the wrong "@": no host, no path.
        return bool(parts.hostname) and parts.path not in ("", "/")
    head, colon, tail = location.partition(":")
    if colon and "/" not in head:  # scp-like syntax: host:path
        return bool(head) and bool(tail)
    return True


def parse_track_entry(entry: str) -> TrackedBranch:
    fields = entry.rsplit("@", 2)
    if len(fields) == 3:
        repo, branch, hardware = fields
        if looks_like_repository(repo) and valid_branch_name(branch) and _HARDWARE.match(hardware):
            if not HARDWARE_NAME.match(hardware):
                raise TrackError(f"KERNELWATCH_TRACK entry {entry!r}: hardware {hardware!r} is not a runner queue's "
                                 "name (lower-case letters, digits, '.' and '-', as `kernelwatch worker --queues "
                                 f"runner.HARDWARE` takes), e.g. {hardware.lower().replace('_', '-')!r}")
            return TrackedBranch(repo, branch, hardware)
    repo, at, branch = entry.rpartition("@")
    if not at or not looks_like_repository(repo) or not valid_branch_name(branch):
        raise TrackError(f"KERNELWATCH_TRACK entry {entry!r} is not REPO_URL_OR_PATH@BRANCH[@HARDWARE], e.g. "
                         "https://github.com/org/kernels.git@main@cpu or /srv/kernels@main")
    return TrackedBranch(repo, branch, DEFAULT_HARDWARE)


def parse_track(raw: str) -> tuple[TrackedBranch, ...]:
    """The comma-separated entries of KERNELWATCH_TRACK, in order; an entry given twice is an error."""
    tracked: list[TrackedBranch] = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        branch = parse_track_entry(entry)
        if branch in tracked:
            raise TrackError(f"KERNELWATCH_TRACK names {branch.label} twice")
        tracked.append(branch)
    return tuple(tracked)


def beat_schedule(tracked: tuple[TrackedBranch, ...], period_s: int) -> dict[str, dict[str, Any]]:
    """Celery's ``beat_schedule``: one entry per tracked branch, each a ``run_tracked`` tick every period.

    One entry per branch, its arguments carried in the message, so that the worker taking the tick needs no
    KERNELWATCH_TRACK of its own and one unreachable repository does not hold the others up. A tick expires after
    one period: when no worker took it in time, the next tick does the same work, so stale ones are dropped.
    """
    return {
        f"track {b.label}": {
            "task": RUN_TRACKED_TASK,
            "schedule": float(period_s),
            "args": (b.repo, b.branch, b.hardware),
            "options": {"queue": TRACK_QUEUE, "expires": float(period_s)},
        }
        for b in tracked
    }


def scheduled_task_id(repo: str, sha: str, hardware: str) -> str:
    """The task id of the scheduled run of ``sha`` on ``hardware``: deterministic, so that the stored run says
    which tip and hardware it was (its run id is this id without dashes) and a second beat can look it up."""
    return str(uuid.uuid5(_SCHEDULE_NAMESPACE, f"{repo}\0{sha}\0{hardware}"))


def scheduled_run_kwargs(branch: TrackedBranch, sha: str) -> dict[str, Any]:
    """A ``run_suite`` task's arguments for the default suite at a tip (plain JSON, as it crosses the broker)."""
    return {"repo": branch.repo, "commit": sha, "suite": "*", "params": "", "quick": False, "samples": 20,
            "trigger": SCHEDULE_TRIGGER, "branch": branch.branch, "capture": True}


def queued_mark_ttl_s(period_s: int, visibility_timeout_s: int) -> int:
    """How long a tip counts as queued without a stored run: a few periods of queue wait, and a redelivered run's
    whole visibility timeout. When it lapses with still nothing stored (the run failed before storing anything,
    or the broker lost it) the next beat queues the tip again."""
    return max(3 * period_s, 2 * visibility_timeout_s)
