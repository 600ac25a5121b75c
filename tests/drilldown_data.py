"""A real captured run for the drill-down pages: the rmsnorm kernel run on this CPU with capture on (trace, HLO,
object files), plus the LLO and SASS fixtures attached to it as if a TPU and a GPU runner had captured them, and
a line of hostile text in its HLO dump (``HOSTILE``), which the pages must show literally and never run."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from runners.artifacts import ArtifactStore
from runners.local import RunRequest, run_at_commit
from tests import builders
from tests.conftest import REPO_ROOT
from tests.gitrepo import project_suite_repo

HOSTILE = "<script>window.__pwned = 1</script>"
FIXTURES = REPO_ROOT / "tests" / "fixtures"
LLO_FIXTURE = "synthetic_form_a-final_bundles.txt"  # one program, named after the file: synthetic_form_a
SASS_FIXTURE = "synthetic_sm80_sm90a.sass"


def captured_run(workdir: Path) -> tuple[dict[str, Any], ArtifactStore]:
    """One real captured run (the expensive part: share it across tests) and the store holding its artifacts."""
    store = ArtifactStore(workdir / "artifacts")
    request = RunRequest(repo=project_suite_repo(workdir / "repo"), rev="HEAD", samples=3, warmup=1,
                         suite="norms/rmsnorm", params="fused=True", quick=True, capture_dir=store.root)
    [manifest] = run_at_commit(request, workdir / "worktrees")
    return manifest, store


def wall_result(manifest: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in manifest["results"] if r["metric"] == "wall_time")


def drilldown_manifest(manifest: dict[str, Any], store: ArtifactStore) -> dict[str, Any]:
    """A copy of the captured manifest with the LLO and SASS fixtures attached, the HLO dumps carrying
    ``HOSTILE`` as an op_name, and the commit subject hostile too; the new artifacts are put in ``store``."""
    doc = copy.deepcopy(manifest)
    doc["commit"]["subject"] = f"rmsnorm {HOSTILE}"
    result = wall_result(doc)
    for ref in result["artifacts"]:
        if ref["kind"] == "hlo":
            text = store.get(ref["sha256"]).decode()
            first = text.index('op_name="') + len('op_name="')
            end = text.index('"', first)
            poisoned = store.put((text[:first] + HOSTILE + text[end:]).encode(), "hlo", ref["name"])
            ref.update(sha256=poisoned.sha256, size=poisoned.size)
    for kind, name in (("llo", LLO_FIXTURE), ("sass", SASS_FIXTURE)):
        folder = "llo" if kind == "llo" else "sass"
        added = store.put((FIXTURES / folder / name).read_bytes(), kind, name)
        result["artifacts"].append({"kind": kind, "name": name, "sha256": added.sha256, "size": added.size})
    return doc


def collective_results(name: str, size_kib: int, samples: list[float]) -> list[dict[str, Any]]:
    """A collective's wall time and the algbw metric the harness derives from it (runners/harness.py: bytes_moved
    / t / 1e9, with bytes_moved the per-device buffer, ``size_kib`` KiB), as a runner would report them."""
    size = size_kib * 1024
    params = {"size_kib": size_kib}
    return [
        builders.result("collectives", name, samples=samples, params=params, flops=None, bytes_accessed=None),
        builders.result("collectives", name, samples=[size / t / 1e9 for t in samples], params=params,
                        metric="algbw", unit="GB/s", direction="higher_is_better", flops=None, bytes_accessed=None,
                        compile_time_s=None, max_abs_error=None),
    ]
