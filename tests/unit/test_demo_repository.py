"""The demo's scratch repository: every edit applies, one commit is planted, shas are reproducible."""

import subprocess
from pathlib import Path

import pytest

from runners.suite import discover
from service.demo import MARKER, create_demo_repository


def test_every_edit_applies_and_one_commit_is_planted(tmp_path: Path) -> None:
    repo, commits = create_demo_repository(tmp_path / "w")
    assert len(commits) >= 8 and sum(planted for _, _, planted in commits) == 1
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%H", "--reverse"], check=True,
                         capture_output=True, text=True).stdout.split()
    assert log == [sha for sha, _, _ in commits]
    assert "lax.scan" in (repo / "kernels_under_test/softmax.py").read_text()
    assert {s.suite for s in discover(repo)} == {"matmul", "softmax"}


def test_same_content_gives_the_same_shas(tmp_path: Path) -> None:
    _, first = create_demo_repository(tmp_path / "w")
    _, again = create_demo_repository(tmp_path / "w")  # the marker lets the demo replace its own scratch space
    assert first == again


def test_a_foreign_directory_is_never_deleted(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a KernelWatch demo"):
        create_demo_repository(tmp_path)
    assert (tmp_path / "precious.txt").exists() and not (tmp_path / MARKER).exists()
