"""`run --working-tree` measures a copy of the working copy; two such runs at once must each measure their own.
One ``working-tree`` directory per repository name was replaced by each copy: two `ci --working-tree` running
together (two edits of one repository, or two repositories of one folder name) measured each other's code from
their third round on, silently. Copies are named by their content now."""

from __future__ import annotations

from pathlib import Path

from runners.gitrepo import copy_working_tree, tree_digest
from tests.gitrepo import commit_all, git


def repository(root: Path, text: str) -> Path:
    repo = root / "kernels"  # one folder name for both: the name the copies were kept under
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "kernel.py").write_text("STEPS = 10\n")
    commit_all(repo, "kernel")
    (repo / "kernel.py").write_text(text)  # the uncommitted edit
    return repo


def test_two_working_copies_of_one_folder_name_are_kept_apart_and_one_content_is_copied_once(tmp_path: Path) -> None:
    first, second = repository(tmp_path / "a", "STEPS = 30\n"), repository(tmp_path / "b", "STEPS = 300\n")
    cache = tmp_path / "worktrees" / "kernels"
    copy_a = copy_working_tree(first, cache)
    copy_b = copy_working_tree(second, cache)  # a second run starting while the first measures its copy
    assert copy_a != copy_b
    assert (copy_a / "kernel.py").read_text() == "STEPS = 30\n"  # the first run's code is still its own
    assert (copy_b / "kernel.py").read_text() == "STEPS = 300\n"
    again = copy_working_tree(first, cache)
    assert again == copy_a and copy_a.name == f"working-tree-{tree_digest(copy_a)[:16]}"
    assert sorted(p.name for p in cache.iterdir()) == sorted([copy_a.name, copy_b.name])  # no partial left over
    assert git(first, "status", "--porcelain") == "M kernel.py"  # the repository as it was
