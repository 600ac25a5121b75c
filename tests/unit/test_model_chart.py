"""The /model figure: the roof bends at the ridge, the ridge is marked, each benchmark is a point."""

from __future__ import annotations

import dataclasses
import math

import pytest

from service.store.model_points import ModelPoint
from web.charts.drilldown import RooflinePeaks
from web.charts.model import ABOVE_ROOF_KEY, NO_PEAKS_NOTE, MemoryRoof, model_figure, suite_peaks


def point(label: str, intensity: float, achieved: float, peaks: tuple[float, float] | None = (100e9, 10e9),
          bound: str = "memory") -> ModelPoint:
    # The parameters as service/store/model_points.py formats them into the label ("suite/name [k=v,k=v]").
    inside = label.split(" [", 1)[1].rstrip("]") if " [" in label else ""
    params = dict(part.split("=", 1) for part in inside.split(",") if "=" in part)
    return ModelPoint(result_id=1, label=label, intensity=intensity, achieved_flops_per_s=achieved, bound=bound,
                      fraction=0.5, peak_flops_per_s=peaks[0] if peaks else None,
                      peak_bytes_per_s=peaks[1] if peaks else None, peak_source="host" if peaks else None,
                      params=params)


def test_the_roof_rises_to_the_ridge_then_stays_flat_and_every_benchmark_is_a_point() -> None:
    points = [point("a", 1.0, 5e9), point("b", 100.0, 50e9, bound="compute")]
    peaks = suite_peaks(points)
    assert peaks == RooflinePeaks(100e9, 10e9) and peaks.ridge == pytest.approx(10.0)
    fig = model_figure(points, peaks, "cpu")
    roof, *keys, dots = fig["data"]
    assert [k["name"] for k in keys] == ["compute-bound", "memory-bound"]  # what a red and a blue point are
    assert dots["showlegend"] is False and [m for m in dots["marker"]["color"]] == ["#4c78a8", "#d62728"]
    assert list(roof["x"]) == pytest.approx([1 / 3, 10.0, 300.0])  # memory slope, the ridge, the flat peak
    assert list(roof["y"]) == pytest.approx([10e9 / 3, 100e9, 100e9])
    assert list(dots["x"]) == [1.0, 100.0] and list(dots["text"]) == ["a", "b"]
    assert dots["mode"] == "markers+text"  # labelled on the chart, not only in the hover
    [ridge] = fig["layout"]["shapes"]
    assert ridge["x0"] == ridge["x1"] == pytest.approx(10.0)
    [label] = fig["layout"]["annotations"]
    # At the ridge: on a log axis an annotation's x is log10 of the value (a shape's is the value itself).
    assert label["text"] == "ridge 10 FLOP/B" and label["x"] == pytest.approx(math.log10(10.0))
    assert fig["layout"]["xaxis"]["type"] == fig["layout"]["yaxis"]["type"] == "log"


def test_the_commonest_roof_is_drawn_when_dtypes_differ() -> None:
    points = [point("a", 1.0, 5e9), point("b", 2.0, 5e9), point("c", 3.0, 5e9, peaks=(400e9, 10e9))]
    assert suite_peaks(points) == RooflinePeaks(100e9, 10e9)


def test_without_peak_figures_only_the_points_and_a_note() -> None:
    points = [point("a", 1.0, 5e9, peaks=None)]
    assert suite_peaks(points) is None
    fig = model_figure(points, None, "tpu · x")
    assert [t["name"] for t in fig["data"]] == ["memory-bound", "benchmarks"]
    assert NO_PEAKS_NOTE in fig["layout"]["title"]["text"] and not fig["layout"].get("shapes")


def test_the_axes_span_the_points_and_every_level_has_a_roof_across_them() -> None:
    """A ridge far from the data (a huge compute peak over a slow memory) no longer stretches the x-axis to it:
    the axes are the points' range, half a decade either side, and each roof is drawn across exactly that."""
    points = [point("softmax/rows [rows=256]", 0.5, 5e9), point("norms/rmsnorm", 2.0, 30e9)]
    roofs = [MemoryRoof("L1", 300e9, "96 KiB"), MemoryRoof("L2", 200e9, "2 MiB"), MemoryRoof("DRAM", 20e9)]
    fig = model_figure(points, RooflinePeaks(1e15, 20e9), "cpu", roofs)
    lines = [t for t in fig["data"] if t["mode"] == "lines"]
    assert [t["name"] for t in lines] == ["L1 roof (300 GB/s, 96 KiB)", "L2 roof (200 GB/s, 2 MiB)",
                                          "DRAM roof (20 GB/s)"]
    x_range = fig["layout"]["xaxis"]["range"]
    assert x_range == pytest.approx([math.log10(0.5 / 3), math.log10(6.0)])
    for line in lines:  # straight across the span: the ridges (5e4 FLOP/B and up) are far off to the right
        assert list(line["x"]) == pytest.approx([0.5 / 3, 6.0])
    assert not fig["layout"].get("shapes")  # the ridge is off the chart, so not drawn at its edge
    y_low, y_high = fig["layout"]["yaxis"]["range"]
    assert 10 ** y_low <= 5e9 and 10 ** y_high >= 300e9 * 6.0  # the points and the highest roof in view
    dots = fig["data"][-1]
    assert list(dots["text"]) == ["softmax/rows", "norms/rmsnorm"]  # suite/name on the chart, params in the hover
    assert dots["customdata"][0][0] == "softmax/rows [rows=256]"


