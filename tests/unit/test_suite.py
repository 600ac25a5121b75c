from pathlib import Path

import pytest

from runners.suite import discover, grid, parse_param_filter, select
from tests.conftest import REPO_ROOT

SUITE_INIT = ""
SUITE_MODULE = '''
from runners.suite import Case, benchmark, grid

@benchmark(suite="toy", params=grid(n=[1, 2], kind=["a", "b"]))
def toy(n, kind):
    return Case(fn=lambda x: x * n, args=(1.0,))

@benchmark(suite="other", name="renamed")
def plain():
    return Case(fn=lambda: 0, args=())

def helper():  # not a benchmark
    return None
'''


def make_suite(root: Path, body: str = SUITE_MODULE) -> Path:
    pkg = root / "kernels_under_test"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(SUITE_INIT)
    (pkg / "toys.py").write_text(body)
    (pkg / "_private.py").write_text("raise RuntimeError('private modules are not imported')\n")
    return root


def test_grid_is_the_cartesian_product_in_stable_order() -> None:
    assert grid(a=[1, 2], b=["x"]) == ({"a": 1, "b": "x"}, {"a": 2, "b": "x"})
    with pytest.raises(ValueError, match="non-empty"):
        grid(a=[])
    with pytest.raises(ValueError, match="list of values"):
        grid(a="abc")


def test_discover_finds_declared_benchmarks_only(tmp_path: Path) -> None:
    specs = discover(make_suite(tmp_path))
    assert sorted((s.suite, s.name, len(s.grid)) for s in specs) == [("other", "renamed", 1), ("toy", "toy", 4)]


def test_discover_loads_the_checkout_given_not_the_installed_suite(tmp_path: Path) -> None:
    a = discover(make_suite(tmp_path / "a"))
    b = discover(make_suite(tmp_path / "b", SUITE_MODULE.replace('suite="toy"', 'suite="changed"')))
    assert {s.suite for s in a} == {"toy", "other"} and {s.suite for s in b} == {"changed", "other"}


def test_select_by_glob_and_params(tmp_path: Path) -> None:
    specs = discover(make_suite(tmp_path))
    keys = [i.key for i in select(specs, "toy/*", parse_param_filter("kind=b"))]
    assert keys == ["toy/toy[kind=b,n=1]", "toy/toy[kind=b,n=2]"]
    assert len(list(select(specs))) == 5
    # A glob without '/' is a suite or a benchmark's name: `--suite toy` selected nothing.
    assert [i.key for i in select(specs, "toy", parse_param_filter("kind=b"))] == keys
    assert len(list(select(specs, "to?"))) == 4 and not list(select(specs, "nope"))  # toy; not other/renamed


def test_default_suite_by_bare_names() -> None:
    specs = discover(REPO_ROOT)
    by_suite = {i.spec.suite for i in select(specs, "softmax")}
    by_name = {(i.spec.suite, i.spec.name) for i in select(specs, "softmax_rows")}
    assert by_suite == {"softmax"} and by_name == {("softmax", "softmax_rows")}


def test_param_filter_syntax() -> None:
    assert parse_param_filter("seq=2048, dtype=bf16") == {"seq": "2048", "dtype": "bf16"}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_param_filter("seq")


def test_missing_suite_is_a_clear_error(tmp_path: Path) -> None:
    from runners.suite import SuiteNotFound

    with pytest.raises(SuiteNotFound, match="kernels_under_test"):
        discover(tmp_path)


def test_the_default_suite_declares_matmul_and_softmax() -> None:
    specs = discover(REPO_ROOT)
    assert {(s.suite, s.name) for s in specs} >= {("matmul", "matmul_dense"), ("softmax", "softmax_rows")}
