"""Run a suite at one commit on this host: check out, execute in a child process, assemble the manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runners.gitrepo import checkout, commit_facts, current_branch, is_ancestor
from service.contract import FORMAT_VERSION

ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class RunRequest:
    repo: Path
    rev: str
    samples: int = 20
    warmup: int = 3
    suite: str = "*"
    params: str = ""
    branch: str | None = None  # None: the repository's checked-out branch when the commit is on it
    trigger: str = "push"
    timeout_s: float = 1800.0


class SuiteCrashed(Exception):
    pass


def repository_name(repo: Path) -> str:
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in repo.resolve().name)
    return name or "repository"


def _read_lines(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    if not path.exists():
        return records
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            break  # the last line of a child killed mid-write
    return records


def _report_progress(out: Path, already: int, progress: ProgressFn) -> int:
    """Tell ``progress`` about measurements written since the last call; returns how many are written now."""
    records = _read_lines(out)
    if not records:
        return already
    done = [r["measurement"]["key"] for r in records[1:] if "measurement" in r]
    if len(done) > already:
        progress(len(done), int(records[0].get("planned", 0)), done[-1])
    return max(already, len(done))


def run_child(root: Path, out: Path, request: RunRequest, progress: ProgressFn | None = None) -> list[dict[str, Any]]:
    """Run the suite at ``root`` in a fresh interpreter; a crash or hang of a kernel cannot reach this process.

    Returns the records the child wrote before it finished, crashed or was killed at the time limit; a run
    with fewer measurements than planned becomes ``partial`` in the manifest.
    """
    cmd = [
        sys.executable, "-m", "runners.child", "--root", str(root), "--out", str(out),
        "--samples", str(request.samples), "--warmup", str(request.warmup), "--suite", request.suite,
    ]
    if request.params:
        cmd += ["--params", request.params]
    env = dict(os.environ)
    # The child must not write bytecode into the checkout it runs.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    stderr_path = out.with_suffix(".stderr")
    # stderr goes to a file, not a pipe: a chatty child must never block on a full pipe nobody reads.
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + request.timeout_s
        seen = 0
        while True:
            try:
                proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    break
            if progress is not None:
                seen = _report_progress(out, seen, progress)
    if progress is not None:
        _report_progress(out, seen, progress)
    tail = stderr_path.read_text(errors="replace")[-2000:].strip()
    stderr_path.unlink(missing_ok=True)
    records = _read_lines(out)
    if not records:
        raise SuiteCrashed(f"the suite process exited with {proc.returncode} before writing anything: {tail}")
    return records


def build_manifest(
    request: RunRequest,
    records: list[dict[str, Any]],
    commit: dict[str, Any],
    repository: dict[str, Any],
    branch: str | None,
    started_at: datetime,
    finished_at: datetime,
    run_id: str,
) -> dict[str, Any]:
    environment = records[0]["environment"]
    measurements = [r["measurement"] for r in records[1:] if "measurement" in r]
    planned = int(records[0].get("planned", len(measurements)))
    results = []
    for m in measurements:
        result = {k: m[k] for k in ("suite", "name", "params", "unit", "direction", "status", "samples",
                                    "compile_time_s", "flops", "bytes_accessed", "max_abs_error", "message")}
        result["metric"] = "wall_time"
        results.append(result)
    failed = sum(1 for r in results if r["status"] != "ok")
    if not results or failed == len(results):
        status = "failed"
    elif failed or len(results) < planned:
        status = "partial"
    else:
        status = "complete"
    return {
        "format_version": FORMAT_VERSION,
        "run_id": run_id,
        "repository": repository,
        "commit": commit,
        "branch": branch,
        "trigger": request.trigger,
        "environment": environment,
        "started_at": started_at.isoformat(),
        "finished_at": finished_at.isoformat(),
        "status": status,
        "results": results,
    }


def run_at_commit(request: RunRequest, cache_dir: Path, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Check the commit out, run the suite in a child process, and return the manifest (a JSON-ready dict)."""
    repo = request.repo.resolve()
    facts = commit_facts(repo, request.rev)
    branch = request.branch
    if branch is None:
        head_branch = current_branch(repo)
        if head_branch and is_ancestor(repo, facts.sha, head_branch):
            branch = head_branch
    default_branch = current_branch(repo) or "main"
    worktree = checkout(repo, facts.sha, cache_dir / repository_name(repo))
    started = datetime.now(UTC)
    out = worktree.parent / f"{facts.sha}.{uuid.uuid4().hex[:8]}.jsonl"
    try:
        records = run_child(worktree, out, request, progress)
    finally:
        out.unlink(missing_ok=True)
    finished = datetime.now(UTC)
    repository = {"name": repository_name(repo), "url": repo.as_uri(), "default_branch": default_branch}
    return build_manifest(request, records, facts.as_manifest(), repository, branch, started, finished,
                          run_id=uuid.uuid4().hex)

