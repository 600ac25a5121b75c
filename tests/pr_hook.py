"""What the pull-request hook tests share: a tiny repository with a main branch and a feature branch, GitHub's
webhook payloads for it, and signed deliveries."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from service.contract import parse_manifest
from service.pipeline.ingest import ingest_manifest
from service.store.db import unit_of_work
from service.store.models import PullRequest
from tests import builders
from tests.gitrepo import SCALE_KERNEL, commit_all, git, suite_repo

SECRET = "hook-secret"
REPO = "acme/kernels"


def tiny_repo(root: Path) -> dict[str, str]:
    """main: ``fork_point`` then ``main_tip``; feature (from ``fork_point``): ``head`` puts tanh in the kernel.
    Checked out on main, as a service's clone is."""
    module = suite_repo(root, SCALE_KERNEL)
    fork_point = commit_all(root, "scale")
    (root / "README").write_text("docs\n")
    main_tip = commit_all(root, "docs")
    git(root, "checkout", "-q", "-b", "feature", fork_point)
    module.write_text(SCALE_KERNEL.replace("DEPTH = 0", "DEPTH = 2"))
    head = commit_all(root, "tanh before scaling")
    git(root, "checkout", "-q", "main")
    return {"fork_point": fork_point, "main_tip": main_tip, "head": head}


def push_to_feature(root: Path, depth: int) -> str:
    git(root, "checkout", "-q", "feature")
    module = root / "kernels_under_test" / "tiny.py"
    module.write_text(SCALE_KERNEL.replace("DEPTH = 0", f"DEPTH = {depth}"))
    sha = commit_all(root, f"depth {depth}")
    git(root, "checkout", "-q", "main")
    return sha


def merge_base_of(root: Path) -> Any:
    """The fake GitHub's compare API, answered by git itself."""
    return lambda repo, base, head: git(root, "merge-base", base, head)


def pull(clone_url: str, base_sha: str, head_sha: str, number: int = 7, head_repo: str = REPO,
         labels: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "number": number, "state": "open", "labels": [{"name": name} for name in labels],
        "base": {"ref": "main", "sha": base_sha, "repo": {"full_name": REPO, "clone_url": clone_url}},
        "head": {"ref": "feature", "sha": head_sha, "repo": {"full_name": head_repo, "clone_url": clone_url}},
    }


def pr_event(action: str, pull_request: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"action": action, "number": pull_request["number"], "pull_request": pull_request,
            "repository": {"full_name": REPO}, "installation": {"id": 77}, **extra}


def comment_event(number: int, login: str, body: str) -> dict[str, Any]:
    return {"action": "created", "issue": {"number": number, "pull_request": {"url": "..."}},
            "comment": {"body": body, "user": {"login": login}}, "repository": {"full_name": REPO},
            "installation": {"id": 77}}


def signed(event: str, payload: dict[str, Any], delivery: str | None = None,
           secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return body, {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
                  "X-Hub-Signature-256": signature, "Content-Type": "application/json"}


def measured_pull_requests(sessions: Any, count: int) -> list[int]:
    """``count`` pull requests of acme/kernels, each running, its merge-base and head measured once."""
    with unit_of_work(sessions) as s:
        for position in range(2 * count):
            ingest_manifest(s, parse_manifest(builders.manifest(position, [builders.result()], repo="kernels")))
    ids = []
    with unit_of_work(sessions) as s:
        for i in range(count):
            base, head = builders.sha_for(f"kernels-{2 * i}"), builders.sha_for(f"kernels-{2 * i + 1}")
            now = datetime.now(UTC)
            pr = PullRequest(repository="acme/kernels", number=100 + i, clone_url="file:///tmp/kernels",
                             installation_id=77, base_ref="main", base_sha=base, head_repository="acme/kernels",
                             head_sha=head, merge_base_sha=base, state="running", created_at=now, updated_at=now)
            s.add(pr)
            s.flush()
            ids.append(pr.id)
    return ids
