"""A suite run asked for by a person (POST /api/v1/runs/enqueue, `kernelwatch submit`): its fields checked once,
before a task carries them to a runner, for both faces. A runner refuses what it cannot fetch or select, but only in
its own log, after the request was answered "queued"."""

from __future__ import annotations

import re
from typing import Any

from kernelwatch.errors import InvalidInput
from runners.gitrepo import GitError, check_remote_location
from runners.suite import parse_param_filter
from service.task_names import HARDWARE_NAME

REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/\-]{0,254}$")  # never starts with '-': not a git option
TRIGGERS = ("push", "pr", "manual", "bisect", "confirm")
MAX_SAMPLES = 10000
MAX_SUITE = 200  # a glob over suite/name
MAX_ROUNDS = 64  # runs of the commit, each a fresh process
FIELDS = frozenset({"repo", "commit", "hardware", "suite", "params", "quick", "samples", "trigger", "branch",
                    "rounds", "capture"})


def suite_task(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(hardware, run_suite task kwargs) of a request's fields (``FIELDS``), each checked; InvalidInput naming the
    first that is not what a runner could act on."""
    def text(name: str, default: str | None = None) -> str:
        value = body.get(name, default)
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"give {name!r} as a non-empty string")
        return value.strip()

    repo, commit, hardware = text("repo"), text("commit"), text("hardware", "cpu")
    if len(repo) > 2000:
        raise InvalidInput("'repo' is a repository URL or path of at most 2000 characters")
    try:
        check_remote_location(repo)
    except GitError as exc:
        raise InvalidInput(f"'repo': {exc}") from None
    if not REVISION.match(commit):
        raise InvalidInput(f"'commit' {commit[:80]!r} is not a revision (a sha, branch or tag)")
    if not HARDWARE_NAME.match(hardware):
        raise InvalidInput(f"'hardware' {hardware[:80]!r} is not a runner queue suffix (cpu, h200, tpu-v5e-8...)")
    suite = text("suite", "*")
    if len(suite) > MAX_SUITE or any(ord(c) < 32 or ord(c) == 127 for c in suite):
        raise InvalidInput(f"'suite' is a glob over suite/name of at most {MAX_SUITE} printable characters")
    params = body.get("params", "")
    if not isinstance(params, str):
        raise InvalidInput("'params' is a string NAME=VALUE[,NAME=VALUE]")
    if params:
        try:
            parse_param_filter(params)
        except ValueError as exc:
            raise InvalidInput(f"'params': {exc}") from None
    quick, samples = body.get("quick", False), body.get("samples", 20)
    if not isinstance(quick, bool):
        raise InvalidInput("'quick' is true or false")
    if not isinstance(samples, int) or isinstance(samples, bool) or not 1 <= samples <= MAX_SAMPLES:
        raise InvalidInput(f"'samples' is a whole number from 1 to {MAX_SAMPLES}")
    trigger = text("trigger", "manual")
    if trigger not in TRIGGERS:
        raise InvalidInput(f"'trigger' is one of {', '.join(TRIGGERS)}")
    branch = body.get("branch")
    if branch is not None and (not isinstance(branch, str) or not REVISION.match(branch)):
        raise InvalidInput("'branch' is a branch name")
    rounds, capture = body.get("rounds", 1), body.get("capture", True)
    if not isinstance(rounds, int) or isinstance(rounds, bool) or not 1 <= rounds <= MAX_ROUNDS:
        raise InvalidInput(f"'rounds' is a whole number from 1 to {MAX_ROUNDS}")
    if not isinstance(capture, bool):
        raise InvalidInput("'capture' is true or false")
    return hardware, {"repo": repo, "commit": commit, "suite": suite, "params": params, "quick": quick,
                      "samples": samples, "trigger": trigger, "branch": branch, "capture": capture, "rounds": rounds}
