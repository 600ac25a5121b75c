from dataclasses import replace
from datetime import UTC, datetime

import pytest

from service.store.queries import FindingView, SeriesPointView, SeriesView
from service.store.series_companions import (
    CompanionPoint,
    CompanionTrace,
    PointRun,
    SeriesCompanions,
    environment_differences,
    toolchain_text,
)
from web.charts.series import COMPANION_HEIGHT, MAIN_HEIGHT, series_figure, time_scale


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


def companions(**overrides: object) -> SeriesCompanions:
    pts = view().points
    runs = {p.sha: PointRun(run_id=f"run{p.position:029d}", started_at=datetime(2026, 2, 1, p.position, tzinfo=UTC),
                            ci_low=p.samples[0], ci_high=p.samples[-1]) for p in pts[1:]}
    static = [CompanionTrace("x86-64 instructions",
                             [CompanionPoint(p.sha, 100.0 + 10 * (p.position >= 3), 10 + p.position) for p in pts]
                             + [CompanionPoint("f" * 40, 1.0, 99)])]  # a commit the series lacks: not drawn
    error = [CompanionTrace("max abs error", [CompanionPoint(p.sha, 1e-7, 10 + p.position) for p in pts[:4]])]
    fields: dict[str, object] = {"toolchain": "jax 0.10.2", "runs": runs, "static": static, "error": error}
    fields.update(overrides)
    return SeriesCompanions(**fields)  # type: ignore[arg-type]


def test_hover_carries_the_median_interval_and_the_run() -> None:
    fig = series_figure(view(), companions())
    median = fig["data"][1]
    first, second = median["customdata"][0], median["customdata"][1]
    assert first[3] == "no 95% CI (n=2: too few samples)"  # no run or interval stored for it
    assert second[3] == "95% CI [1, 1.1] ms" and second[4] == f"run {'run' + '0' * 9} · 2026-02-01 01:00 UTC"
    assert "%{customdata[3]}" in median["hovertemplate"] and "%{customdata[4]}" in median["hovertemplate"]
    assert [c[2] for c in median["customdata"]] == [None] * 6  # the view built here lists no result ids


def test_companion_panels_share_the_commit_axis_and_carry_the_findings() -> None:
    fig = series_figure(view(), companions())
    names = [t["name"] for t in fig["data"]]
    assert names == ["samples", "median", "x86-64 instructions", "max abs error"]
    static, error = fig["data"][2], fig["data"][3]
    assert static["yaxis"] == "y2" and error["yaxis"] == "y3"
    assert len(static["x"]) == 6 and static["x"][3] == "3·00000000"  # the foreign commit is dropped
    assert [c[2] for c in static["customdata"]] == [10, 11, 12, 13, 14, 15]  # a click opens the holding result
    assert fig["layout"]["xaxis"]["matches"] == "x3" and fig["layout"]["yaxis3"]["type"] == "log"
    marked = [s for s in fig["layout"]["shapes"] if s["type"] == "line"]
    assert {s["xref"] for s in marked} == {"x", "x2", "x3"} and {s["x0"] for s in marked} == {"3·00000000"}
    assert fig["layout"]["height"] == MAIN_HEIGHT + 2 * COMPANION_HEIGHT


def test_a_panel_without_data_is_left_out() -> None:
    fig = series_figure(view(), companions(error=[]))
    assert [t["name"] for t in fig["data"]] == ["samples", "median", "x86-64 instructions"]
    assert "yaxis3" not in fig["layout"]
    bare = series_figure(view(), companions(static=[], error=[]))
    assert [t["type"] for t in bare["data"]] == ["box", "scatter"] and "yaxis2" not in bare["layout"]
    assert bare["layout"]["height"] == MAIN_HEIGHT


def test_long_series_get_a_range_slider_under_the_last_panel() -> None:
    long = replace(view(), points=[replace(view().points[0], sha=f"{i:040x}", position=i) for i in range(40)],
                   findings=[])
    fig = series_figure(long, companions())
    assert fig["layout"]["xaxis3"]["rangeslider"]["visible"] is True
    assert "rangeslider" not in fig["layout"]["xaxis"]
    assert "rangeslider" not in series_figure(view())["layout"]["xaxis"]


def test_environment_differences_name_the_toolchain_first() -> None:
    mine = {"backend": "gpu", "device_kind": "H100", "jax_version": "0.4.30", "jaxlib_version": "0.4.30",
            "xla_flags": "", "new_fact": "a"}
    theirs = {**mine, "device_kind": "H200", "jax_version": "0.4.31", "xla_flags": "--xla_gpu_x=" + "1" * 100,
              "new_fact": "b"}
    diff = environment_differences(mine, theirs)
    assert diff[:2] == ["jax 0.4.30 → 0.4.31", diff[1]] and diff[1].startswith("XLA flags none → --xla_gpu_x=1")
    assert diff[1].endswith("…") and len(diff[1]) < 110
    assert diff[2:] == ["device H100 → H200", "new_fact a → b"]
    assert environment_differences(mine, dict(mine)) == []
    assert toolchain_text(mine) == "jax 0.4.30 · jaxlib 0.4.30"
    assert toolchain_text({}) == "toolchain not recorded"
