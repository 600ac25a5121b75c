"""Two real commits whose one fusion's code differs, captured once and stored through the real pipeline, for the
Diff page's integration and browser tests.

The second commit puts sixteen tanh into the elementwise fusion (``broadcast_add_fusion``), so its x86 code
grows while the reduction's stays the same. Storing goes through ``submit_manifest`` with an in-process queue:
detection (a stand-in detector that flags the newest commit), parsing of the trace, HLO and object files, and
the attribution and static detection that parsing triggers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.vocabulary import Polarity
from runners.artifacts import ArtifactStore
from runners.local import RunRequest, run_commits
from service.detect.types import ChangePoint, SeriesPoint
from service.pipeline.jobs import JobEnv
from service.pipeline.queue import InProcessQueue
from service.pipeline.submit import submit_manifest
from tests.gitrepo import two_commit_suite_repo

CHANGED_FUSION = "broadcast_add_fusion"  # x * 2 + 1, then tanh(...tanh(x)) * 2 + 1; the reduction: a library call
DEPTH = 16  # tanh the second commit puts into the elementwise fusion
KERNEL = '''import jax
import jax.numpy as jnp
import numpy as np

from runners.suite import Case, benchmark

DEPTH = 0


def kernel(x, y):
    for _ in range(DEPTH):
        x = jnp.tanh(x)
    return x * 2.0 + 1.0, jnp.sum(y * y, axis=-1)


def reference(x, y):
    for _ in range(DEPTH):
        x = np.tanh(x)
    return x * 2.0 + 1.0, np.sum(y * y, axis=-1)


@benchmark(suite="tiny", params=[{"n": 65536}])
def two_fusions(n: int) -> Case:
    x = np.linspace(0.0, 1.0, n, dtype=np.float32)
    y = np.linspace(0.0, 1.0, 4096, dtype=np.float32).reshape(64, -1)
    return Case(fn=jax.jit(kernel), args=(jnp.asarray(x), jnp.asarray(y)), reference=lambda: reference(x, y),
                rtol=1e-4, atol=1e-4)
'''


def capture_two_commits(root: Path, samples: int = 5) -> tuple[list[dict[str, Any]], Path]:
    """Run the suite at both commits with capture on; the manifests and the artifact store they captured into."""
    repo = root / "repo"
    # Sixteen tanh, not one: their time must stand far above the noise of a loaded machine's thread pool.
    two_commit_suite_repo(repo, KERNEL, KERNEL.replace("DEPTH = 0", f"DEPTH = {DEPTH}"),
                          ("two fusions", "tanh in the elementwise fusion"))
    store = ArtifactStore(root / "artifacts")
    requests = [RunRequest(repo=repo, rev=rev, samples=samples, warmup=1, capture_dir=store.root)
                for rev in ("HEAD~1", "HEAD")]
    manifests = [m for ms in run_commits(requests, root / "worktrees") for m in ms]
    assert len(manifests) == 2
    return manifests, store.root


class StepAtLatest:
    """Plays the time detector: a regression at the newest commit once there are two (its own judgement is
    tested elsewhere; here it only has to leave a finding whose diff link can be followed)."""

    name = "step-at-latest"
    version = 1

    def detect(self, points: Sequence[SeriesPoint], polarity: Polarity) -> list[ChangePoint]:
        if len(points) < 2:
            return []
        before, after = (float(np.median(p.samples)) for p in points[-2:])
        return [ChangePoint(index=len(points) - 1, commit_id=points[-1].commit_id,
                            previous_commit_id=points[-2].commit_id, before=before, after=after,
                            magnitude=after / before - 1, noise_units=9.0, kind="regression")]


def store_captured(sessions: sessionmaker[Session], manifests: Sequence[dict[str, Any]],
                   artifacts: ArtifactStore) -> None:
    """Submit the manifests; detection, parsing and attribution run in-process as each one lands."""
    queue = InProcessQueue(JobEnv(sessions, StepAtLatest(), artifacts))
    for manifest in manifests:
        submit_manifest(sessions, queue, manifest, artifacts)
