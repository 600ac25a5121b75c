"""runners.gitrepo.tree_digest: the identity of a measured working copy."""

from __future__ import annotations

import os
import re
from pathlib import Path

from runners.gitrepo import tree_digest


def test_a_tree_digest_follows_the_files_not_where_they_lie(tmp_path: Path) -> None:
    """What tells one working copy's runs from another's (the manifest's environment.working_tree): the same files
    anywhere give the same digest; an edit, a rename, a new file or a link's new target give another; ``.git``
    does not count."""
    first, second = tmp_path / "a", tmp_path / "b"
    for root in (first, second):
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "ops.py").write_text("def f(x):\n    return x + 1\n")
        (root / "README").write_text("notes")
        os.symlink("pkg/ops.py", root / "link")
    (second / ".git").write_text("gitdir: /somewhere/else")
    digest = tree_digest(first)
    assert re.fullmatch(r"[0-9a-f]{64}", digest) and tree_digest(second) == digest
    changes = [lambda: (first / "pkg" / "ops.py").write_text("def f(x):\n    return x + 2\n"),
               lambda: (first / "README").rename(first / "README.md"),
               lambda: (first / "pkg" / "new.py").write_text(""),
               lambda: (os.remove(first / "link"), os.symlink("README.md", first / "link"))]
    seen = {digest}
    for change in changes:
        change()
        seen.add(tree_digest(first))
    assert len(seen) == len(changes) + 1
