"""`kernelwatch parse KIND PATH --format json`: the stable command for every parser, on real CPU captures and
on the SASS/LLO fixtures; bad input is one line on stderr and exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runners.artifacts import ArtifactStore
from runners.local import RunRequest, run_at_commit
from tests.conftest import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures"


def kernelwatch_parse(kind: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", "parse", kind, str(path), "--format", "json"],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One real captured run of a small kernel; its artifacts written out as plain files by kind."""
    base = tmp_path_factory.mktemp("capture")
    repo = base / "repo"
    repo.mkdir()
    shutil.copytree(REPO_ROOT / "kernels_under_test", repo / "kernels_under_test",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "suite"]):
        subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=T", *args], check=True)
    store = ArtifactStore(base / "artifacts")
    [manifest] = run_at_commit(RunRequest(repo=repo, rev="HEAD", samples=2, warmup=0, suite="norms/layernorm",
                                          params="fused=True", quick=True, capture_dir=store.root),
                               base / "worktrees")
    files: dict[str, Path] = {}
    for artifact in next(r for r in manifest["results"] if r["metric"] == "wall_time")["artifacts"]:
        if artifact["kind"] in ("hlo", "xplane", "x86-obj") and artifact["kind"] not in files:
            path = base / artifact["name"]
            path.write_bytes(store.get(artifact["sha256"]))
            files[artifact["kind"]] = path
    return files


@pytest.mark.parametrize(("kind", "key", "fields"), [
    ("xplane", "ops", {"module", "op", "occurrences", "total_ns", "self_ns", "category"}),
    ("hlo", "modules", {"name", "fingerprint", "instructions", "fusions", "opcodes", "fusion_list", "op_list"}),
    ("x86-obj", "kernels", {"name", "instructions", "mix"}),
])
def test_cpu_captures_parse_to_the_documented_shape(captured: dict[str, Path], kind: str, key: str,
                                                    fields: set[str]) -> None:
    proc = kernelwatch_parse(kind, captured[kind])
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)[key]
    assert records and all(fields <= set(r) for r in records)


@pytest.mark.parametrize(("kind", "fixture", "key", "fields"), [
    ("sass", "sass/synthetic_sm80_sm90a.sass", "kernels", {"name", "instructions", "mix"}),
    ("llo", "llo/synthetic_form_b-final_bundles.txt", "programs", {"name", "bundles", "ops", "slots", "loops"}),
    ("llo", "llo/synthetic_form_a-final_bundles.txt", "programs", {"name", "bundles", "ops", "slots", "loops"}),
])
def test_device_listings_parse_to_the_documented_shape(kind: str, fixture: str, key: str, fields: set[str]) -> None:
    proc = kernelwatch_parse(kind, FIXTURES / fixture)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)[key]
    assert records and all(fields <= set(r) for r in records)


@pytest.mark.parametrize("kind", ["xplane", "hlo", "x86-obj", "sass", "llo"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x00\x01binary\xffgarbage" * 50)
    proc = kernelwatch_parse(kind, garbage)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "garbage.bin" in lines[0] and "Traceback" not in proc.stderr
