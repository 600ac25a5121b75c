"""A beat tick for one tracked branch: resolve its tip, and queue the default suite there on its hardware unless
that tip's scheduled run is already stored or already queued.

Two checks make ticks idempotent, each covering what the other cannot see:

- **stored**: the scheduled run of a tip has a deterministic task id (``service.tracked.scheduled_task_id``) and
  a runner stores its run under the task id, so one indexed lookup of that run id tells whether the tip was
  measured on that hardware. It holds forever, whatever Redis forgets.
- **queued**: between sending and storing (queue wait plus the run, minutes to hours) the database knows
  nothing, so the tick marks the task id in Redis with ``SET NX EX``: the first tick sets it and sends, later ticks
  find it and skip. The mark lives in the broker's Redis, so a Redis that lost its queues lost the marks with them
  and the tip is queued again; a run that failed before storing anything is queued again when its mark expires.
  Until then the mark holds the runner's reason (``record_failure``): the ticks report the tip ``failed``, with
  that reason and when it will be tried again, not ``already-queued`` as if a run were still on its way.

Should both checks ever miss (a mark expired while the task still waited), the second message carries the same
task id, so its run has the same run id and ingest refuses it as a duplicate: runner time lost, nothing stored
twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import InvalidInput, Transient
from runners.gitrepo import GitError, check_location, check_rev, run_git
from service.store.runs import run_stored
from service.task_names import runner_queue
from service.tracked import TrackedBranch, scheduled_run_kwargs, scheduled_task_id

GIT_TIMEOUT_S = 60
MARK_PREFIX = "kernelwatch:scheduled:"
FAILED_PREFIX = "failed: "  # a mark's value once its run failed (record_failure); "1" while the run is on its way
MAX_REASON_CHARS = 500

TipResolver = Callable[[str, str], str]
IsStored = Callable[[str], bool]
Send = Callable[[str, str, dict[str, Any]], None]  # (queue, task id, run_suite kwargs)


class QueuedMarks(Protocol):
    def mark(self, task_id: str, ttl_s: int) -> bool:
        """Mark the task as queued; False when it was marked already (and the mark has not expired)."""

    def clear(self, task_id: str) -> None: ...

    def failure(self, task_id: str) -> tuple[str, int] | None:
        """The reason the marked task's run failed (``record_failure``) and the seconds its mark has left; None
        while no failure is recorded (the run is on its way, or the mark has lapsed)."""


@dataclass(frozen=True)
class TickOutcome:
    branch: TrackedBranch
    sha: str
    task_id: str
    action: Literal["queued", "stored", "already-queued", "failed"]
    failure: str | None = None  # "failed": the runner's reason
    retry_in_s: int | None = None  # "failed": when the mark lapses and the next tick queues the tip again


def tick(branch: TrackedBranch, resolve_tip: TipResolver, is_stored: IsStored, marks: QueuedMarks, send: Send,
         mark_ttl_s: int) -> TickOutcome:
    """One beat tick for one branch; raises Transient when git, the database or the broker is unavailable."""
    sha = resolve_tip(branch.repo, branch.branch)
    task_id = scheduled_task_id(branch.repo, sha, branch.hardware)
    if is_stored(task_id):
        return TickOutcome(branch, sha, task_id, "stored")
    if not marks.mark(task_id, mark_ttl_s):
        failed = marks.failure(task_id)
        if failed is not None:
            return TickOutcome(branch, sha, task_id, "failed", failure=failed[0], retry_in_s=failed[1])
        return TickOutcome(branch, sha, task_id, "already-queued")
    try:
        send(runner_queue(branch.hardware), task_id, scheduled_run_kwargs(branch, sha))
    except Exception as exc:
        marks.clear(task_id)  # not sent: the next tick (or this one's retry) must be free to send it
        raise Transient(f"cannot queue the scheduled run of {branch.label} at {sha[:12]}: {exc}") from exc
    return TickOutcome(branch, sha, task_id, "queued")


def branch_tip(repo: str, branch: str) -> str:
    """The sha a branch points at: ``git rev-parse`` in a local repository, ``git ls-remote`` for a URL
    (``file://`` URLs included)."""
    local = Path(repo).expanduser()
    is_local = "://" not in repo and local.is_dir()
    try:
        check_rev(branch)
        if is_local:
            proc = run_git(["-C", str(local), "rev-parse", "--verify", "--quiet", "--end-of-options",
                            f"refs/heads/{branch}^{{commit}}"], timeout_s=GIT_TIMEOUT_S)
        else:
            check_location(repo)
            proc = run_git(["ls-remote", "--heads", "--", repo, f"refs/heads/{branch}"], network=True,
                           timeout_s=GIT_TIMEOUT_S)
    except GitError as exc:
        if "timed out" in str(exc):
            raise Transient(f"git did not answer within {GIT_TIMEOUT_S} s for {repo}") from None
        raise InvalidInput(str(exc)) from None
    if is_local:
        if proc.returncode != 0:
            raise InvalidInput(f"{repo} has no branch {branch!r}")
        return proc.stdout.strip()
    if proc.returncode != 0:  # unreachable host, or no such repository: git does not tell the two apart
        raise Transient(f"git ls-remote {repo} failed: {proc.stderr.strip()}")
    for line in proc.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if ref == f"refs/heads/{branch}":
            return sha
    raise InvalidInput(f"{repo} has no branch {branch!r}")


def scheduled_run_stored(sessions: sessionmaker[Session]) -> IsStored:
    """Whether the run of a scheduled task is stored: its run id is the task id without dashes (one run per
    environment; environments after the first get ``-d<group>`` suffixes)."""

    def is_stored(task_id: str) -> bool:
        return run_stored(sessions, task_id.replace("-", ""))  # Transient when the database is away

    return is_stored


class RedisQueuedMarks:
    """Queued marks as Redis keys with an expiry (``SET NX EX``), in the broker's Redis."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def mark(self, task_id: str, ttl_s: int) -> bool:
        import redis

        try:
            return bool(self.client.set(MARK_PREFIX + task_id, "1", nx=True, ex=ttl_s))
        except redis.exceptions.RedisError as exc:
            raise Transient(f"Redis unavailable: {exc}") from exc

    def clear(self, task_id: str) -> None:
        import redis

        try:
            self.client.delete(MARK_PREFIX + task_id)
        except redis.exceptions.RedisError:
            pass  # the mark expires on its own

    def failure(self, task_id: str) -> tuple[str, int] | None:
        import redis

        try:
            with self.client.pipeline() as pipe:
                value, ttl = pipe.get(MARK_PREFIX + task_id).ttl(MARK_PREFIX + task_id).execute()
        except redis.exceptions.RedisError as exc:
            raise Transient(f"Redis unavailable: {exc}") from exc
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        if not isinstance(text, str) or not text.startswith(FAILED_PREFIX):
            return None
        return text[len(FAILED_PREFIX):], max(0, int(ttl))


def record_failure(client: Any, task_id: str, reason: str) -> None:
    """Keep why a scheduled run failed in its queued mark, which keeps its expiry (``SET XX KEEPTTL``: a mark that
    lapsed is not brought back, the next tick queues the tip again). Best effort: a Redis that cannot be reached
    costs the ticks the reason, not the runner its task's outcome."""
    import redis

    try:
        client.set(MARK_PREFIX + task_id, FAILED_PREFIX + reason[:MAX_REASON_CHARS], xx=True, keepttl=True)
    except redis.exceptions.RedisError:
        pass
