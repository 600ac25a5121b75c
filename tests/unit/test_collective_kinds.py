"""Which collective a benchmark's name names, the bus-factor formula shown beside it, and the size S read from its
params."""

from __future__ import annotations

import pytest

from service.model.collective_kinds import bus_factor_formula, collective_kind, collective_size_bytes
from service.model.roofline import bus_factor


@pytest.mark.parametrize(("name", "kind"), [
    # the suite's four (kernels_under_test/collectives.py)
    ("all_reduce", "all-reduce"),
    ("ring_all_reduce_ppermute", "all-reduce"),
    ("all_gather", "all-gather"),
    ("reduce_scatter", "reduce-scatter"),
    # spellings others use
    ("AllReduce_bf16", "all-reduce"),  # case does not matter
    ("allreduce", "all-reduce"),
    ("all-gather-fp8", "all-gather"),
    ("psum", "all-reduce"),
    ("psum_scatter", "reduce-scatter"),  # the longest match wins over "psum"
    ("all_to_all", "all-to-all"),
    ("alltoall", "all-to-all"),
])
def test_collective_kind_from_the_benchmark_name(name: str, kind: str | None) -> None:
    assert collective_kind(name) == kind


@pytest.mark.parametrize("name", ["rmsnorm", "matmul", "softmax_rows", "reduce_sum", "broadcast_multiply",
                                  "all_rows", "gather_rows", "scatter_add", "fused_reduce"])
def test_names_that_name_no_collective(name: str) -> None:
    assert collective_kind(name) is None


@pytest.mark.parametrize(("kind", "formula"), [("all-reduce", "2(n−1)/n"), ("all-gather", "(n−1)/n"),
                                               ("reduce-scatter", "(n−1)/n"), ("all-to-all", "(n−1)/n")])
def test_formula_matches_the_bus_factor(kind: str, formula: str) -> None:
    assert bus_factor_formula(kind) == formula  # type: ignore[arg-type]
    n = 8
    expected = 2 * (n - 1) / n if formula.startswith("2") else (n - 1) / n
    assert bus_factor(kind, n) == pytest.approx(expected)  # type: ignore[arg-type]


def test_size_from_params() -> None:
    assert collective_size_bytes({"size_kib": 1024}) == 1024 * 1024
    assert collective_size_bytes({"size_bytes": 4096, "size_kib": 1}) == 4096  # the exact figure first
    assert collective_size_bytes({"size_mib": 2}) == 2 * 2**20
    assert collective_size_bytes({"rows": 256}) is None
    assert collective_size_bytes({"size_kib": 0}) is None and collective_size_bytes({"size_kib": True}) is None
    assert collective_size_bytes({"size_kib": "64"}) is None
