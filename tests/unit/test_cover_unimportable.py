"""runners/local.py cover_unimportable on runners as the benchmark processes announced them (the processes
themselves are tests/integration/test_unimportable_module.py's): what a commit that cannot declare some or all of
the suite gets planned and failed, and what is said when nothing can stand in."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from runners.local import ModuleNotImported, NoSuite, cover_unimportable
from runners.session import Announced


@dataclass
class Runner:
    """What cover_unimportable reads of a SuiteRunner, and the stand-ins it plans."""

    rev: str
    announced: dict[str, Announced] = field(default_factory=dict)
    unimportable: dict[str, str] = field(default_factory=dict)
    modules: list[str] = field(default_factory=list)
    suite_missing: str | None = None
    stood_in: dict[str, str] = field(default_factory=dict)

    @property
    def request(self) -> Any:
        return SimpleNamespace(rev=self.rev)

    def stand_in(self, bench: Announced, message: str) -> None:
        self.announced[bench.key] = bench
        self.stood_in[bench.key] = message


def bench(key: str, module: str) -> Announced:
    return Announced(key=key, suite="s", name=key, params={}, unit="s", direction="lower_is_better", devices=1,
                     timeout_s=60, module=module)


def test_a_commit_without_a_suite_fails_every_benchmark_the_other_declares() -> None:
    base = Runner("base", suite_missing="no kernels_under_test/__init__.py under /runner/checkout")
    head = Runner("head", announced={"a": bench("a", "m"), "b": bench("b", "n")}, modules=["m", "n"])
    cover_unimportable([base, head])  # type: ignore[list-item]
    assert set(base.stood_in) == {"a", "b"} and not head.stood_in
    # The stored reason is the runner's own words without its checkout's path.
    assert all("no benchmark suite" in m and "/runner" not in m for m in base.stood_in.values())


def test_no_commit_with_a_suite_is_one_error_naming_what_a_suite_is() -> None:
    both = [Runner("base", suite_missing="no kernels_under_test/__init__.py under /x"),
            Runner("head", suite_missing="no kernels_under_test/__init__.py under /y")]
    with pytest.raises(NoSuite, match="no benchmark suite at any of the 2 commits: no kernels_under_test"):
        cover_unimportable(both)  # type: ignore[arg-type]
    with pytest.raises(NoSuite, match="no benchmark suite at HEAD"):
        cover_unimportable([Runner("HEAD", suite_missing="no benchmark directory /z")])  # type: ignore[list-item]


@pytest.mark.parametrize("error, hint", [
    ("SyntaxError: invalid syntax (bench_x.py, line 3)", "(fix the module)"),
    ("ImportError: cannot import name 'x' from 'lib'", "import the kernel inside the benchmark's factory"),
])
def test_a_module_nothing_else_declares_is_an_error_with_a_hint_that_fits(error: str, hint: str) -> None:
    alone = Runner("main~2", unimportable={"bench_x": error})
    with pytest.raises(ModuleNotImported) as raised:
        cover_unimportable([alone])  # type: ignore[list-item]
    assert hint in str(raised.value), raised.value
    assert error in str(raised.value)
