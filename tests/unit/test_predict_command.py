"""`kernelwatch predict` without a database: shapes resolved against a benchmark's grid, measured points chosen by
hardware and variant, the roofs, and the table (a golden file)."""

from __future__ import annotations

from typing import Any

import pytest

from kernelwatch.errors import InvalidInput
from kernelwatch.hardware import calibration_from_manifest, host_hardware
from runners.suite import BenchmarkSpec, Case, analytic_cost, benchmark, variant_of
from service.pipeline.predictions import hardware_key, parse_shape, predict_reports, resolve_shapes, stored_calibration
from service.report.predict_text import predictions_to_text
from service.store.family_points import StoredPoint
from tests.golden import assert_golden


def _never_built(**params: Any) -> Case:
    raise AssertionError("a benchmark with a cost model is never instantiated to count")


def _rows_cost(rows: int, cols: int, fused: bool) -> tuple[float, float]:
    return 5.0 * rows * cols, 8.0 * rows * cols


ROWS = BenchmarkSpec(suite="toy", name="rows", grid=({"rows": 256, "cols": 4096, "fused": True},
                                                     {"rows": 1024, "cols": 4096, "fused": False}),
                     factory=_never_built, cost=_rows_cost)
OTHER = BenchmarkSpec(suite="toy", name="decode", grid=({"batch": 8},), factory=_never_built,
                      cost=lambda batch: (1.0 * batch, 1.0 * batch))


def point(rows: int, seconds: float, fused: bool = True, backend: str = "cpu", kind: str = "cpu") -> StoredPoint:
    calibration = {"flops_per_s": 50e9, "bytes_per_s": 10e9, "dtype": "float32"} if backend == "cpu" else None
    return StoredPoint(params={"rows": rows, "cols": 4096, "fused": fused}, seconds=seconds, runs=3, backend=backend,
                       device_kind=kind, calibration=calibration)


def loader(points: list[StoredPoint]) -> Any:
    def load(suite: str, name: str) -> list[StoredPoint]:
        return points if (suite, name) == ("toy", "rows") else []
    return load


def test_a_benchmark_with_a_cost_model_is_counted_without_building_its_case() -> None:
    assert analytic_cost(ROWS, {"rows": 2, "cols": 3, "fused": True}) == (30.0, 48.0)
    built = BenchmarkSpec(suite="t", name="b", grid=({},), factory=lambda: Case(fn=abs, args=(), flops=2.0,
                                                                                bytes_accessed=4.0))
    assert analytic_cost(built, {}) == (2.0, 4.0)
    uncounted = BenchmarkSpec(suite="t", name="b", grid=({},), factory=lambda: Case(fn=abs, args=()))
    assert analytic_cost(uncounted, {}) is None


def test_shapes_take_the_grid_types_and_fill_what_was_not_given() -> None:
    resolved = resolve_shapes(ROWS.grid, parse_shape("rows=512"), parse_shape("rows=8192,fused=false"), "toy/rows")
    assert resolved.source == {"rows": 512, "cols": 4096, "fused": False}  # the other shape's value
    assert resolved.target == {"rows": 8192, "cols": 4096, "fused": False}
    assert resolved.assumed == {"cols": 4096}
    with pytest.raises(InvalidInput, match="rows='many' is not a int"):
        resolve_shapes(ROWS.grid, {"rows": "many"}, {}, "toy/rows")
    with pytest.raises(InvalidInput, match="must be positive"):
        resolve_shapes(ROWS.grid, {"rows": "0"}, {}, "toy/rows")
    for text in ("", "rows", "rows=", "=4"):
        with pytest.raises(InvalidInput):
            parse_shape(text)
    with pytest.raises(InvalidInput, match="gives rows twice"):  # once the last silently won
        parse_shape("rows=256,rows=512")
    with pytest.raises(InvalidInput) as long_value:  # a 5,000-digit value is not echoed whole
        resolve_shapes(ROWS.grid, {"rows": "x" * 5000}, {}, "toy/rows")
    assert len(str(long_value.value)) < 300


