"""A benchmark's version: its function's code, not its comments, docstring, formatting or grid."""

from __future__ import annotations

import textwrap
from types import ModuleType
from typing import Any

from runners.suite import benchmark_version

BASE = '''
@benchmark(suite="s", params=grid(n=[1, 2]))
def rows(n):
    """Rows of a softmax."""
    x = make(n) * 4.0
    return Case(fn=f, args=(x,))
'''


def factory(source: str, tmp_path: Any, name: str) -> Any:
    """The function ``source`` defines, loaded from a real file (inspect reads the source from there)."""
    path = tmp_path / f"{name}.py"
    path.write_text("def benchmark(**_):\n    return lambda f: f\n\n\ndef grid(**_):\n    return ()\n"
                    + textwrap.dedent(source))
    module = ModuleType(name)
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102
    return module.rows


def test_the_same_code_is_the_same_version_whatever_its_comments_and_grid(tmp_path: Any) -> None:
    base = benchmark_version(factory(BASE, tmp_path, "a"))
    assert base is not None and len(base) == 16
    same = [
        BASE.replace("* 4.0\n", "* 4.0  # logits of a trained model span a few units\n"),
        BASE.replace('"""Rows of a softmax."""', '"""Rows of a softmax, as a model computes them."""'),
        BASE.replace("grid(n=[1, 2])", "grid(n=[1, 2, 4])"),  # a point more: the old points' series go on
        BASE.replace("    x = make(n) * 4.0\n", "\n    x = make(n)  *  4.0\n\n"),
    ]
    for i, source in enumerate(same):
        assert benchmark_version(factory(source, tmp_path, f"same{i}")) == base, source
    edited = [BASE.replace("* 4.0", "* 8.0"), BASE.replace("args=(x,)", "args=(x, x)")]
    for i, source in enumerate(edited):
        assert benchmark_version(factory(source, tmp_path, f"edited{i}")) not in (None, base), source


def test_a_function_without_readable_source_has_no_version() -> None:
    assert benchmark_version(len) is None  # type: ignore[arg-type]
