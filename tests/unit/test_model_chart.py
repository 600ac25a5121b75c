"""The /model figure: the roof bends at the ridge, the ridge is marked, each benchmark is a point."""

from __future__ import annotations

import pytest

from service.store.model_points import ModelPoint
from web.charts.drilldown import RooflinePeaks
from web.charts.model import NO_PEAKS_NOTE, model_figure, suite_peaks


def point(label: str, intensity: float, achieved: float, peaks: tuple[float, float] | None = (100e9, 10e9),
          bound: str = "memory") -> ModelPoint:
    return ModelPoint(result_id=1, label=label, intensity=intensity, achieved_flops_per_s=achieved, bound=bound,
                      fraction=0.5, peak_flops_per_s=peaks[0] if peaks else None,
                      peak_bytes_per_s=peaks[1] if peaks else None, peak_source="host" if peaks else None)


def test_the_roof_rises_to_the_ridge_then_stays_flat_and_every_benchmark_is_a_point() -> None:
    points = [point("a", 1.0, 5e9), point("b", 100.0, 50e9, bound="compute")]
    peaks = suite_peaks(points)
    assert peaks == RooflinePeaks(100e9, 10e9) and peaks.ridge == pytest.approx(10.0)
    fig = model_figure(points, peaks, "cpu · cpu")
    roof, dots = fig["data"]
    assert list(roof["x"]) == pytest.approx([0.1, 10.0, 1000.0])  # memory slope, the ridge, the flat peak
    assert list(roof["y"]) == pytest.approx([1e9, 100e9, 100e9])
    assert list(dots["x"]) == [1.0, 100.0] and list(dots["text"]) == ["a", "b"]
    [ridge] = fig["layout"]["shapes"]
    assert ridge["x0"] == ridge["x1"] == pytest.approx(10.0)
    assert fig["layout"]["annotations"][0]["text"] == "ridge 10 FLOP/B"
    assert fig["layout"]["xaxis"]["type"] == fig["layout"]["yaxis"]["type"] == "log"


def test_the_commonest_roof_is_drawn_when_dtypes_differ() -> None:
    points = [point("a", 1.0, 5e9), point("b", 2.0, 5e9), point("c", 3.0, 5e9, peaks=(400e9, 10e9))]
    assert suite_peaks(points) == RooflinePeaks(100e9, 10e9)


def test_without_peak_figures_only_the_points_and_a_note() -> None:
    points = [point("a", 1.0, 5e9, peaks=None)]
    assert suite_peaks(points) is None
    fig = model_figure(points, None, "tpu · x")
    assert [t["name"] for t in fig["data"]] == ["benchmarks"]
    assert NO_PEAKS_NOTE in fig["layout"]["title"]["text"] and not fig["layout"].get("shapes")