def test_unknown_kernels_parameters_and_hardware_are_invalid_input() -> None:
    specs = [ROWS, OTHER]
    with pytest.raises(InvalidInput, match="unknown kernel 'nope'.*toy"):
        predict_reports(specs, "nope", "rows=1", "rows=2", loader([]), None)
    with pytest.raises(InvalidInput, match="unknown parameter.*sek"):
        predict_reports(specs, "toy", "sek=1", "rows=2", loader([]), None)
    with pytest.raises(InvalidInput, match="takes all of"):
        predict_reports(specs, "toy", "rows=1,batch=2", "rows=2", loader([]), None)
    with pytest.raises(InvalidInput, match="unknown hardware 'tpu-v9'"):
        predict_reports(specs, "toy", "rows=1", "rows=2", loader([]), "tpu-v9")
    with pytest.raises(InvalidInput, match="no stored measurements"):
        predict_reports(specs, "toy/rows", "rows=1", "rows=2", loader([]), None)


def test_a_suites_benchmark_never_measured_is_named_and_the_measured_one_predicted() -> None:
    """`--kernel toy` where toy/rows was measured and toy/cols, which takes the same parameters, never was: the
    measured one is predicted and the other named (the whole suite was refused for it)."""
    cols = BenchmarkSpec(suite="toy", name="cols", grid=({"rows": 256, "cols": 4096, "fused": True},),
                         factory=_never_built, cost=_rows_cost)
    [report] = predict_reports([ROWS, cols], "toy", "rows=256", "rows=512", loader([point(256, 1e-3)]), None)
    assert report.benchmark == "toy/rows"
    assert any("toy/cols takes these parameters too and has no stored measurements" in n for n in report.notes)
    with pytest.raises(InvalidInput, match="no stored measurements"):  # none measured: still refused
        predict_reports([ROWS, cols], "toy", "rows=256", "rows=512", loader([]), None)


def test_only_the_target_variant_on_the_chosen_hardware_is_interpolated() -> None:
    points = [point(256, 1e-3), point(1024, 4e-3), point(256, 9.0, fused=False),
              point(256, 5.0, backend="tpu", kind="TPU v5 lite")]
    [report] = predict_reports([ROWS, OTHER], "toy", "rows=256", "rows=512", loader(points), None)
    assert report.benchmark == "toy/rows" and report.hardware == "CPU host (stored calibration)"
    assert report.measured_shapes == 2
    assert report.prediction.source.predicted_s == pytest.approx(1e-3)
    assert report.prediction.target.predicted_s == pytest.approx(2e-3)  # same efficiency at both ends
    assert any("cpu, tpu-v5e" in n and "--hardware" in n for n in report.notes)


def test_a_numeric_parameter_a_benchmark_names_as_a_variant_parts_the_family() -> None:
    """Top-k's k costs time its counts cannot show (a memory-bound selection reads the same bytes at any k): a
    benchmark naming it in ``variants`` has each k interpolated on its own, as a dtype or a flag is."""
    def topk_cost(vocab: int, k: int) -> tuple[float, float]:
        return 4.0 * vocab, 4.0 * vocab

    grid = ({"vocab": 4096, "k": 8}, {"vocab": 4096, "k": 64})
    plain = BenchmarkSpec(suite="toy", name="rows", grid=grid, factory=_never_built, cost=topk_cost)
    parted = BenchmarkSpec(suite="toy", name="rows", grid=grid, factory=_never_built, cost=topk_cost, variants=("k",))
    assert variant_of(parted, {"vocab": 4096, "k": 8, "fused": True}) == {"k": 8, "fused": True}
    assert variant_of(plain, {"vocab": 4096, "k": 8}) == {}
    calibration = {"flops_per_s": 50e9, "bytes_per_s": 10e9, "dtype": "float32"}
    points = [StoredPoint({"vocab": vocab, "k": k}, seconds, 3, "cpu", "cpu", calibration)
              for vocab, k, seconds in ((4096, 8, 1e-4), (16384, 8, 4e-4), (4096, 64, 3e-4), (16384, 64, 1.2e-3))]
    [mixed] = predict_reports([plain], "toy", "vocab=4096,k=64", "vocab=8192,k=64", loader(points), None)
    [own] = predict_reports([parted], "toy", "vocab=4096,k=64", "vocab=8192,k=64", loader(points), None)
    assert own.measured_shapes == 2 and mixed.measured_shapes == 4
    assert own.prediction.target.predicted_s == pytest.approx(6e-4)  # k=64's own efficiency, held across sizes
    assert mixed.prediction.target.predicted_s != pytest.approx(6e-4)
    assert any("differ in a variant parameter" in n for n in predict_reports(
        [parted], "toy", "vocab=4096,k=8", "vocab=4096,k=64", loader(points), None)[0].notes)
    with pytest.raises(ValueError, match="variant parameter 'kk' is not in its grid"):
        benchmark(suite="toy", params=grid, variants=("kk",))(_never_built)


