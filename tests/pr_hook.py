"""What the pull-request hook tests share: a tiny repository with a main branch and a feature branch, GitHub's
webhook payloads for it, and signed deliveries."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from pathlib import Path
from typing import Any

from tests.gitrepo import git

SECRET = "hook-secret"
REPO = "acme/kernels"

KERNEL = '''import jax
import jax.numpy as jnp
import numpy as np

from runners.suite import Case, benchmark

DEPTH = 0


def kernel(x):
    for _ in range(DEPTH):
        x = jnp.tanh(x)
    return x * 2.0 + 1.0


def reference(x):
    for _ in range(DEPTH):
        x = np.tanh(x)
    return x * 2.0 + 1.0


@benchmark(suite="tiny", params=[{"n": 1024}])
def scale(n: int) -> Case:
    x = np.linspace(0.0, 1.0, n, dtype=np.float32)
    return Case(fn=jax.jit(kernel), args=(jnp.asarray(x),), reference=lambda: reference(x), rtol=1e-4, atol=1e-4)
'''


def tiny_repo(root: Path) -> dict[str, str]:
    """main: ``fork_point`` then ``main_tip``; feature (from ``fork_point``): ``head`` puts tanh in the kernel.
    Checked out on main, as a service's clone is."""
    module = root / "kernels_under_test" / "tiny.py"
    module.parent.mkdir(parents=True)
    (module.parent / "__init__.py").write_text("")
    module.write_text(KERNEL)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "scale")
    fork_point = git(root, "rev-parse", "HEAD")
    (root / "README").write_text("docs\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "docs")
    main_tip = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "-b", "feature", fork_point)
    module.write_text(KERNEL.replace("DEPTH = 0", "DEPTH = 2"))
    git(root, "commit", "-q", "-am", "tanh before scaling")
    head = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "main")
    return {"fork_point": fork_point, "main_tip": main_tip, "head": head}


def push_to_feature(root: Path, depth: int) -> str:
    git(root, "checkout", "-q", "feature")
    module = root / "kernels_under_test" / "tiny.py"
    module.write_text(KERNEL.replace("DEPTH = 0", f"DEPTH = {depth}"))
    git(root, "commit", "-q", "-am", f"depth {depth}")
    sha = git(root, "rev-parse", "HEAD")
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