def test_shapes_of_one_benchmark_are_told_apart_and_not_printed_over_one_another() -> None:
    """Two shapes of softmax at one intensity stand one above the other: both named by the parameter that differs,
    the lower labelled below it; and a y-axis spanning three decades is ticked by decade (plotly's own choice
    labelled 60G, 70G, 80G, 90G and 100G on top of one another)."""
    points = [point("softmax/rows [cols=4096,rows=256]", 0.6, 2.2e9),
              point("softmax/rows [cols=4096,rows=1024]", 0.6, 2.5e9), point("norms/rmsnorm [hidden=8]", 2.0, 3e9)]
    fig = model_figure(points, RooflinePeaks(300e9, 100e9), "cpu")
    dots = fig["data"][-1]
    assert list(dots["text"]) == ["softmax/rows rows=256", "softmax/rows rows=1024", "norms/rmsnorm"]
    assert list(dots["textposition"]) == ["bottom center", "top center", "top center"]
    assert fig["layout"]["yaxis"]["dtick"] == 1  # every decade: 2.2e9 / 3 .. 300e9 x 2 is three of them
    narrow = model_figure([point("a", 1.0, 5e9), point("b", 1.5, 6e9)], None, "cpu")
    assert narrow["layout"]["yaxis"]["dtick"] == "D2"  # under two decades: 1, 2 and 5 of each


def test_a_point_above_its_roof_is_a_cross_and_the_legend_says_what_a_cross_is() -> None:
    above = dataclasses.replace(point("softmax/rows [rows=256]", 0.5, 90e9), above=True, fraction=None)
    fig = model_figure([above, point("norms/rmsnorm", 2.0, 3e9)], RooflinePeaks(100e9, 10e9), "cpu")
    *_, dots = fig["data"]
    assert list(dots["marker"]["symbol"]) == ["x", "circle"]
    assert [t["name"] for t in fig["data"] if t["mode"] == "markers"] == ["memory-bound", ABOVE_ROOF_KEY]
    assert dots["customdata"][0][2] == "above the roof: none"  # its hover gives no fraction either


def test_a_point_within_the_roofs_noise_hovers_on_its_roof_not_over_100_percent() -> None:
    """The hover words a fraction as every face does (roof_fraction_text): 104 % is the roof's noise, read as on it."""
    near = dataclasses.replace(point("softmax/rows [rows=256]", 0.5, 90e9), fraction=1.04)
    below = dataclasses.replace(point("norms/rmsnorm", 2.0, 3e9), fraction=0.531)
    *_, dots = model_figure([near, below], RooflinePeaks(100e9, 10e9), "cpu")["data"]
    assert [row[2] for row in dots["customdata"]] == ["on its roof", "53.1 % of its roof"]
    assert "of its roof" not in dots["hovertemplate"]  # the line is the point's own, not a suffix


def test_on_a_measured_hierarchy_each_point_shows_its_own_roof_between_the_level_lines() -> None:
    """A point is held to the bandwidth at its own working set, not to a level's line: a dash at that roof above
    it, so where its ceiling lies is on the chart, not in its hover alone. Not drawn for a point above its roof
    (no roof bounds it), nor with one roof (the line is its roof)."""
    own = dataclasses.replace(point("norms/rmsnorm", 2.0, 30e9, peaks=(1e15, 150e9)))
    above = dataclasses.replace(point("softmax/rows", 0.5, 90e9, peaks=(1e15, 100e9)), above=True, fraction=None)
    roofs = [MemoryRoof("L1", 300e9, "96 KiB"), MemoryRoof("L2", 200e9, "2 MiB"), MemoryRoof("DRAM", 20e9)]
    fig = model_figure([own, above], RooflinePeaks(1e15, 20e9), "cpu", roofs)
    [marks] = [t for t in fig["data"] if t["name"] == "each point's own roof"]
    assert list(marks["x"]) == [2.0] and list(marks["y"]) == pytest.approx([300e9])  # 150 GB/s x 2 FLOP/B
    assert "300 GFLOP/s" in marks["customdata"][0][1] and fig["data"][-1]["name"] == "benchmarks"
    single = model_figure([own], RooflinePeaks(1e15, 20e9), "cpu")
    assert not [t for t in single["data"] if t["name"] == "each point's own roof"]