def test_a_chip_without_measurements_is_answered_from_its_roofline_and_says_so() -> None:
    [report] = predict_reports([ROWS], "toy/rows", "rows=256", "rows=512", loader([point(256, 1e-3)]), "h100")
    assert report.hardware == "NVIDIA H100 SXM (published figures)" and report.measured_shapes == 0
    assert report.prediction.target.efficiency.basis == "default"
    assert any("roofline only, at an assumed 50%" in n for n in report.notes)


def test_a_stored_calibration_makes_the_host_roofs_and_a_broken_one_is_ignored() -> None:
    stored = StoredPoint({}, 1.0, 1, "cpu", "cpu", {"flops_per_s": 1e9, "bytes_per_s": 2e9, "dtype": "float32"})
    found = stored_calibration(stored)
    assert found is not None and (found.flops_per_s, found.bytes_per_s, found.dtype) == (1e9, 2e9, "float32")
    assert stored_calibration(StoredPoint({}, 1.0, 1, "cpu", "cpu", {"x": 1})) is None
    assert stored_calibration(StoredPoint({}, 1.0, 1, "cpu", "cpu", None)) is None
    assert hardware_key("tpu", "TPU v5 lite") == "tpu-v5e" and hardware_key("cpu", "cpu") == "cpu"
    assert hardware_key("gpu", "NVIDIA A100") == "gpu:NVIDIA A100"


def test_the_table_across_the_ridge() -> None:
    # Calibrated host: 50 GFLOP/s, 10 GB/s, ridge 5 FLOP/B; the toy kernel's intensity is 0.625 at every shape,
    # so the crossing is shown with a matmul-like variant built from the same spec.
    def matmul_cost(rows: int, cols: int, fused: bool) -> tuple[float, float]:
        return 2.0 * rows * cols * 512, 4.0 * (rows * 512 + 512 * cols + rows * cols)

    spec = BenchmarkSpec(suite="toy", name="rows", grid=ROWS.grid, factory=_never_built, cost=matmul_cost)
    points = [point(1, 1.2e-3), point(4096, 0.5)]
    reports = predict_reports([spec], "toy", "rows=1", "rows=2048", loader(points), None)
    assert reports[0].prediction.crossing == "memory-bound → compute-bound"
    assert_golden("predict_across_ridge.txt", predictions_to_text(reports))



