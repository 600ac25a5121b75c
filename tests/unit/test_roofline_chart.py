"""The result page's roof: published peaks for TPU/GPU results, none (said so) for a CPU."""

from __future__ import annotations

import pytest

from service.store.drilldown import StoredRoofline
from web.charts.drilldown import RooflinePeaks, roof_for, roofline_figure, roofline_point, stored_roof


def test_an_h200_result_gets_a_roof() -> None:
    roof = roof_for("gpu", "NVIDIA H200", "bfloat16")
    assert roof.peaks is not None
    assert roof.peaks.flops_per_s == pytest.approx(989.5e12) and roof.peaks.bytes_per_s == pytest.approx(4.8e12)
    assert "NVIDIA H200 SXM" in roof.note and "datasheet" in roof.note
    # A 4096³ bf16 matmul in 200 µs: 687 TFLOP/s at I ≈ 1365, where the roof is the 989.5 TFLOP/s peak.
    point = roofline_point(2 * 4096**3, 3 * 4096**2 * 2, 2e-4)
    assert point is not None
    fig = roofline_figure(point, roof.peaks, "gpu · NVIDIA H200")
    assert [t["name"] for t in fig["data"]] == ["roof", "this result"]
    assert "69% of the roof" in fig["layout"]["title"]["text"]
    assert max(fig["data"][0]["y"]) == pytest.approx(989.5e12)


def test_the_y_axis_spans_the_point_and_the_roof_labelled_by_decade_or_1_2_5() -> None:
    """Left to plotly, a result page's y-axis over 4-200 GFLOP/s labelled every digit of each decade (4G ... 10G, 20G
    ... 100G) one over another; it is set from the point and the roof, ticked as /model's is."""
    peaks = RooflinePeaks(167e9, 60.3e9)
    point = roofline_point(21e6, 33.6e6, 4.38e-3)  # the demo's softmax at 1024x4096: 4.8 GFLOP/s at 0.625 FLOP/B
    assert point is not None
    yaxis = roofline_figure(point, peaks, "cpu")["layout"]["yaxis"]
    low, high = (10 ** v for v in yaxis["range"])
    assert low < point.flops_per_s and high > peaks.flops_per_s
    assert yaxis["dtick"] in (1, "D2")
    xaxis = roofline_figure(point, peaks, "cpu")["layout"]["xaxis"]
    assert xaxis["dtick"] == 1  # 0.0625 .. 27.7 FLOP/B: by decade (plotly printed 7 8 9 0.1 2 3 ... over its span)


def test_a_cpu_result_has_no_roof_and_the_page_says_why() -> None:
    roof = roof_for("cpu", "cpu", "float32")
    assert roof.peaks is None
    assert "are not known" in roof.note and "calibration" in roof.note


def test_without_a_published_dtype_figure_the_bf16_peak_bounds_it() -> None:
    tpu = roof_for("tpu", "TPU v5 lite", "float32")
    assert tpu.peaks is not None and tpu.peaks.flops_per_s == 197e12
    assert "the bf16 peak stands in for fp32" in tpu.note
    undeclared = roof_for("gpu", "NVIDIA H200", None)  # float32, JAX's default: the TF32 tensor-core peak
    assert undeclared.peaks is not None and undeclared.peaks.flops_per_s == 494.5e12
    assert "records no dtype" in undeclared.note


def test_stored_figures_give_the_roof_and_say_what_ingest_found() -> None:
    stored = StoredRoofline(intensity=0.625, bound="memory", roofline_s=8.4e-4, achieved_fraction=0.84,
                            peak_flops_per_s=100e9, peak_bytes_per_s=10e9,
                            peak_source="host (calibrated), fp32 peak (calibrated on this host)")
    roof = stored_roof(stored)
    assert roof.peaks is not None and (roof.peaks.flops_per_s, roof.peaks.bytes_per_s) == (100e9, 10e9)
    assert roof.note == ("Roof: host (calibrated), fp32 peak (calibrated on this host): 100 GFLOP/s and 10 GB/s "
                         "memory bandwidth. Memory-bound; the roofline time is 840 µs, 84% of it achieved.")


def test_a_fraction_past_the_roof_is_named_never_shown() -> None:
    from service.model.result_roofline import ABOVE_ROOF_TOLERANCE, above_roof, roof_fraction_text
    from service.report.compare_table import fraction_text

    # Within the roof's noise: on the roof, never 109 % as fact (the result page, /model and the chart title showed
    # 109.4 % of a calibrated roof, 2026-12-07).
    assert fraction_text(0.84) == "84%" and fraction_text(1.0 + ABOVE_ROOF_TOLERANCE) == "on the roof"
    assert roof_fraction_text(1.094, decimals=1) == "on the roof" and roof_fraction_text(0.5, 1, sep=" ") == "50.0 %"
    assert roof_fraction_text(0.0042) == "0.42%" and roof_fraction_text(float("nan")) == "–"
    within = StoredRoofline(intensity=0.625, bound="memory", roofline_s=8.4e-4, achieved_fraction=1.094,
                            peak_flops_per_s=1e11, peak_bytes_per_s=1e10, peak_source="host (calibrated)")
    assert "on the roof, within its measurement noise" in stored_roof(within).note
    assert "109" not in stored_roof(within).note
    assert fraction_text(2.36) == "above roof" and above_roof(1.11) and not above_roof(1.09) and not above_roof(None)
    stored = StoredRoofline(intensity=0.625, bound="memory", roofline_s=8.4e-4, achieved_fraction=2.36,
                            peak_flops_per_s=1e11, peak_bytes_per_s=1e10, peak_source="host (calibrated)", above=True)
    note = stored_roof(stored).note
    assert "does not bound it" in note and "236" not in note


def test_the_hardware_label_names_the_kind_and_count_only_where_they_say_something() -> None:
    from kernelwatch.hardware import hardware_label

    assert hardware_label("cpu", "cpu", 1) == "cpu"  # not "cpu"
    assert hardware_label("cpu", "cpu", 8) == "cpu ×8"  # eight host devices (collectives)
    assert hardware_label("gpu", "NVIDIA H200", 1) == "gpu · NVIDIA H200"
    assert hardware_label("tpu", "TPU v5 lite", 4) == "tpu · TPU v5 lite ×4"
