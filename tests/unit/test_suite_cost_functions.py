"""Every benchmark of the default suite declares an analytic cost function, it counts exactly what its Case carries,
and `kernelwatch predict` answers from it for the families whose Cases it could not build at large shapes.

Single-device Cases are built at every grid and quick point (a few seconds on CPU). The collectives' Cases need 8
devices, which this process does not have (JAX fixes its device count at start; tests/integration/
test_collectives.py runs them for real), so their cost functions are checked against the counts worked out here
from the NCCL-tests conventions in kernels_under_test/collectives.py, independently of its code.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Iterator
from typing import Any

import pytest

from runners.suite import BenchmarkSpec, Params, analytic_cost, discover, load_suite_package
from service.pipeline.predictions import predict_reports
from service.report.predict_text import predictions_to_text
from service.store.family_points import StoredPoint
from tests.conftest import REPO_ROOT

SPECS: list[BenchmarkSpec] = discover(REPO_ROOT)
BY_KEY = {f"{s.suite}/{s.name}": s for s in SPECS}
SINGLE_DEVICE = sorted(key for key, s in BY_KEY.items() if s.devices == 1)


def points(spec: BenchmarkSpec) -> Iterator[Params]:
    """Every grid point, then any quick point not in the grid (none today: the decorator refuses them)."""
    yield from spec.grid
    yield from (p for p in spec.quick or () if p not in spec.grid)


def test_every_module_of_the_suite_declares_benchmarks_and_every_benchmark_a_cost_function() -> None:
    package = load_suite_package(REPO_ROOT)
    modules = {i.name for i in pkgutil.iter_modules(package.__path__) if not i.name.startswith("_")}
    assert modules >= {"matmul", "norms", "softmax", "long_softmax", "attention", "quantized", "sampling",
                       "collectives"}
    declaring = {spec.factory.__module__.rsplit(".", 1)[-1] for spec in SPECS}
    assert declaring == modules, f"modules declaring no benchmark: {sorted(modules - declaring)}"
    uncounted = sorted(key for key, spec in BY_KEY.items() if spec.cost is None)
    assert not uncounted, f"benchmarks without cost=: {uncounted}"


@pytest.mark.parametrize("key", SINGLE_DEVICE)
def test_the_cost_function_counts_what_the_case_carries_at_every_point(key: str) -> None:
    spec = BY_KEY[key]
    for params in points(spec):
        case = spec.factory(**params)
        assert case.flops is not None and case.bytes_accessed is not None, (key, params)
        counted = analytic_cost(spec, params)
        assert counted == (case.flops, case.bytes_accessed), (key, params)
        assert spec.cost is not None
        assert all(type(v) is float for v in spec.cost(**params)), (key, params, "plain floats, not numpy scalars")


# --- collectives, by independent arithmetic --------------------------------------------------------------------

N = 8  # devices
FLOAT32 = 4


def expected_collective_counts(name: str, size_kib: int) -> tuple[float, float]:
    """(FLOPs, bytes accessed, summed over the N devices) with ``buf`` the per-device buffer of size_kib KiB."""
    buf = size_kib * 1024
    elements = buf // FLOAT32
    if name == "all_reduce":  # n-1 adds per element; each device reads its buffer and writes the sum
        return (N - 1) * elements, 2 * N * buf
    if name == "all_gather":  # no arithmetic; the n shards (one buffer in all) read, the whole written n times
        return 0.0, (N + 1) * buf
    if name == "reduce_scatter":  # n-1 adds per element; n buffers read, one chunk (buf / n) written per device
        return (N - 1) * elements, N * buf + buf
    if name == "ring_all_reduce_ppermute":  # per device 2(n-1) chunk sends+receives, n-1 adds of 3 chunk accesses
        return (N - 1) * elements, N * (4 * (N - 1) + 3 * (N - 1)) * buf / N
    raise AssertionError(name)


COLLECTIVES = sorted(key for key, s in BY_KEY.items() if s.suite == "collectives")


def test_the_collectives_are_all_here_and_need_their_devices() -> None:
    assert COLLECTIVES == ["collectives/all_gather", "collectives/all_reduce", "collectives/reduce_scatter",
                           "collectives/ring_all_reduce_ppermute"]
    assert all(BY_KEY[k].devices == N for k in COLLECTIVES)


@pytest.mark.parametrize("key", COLLECTIVES)
def test_a_collective_cost_function_counts_without_devices(key: str) -> None:
    spec = BY_KEY[key]
    assert spec.cost is not None
    for params in points(spec):
        flops, nbytes = spec.cost(**params)
        want_flops, want_bytes = expected_collective_counts(spec.name, int(params["size_kib"]))
        assert flops == pytest.approx(want_flops, rel=1e-12, abs=0.0), (key, params)
        assert nbytes == pytest.approx(want_bytes, rel=1e-12), (key, params)
        assert all(type(v) is float for v in (flops, nbytes)), (key, params)
    # Far beyond the grid, still without a device: what `kernelwatch predict` asks for.
    assert spec.cost(size_kib=1 << 20) == pytest.approx(expected_collective_counts(spec.name, 1 << 20), rel=1e-12)


def test_all_gather_alone_of_the_suite_counts_no_flops() -> None:
    without_flops = set()
    for key, spec in BY_KEY.items():
        counted = analytic_cost(spec, spec.grid[0])
        assert counted is not None and counted[1] > 0, key
        if counted[0] == 0.0:
            without_flops.add(key)
    assert without_flops == {"collectives/all_gather"}


# --- the predict path ------------------------------------------------------------------------------------------


def no_measurements(suite: str, name: str) -> list[StoredPoint]:
    return []


@pytest.mark.parametrize(("kernel", "source", "target", "benchmarks"), [
    ("quantized", "m=16", "m=4096", ["quantized/int8_weight_only", "quantized/fp8_per_tensor"]),
    ("sampling", "vocab=32768", "vocab=1048576",
     ["sampling/topk_exact", "sampling/topk_approx", "sampling/topp_sampling"]),
    ("collectives/all_reduce", "size_kib=64", "size_kib=8192", ["collectives/all_reduce"]),
])
def test_predict_answers_for_the_family_on_a_chip_without_measurements(kernel: str, source: str, target: str,
                                                                        benchmarks: list[str]) -> None:
    reports = predict_reports(SPECS, kernel, source, target, no_measurements, "h200")
    assert [r.benchmark for r in reports] == benchmarks
    text = predictions_to_text(reports)
    for report in reports:
        prediction = report.prediction
        assert prediction.target.predicted_s > prediction.source.predicted_s > 0, report.benchmark
        assert dict(prediction.source.shape.params).items() >= _parsed(source).items()
        assert dict(prediction.target.shape.params).items() >= _parsed(target).items()
    for line in ("NVIDIA H200 SXM (published figures)", "predicted time", source, target):
        assert line in text
    assert text.count("predicted time") == len(benchmarks)


def test_predict_answers_for_every_collective_all_gather_included() -> None:
    reports = predict_reports(SPECS, "collectives", "size_kib=64", "size_kib=8192", no_measurements, "h200")
    assert [r.benchmark for r in reports] == [f"collectives/{n}" for n in ("all_reduce", "all_gather",
                                                                           "reduce_scatter",
                                                                           "ring_all_reduce_ppermute")]
    gather = next(r for r in reports if r.benchmark == "collectives/all_gather").prediction
    assert (gather.source.shape.flops, gather.source.bound, gather.target.bound) == (0.0, "memory", "memory")
    assert "0 FLOP/B" in predictions_to_text(reports)


def _parsed(text: str) -> dict[str, Any]:
    name, _, value = text.partition("=")
    return {name: int(value)}