def test_a_shape_alone_past_a_cliff_takes_the_step_the_host_s_other_benchmarks_take() -> None:
    """On a calibrated CPU host (caches known), rows=4096 of the toy kernel has a 64 MiB output (fresh pages on
    every call: service/model/predict.py, FRESH_PAGES_BYTES) and nothing of its own measured there; another
    benchmark of its suite measured on both sides of that cliff falls to a quarter of its efficiency across it, so
    the prediction steps the toy kernel's last efficiency before the cliff (50 %) down by the same factor. A
    benchmark of another suite that steps by 0.9 there is the host's step, taken only where the suite has none."""
    mib = 2 ** 20
    calibration = {"flops_per_s": 50e9, "bytes_per_s": 10e9, "dtype": "float32",
                   "caches": [{"name": "L2", "size_bytes": 2 * mib}, {"name": "L3", "size_bytes": 480 * mib}]}
    norm = BenchmarkSpec(suite="toy", name="norm", grid=ROWS.grid, factory=_never_built, cost=_rows_cost)
    other = BenchmarkSpec(suite="elsewhere", name="other", grid=ROWS.grid, factory=_never_built, cost=_rows_cost)

    def at(rows: int, efficiency: float) -> StoredPoint:
        roofline_s = 8.0 * rows * 4096 / 10e9  # memory-bound at every shape: 0.625 FLOP/B against a ridge of 5
        return StoredPoint(params={"rows": rows, "cols": 4096, "fused": True}, seconds=roofline_s / efficiency,
                           runs=3, backend="cpu", device_kind="cpu", calibration=calibration)

    stored = {("toy", "rows"): [at(256, 0.5), at(512, 0.5), at(1024, 0.5)],
              ("toy", "norm"): [at(256, 0.8), at(1024, 0.8), at(2048, 0.2), at(4096, 0.2)],
              ("elsewhere", "other"): [at(1024, 0.5), at(2048, 0.45)]}

    reads: list[str] = []

    def load(suite: str, name: str) -> list[StoredPoint]:
        reads.append(name)
        return stored.get((suite, name), [])

    [report] = predict_reports([ROWS, norm, other], "toy/rows", "rows=1024", "rows=4096", load, None)
    target = report.prediction.target.efficiency
    assert target.basis == "across a cliff" and target.value == pytest.approx(0.5 * 0.25)
    assert sorted(reads) == ["norm", "other", "rows"]  # the predicted benchmark's points read once, steps included
    assert report.prediction.source.efficiency.value == pytest.approx(0.5)
    # With no other benchmark of its suite measured across the cliff, the host's step.
    stored["toy", "norm"] = []
    [host] = predict_reports([ROWS, norm, other], "toy/rows", "rows=1024", "rows=4096", load, None)
    assert host.prediction.target.efficiency.value == pytest.approx(0.5 * 0.9)
    # Without a benchmark measured across the cliff, the nearest end holds, as before.
    stored["elsewhere", "other"] = []
    [alone] = predict_reports([ROWS, norm, other], "toy/rows", "rows=1024", "rows=4096", load, None)
    assert alone.prediction.target.efficiency.basis == "nearest"
    assert alone.prediction.target.efficiency.value == pytest.approx(0.5)
    # ... and says so: a cliff between would make it slower (it was silent).
    assert any("--to shape's working set is at L3, fresh pages" in n and "nearest measured level's" in n
               for n in alone.notes), alone.notes
    assert not any("working set is at" in n for n in report.notes + host.notes)  # stepped: nothing to say


def test_the_roofline_time_is_the_bound_a_result_of_the_shape_is_held_to() -> None:
    """On a host with a measured hierarchy, a shape's roofline time is its cache level's, as its result page says
    (the same softmax shape read 381 µs in `predict` and 122 µs on its result page, 2026-12-07: predict printed the
    model's one DRAM roof, which it scales shapes on); the fraction of it is the predicted time's."""
    mib = 2 ** 20
    calibration = {"flops_per_s": 50e9, "bytes_per_s": 10e9, "dtype": "float32",
                   "caches": [{"name": "L2", "size_bytes": 2 * mib}, {"name": "L3", "size_bytes": 32 * mib}],
                   "bandwidth": [{"working_set_bytes": 1 * mib, "bytes_per_s": 80e9},
                                 {"working_set_bytes": 16 * mib, "bytes_per_s": 40e9},
                                 {"working_set_bytes": 256 * mib, "bytes_per_s": 10e9}]}
    points = [StoredPoint(params={"rows": rows, "cols": 4096, "fused": True}, seconds=seconds, runs=3,
                          backend="cpu", device_kind="cpu", calibration=calibration)
              for rows, seconds in ((64, 1e-4), (256, 4e-4), (4096, 2e-2))]
    [report] = predict_reports([ROWS], "toy", "rows=256", "rows=4096", loader(points), None)
    text = predictions_to_text([report])
    bytes_256 = 8.0 * 256 * 4096  # 8 MiB: in L3, where the measured curve gives 40 GB/s or more
    assert report.bounds is not None and report.bounds[0].level == "L3" and report.bounds[1].level == "DRAM"
    hardware = host_hardware(calibration_from_manifest(calibration))  # type: ignore[arg-type]
    assert report.bounds[0].roofline_s == pytest.approx(bytes_256 / hardware.memory_roof(bytes_256))
    assert report.bounds[0].roofline_s < bytes_256 / 10e9  # not the one DRAM roof the model scales on
    fraction = report.bounds[0].roofline_s / report.prediction.source.predicted_s
    assert f"{fraction:.1%} (measured)" in text and "(L3)" in text and "(DRAM)" in text
    assert "memory by level (each shape's below), DRAM 10 GB/s; ridge against DRAM 5 FLOP/B" in text
