import pytest

from service.store.queries import FindingView, SeriesPointView, SeriesView
from web.charts.series import series_figure, time_scale


def view() -> SeriesView:
    pts = [SeriesPointView(sha=f"{i:040x}", subject=f"c{i}", position=i,
                           samples=[1e-3 * (1 + (i >= 3)), 1.1e-3 * (1 + (i >= 3))],
                           median=1.05e-3 * (1 + (i >= 3))) for i in range(6)]
    finding = FindingView(id=1, series_id=1, series_label="softmax/x", metric="wall_time", commit_sha=pts[3].sha,
                          commit_subject="c3",
                          previous_sha=pts[2].sha, direction="regression", magnitude=1.0, confidence=9.0,
                          value_before=1.05e-3, value_after=2.1e-3, unit="s", detector="median-steps",
                          detector_version=1)
    return SeriesView(id=1, label="softmax/x", repository="demo", metric="wall_time", unit="s",
                      direction="lower_is_better", environment="cpu", points=pts, findings=[finding])


def test_time_scale_picks_a_readable_unit() -> None:
    assert time_scale([2e-3]) == (1e-3, "ms")
    assert time_scale([5e-7]) == (1e-9, "ns")
    assert time_scale([3.0]) == (1.0, "s")


def test_figure_has_spread_medians_and_the_finding_marked() -> None:
    fig = series_figure(view())
    kinds = [t["type"] for t in fig["data"]]
    assert kinds == ["box", "scatter"]
    assert len(fig["data"][0]["y"]) == 12  # every sample of every commit
    assert list(fig["data"][1]["y"]) == pytest.approx([1.05, 1.05, 1.05, 2.1, 2.1, 2.1])  # medians in ms
    assert fig["layout"]["yaxis"]["title"]["text"] == "wall_time (ms)"
    marked = [s for s in fig["layout"]["shapes"] if s["type"] == "line"]
    assert len(marked) == 1 and marked[0]["x0"] == "3·00000000"
    assert "+100.0%" in fig["layout"]["annotations"][0]["text"]
