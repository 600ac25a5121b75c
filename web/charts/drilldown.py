"""Figures of the drill-down pages: time per op, the roofline point, the instruction mix. Pure: records in,
plotly JSON (or plain segments) out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from kernelwatch.hardware import hardware_for
from service.model.compute_roof import DEFAULT_DTYPE, compute_roof
from service.model.result_roofline import above_roof, on_roof, roof_fraction_text
from service.store.drilldown import OpRow, StoredRoofline
from web.charts.series import time_scale
from web.units import class_colour, format_seconds, format_si

TOP_OPS = 20  # more bars than this are unreadable; the table below lists every op


@dataclass(frozen=True)
class RooflinePoint:
    intensity: float  # FLOP per byte accessed
    flops_per_s: float  # achieved
    bytes_per_s: float  # achieved


@dataclass(frozen=True)
class RooflinePeaks:
    """A chip's peak compute (for one dtype) and memory bandwidth, from service/model's table; where the chip is
    not in it callers pass None, and the figure says the roof is unknown rather than guess it."""

    flops_per_s: float
    bytes_per_s: float

    @property
    def ridge(self) -> float:
        """The intensity where the memory roof meets the compute roof."""
        return self.flops_per_s / self.bytes_per_s


@dataclass(frozen=True)
class RoofChoice:
    """The roof a result page draws, and the sentence under the chart that says where it comes from."""

    peaks: RooflinePeaks | None
    note: str


def roof_for(backend: str, device_kind: str, dtype: str | None) -> RoofChoice:
    """The published peaks for a result's hardware and dtype (None: the benchmark names none, so JAX's default),
    chosen by the rule ingest stores figures by (service/model/compute_roof.py), and the note says when another
    dtype's peak stands in. A CPU, or a chip not in the table, gets no roof: hosts have no published figures.
    Only for results without stored figures (stored before ingest computed them, or from a run that did not
    calibrate its host): the others use ``stored_roof``."""
    hardware = hardware_for(backend, device_kind)
    if hardware is None:
        return RoofChoice(None, f"Peak compute and bandwidth of {backend} · {device_kind} are not known to "
                                "KernelWatch (no published figures, and no host calibration stored with this run): no "
                                "roof is drawn rather than a guessed one.")
    roof = compute_roof(hardware, dtype or DEFAULT_DTYPE)
    if roof is None:
        return RoofChoice(None, f"{hardware.name} publishes no compute peak; no roof drawn.")
    stand_in = f"; {roof.note}" if roof.note else ""
    undeclared = "" if dtype else " (this result records no dtype: JAX's default float32)"
    return RoofChoice(RooflinePeaks(roof.peak_flops_per_s, hardware.memory_bytes_per_s),
                      f"Roof: {hardware.name}, {format_si(roof.peak_flops_per_s, 'FLOP/s')} {roof.used} peak"
                      f"{undeclared}{stand_in}, and {format_si(hardware.memory_bytes_per_s, 'B/s')} memory "
                      f"bandwidth, per chip ({hardware.source}).")


def stored_roof(stored: StoredRoofline) -> RoofChoice:
    """The roof ingest measured the result against, and what it found, in words."""
    if stored.above:
        fraction = (": this result was measured faster than that, so the roof does not bound it (a calibration "
                    "that missed a cache level, another dtype's peak, or over-stated counts), and no fraction of it "
                    "is shown")
    elif stored.achieved_fraction is not None:
        fraction = (", achieved: on the roof, within its measurement noise" if on_roof(stored.achieved_fraction)
                    else f", {roof_fraction_text(stored.achieved_fraction)} of it achieved")
    else:
        fraction = ""
    return RoofChoice(RooflinePeaks(stored.peak_flops_per_s, stored.peak_bytes_per_s),
                      f"Roof: {stored.peak_source}: {format_si(stored.peak_flops_per_s, 'FLOP/s')} and "
                      f"{format_si(stored.peak_bytes_per_s, 'B/s')} memory bandwidth. {stored.bound.capitalize()}-"
                      f"bound; the roofline time is {format_seconds(stored.roofline_s)}{fraction}.")


@dataclass(frozen=True)
class MixSegment:
    name: str
    count: int
    share: float
    colour: str


def roofline_point(flops: float | None, bytes_accessed: float | None, seconds: float | None) -> RooflinePoint | None:
    """Where a kernel sits, from its FLOPs, bytes and measured time; None when one is missing or not positive."""
    if not flops or not bytes_accessed or not seconds or min(flops, bytes_accessed, seconds) <= 0:
        return None
    return RooflinePoint(intensity=flops / bytes_accessed, flops_per_s=flops / seconds,
                         bytes_per_s=bytes_accessed / seconds)


def attainable(peaks: RooflinePeaks, intensity: float) -> float:
    """The roof at an intensity: bandwidth-bound below the ridge, compute-bound above."""
    return min(peaks.flops_per_s, peaks.bytes_per_s * intensity)


def log_ticks(low: float, high: float) -> int | str:
    """A log axis's tick step: every decade where the axis spans two or more (plotly's own choice labels every
    digit of each decade there, printed over one another on a chart of ordinary height), else 1, 2 and 5 of each."""
    return 1 if math.log10(high / low) >= 2 else "D2"


def roofline_figure(point: RooflinePoint, peaks: RooflinePeaks | None, hardware: str) -> dict[str, Any]:
    fig = go.Figure()
    if peaks is not None:
        low = min(point.intensity, peaks.ridge) / 10
        high = max(point.intensity, peaks.ridge) * 10
        xs = [low * (high / low) ** (i / 60) for i in range(61)]
        fig.add_trace(go.Scatter(x=xs, y=[attainable(peaks, x) for x in xs], mode="lines", name="roof",
                                 line={"color": "#6a737d", "width": 2}))
        # The y-axis set here, not left to plotly: over its own range plotly labelled 4G, 5G, ... 90G, 100G, printed
        # over one another (the result page, 2026-12-07).
        y_low = min(point.flops_per_s, attainable(peaks, low)) / 2
        y_high = max(point.flops_per_s, peaks.flops_per_s) * 2
        fig.update_yaxes(range=[math.log10(y_low), math.log10(y_high)], dtick=log_ticks(y_low, y_high))
        fig.update_xaxes(range=[math.log10(low), math.log10(high)], dtick=log_ticks(low, high))
        fraction = point.flops_per_s / attainable(peaks, point.intensity)
        where = ("above the roof: it does not bound this result" if above_roof(fraction)
                 else "on the roof at this intensity, within its measurement noise" if on_roof(fraction)
                 else f"{roof_fraction_text(fraction)} of the roof at this intensity")
        title = f"Roofline · {hardware} · {where}"
    else:
        title = f"Roofline · {hardware} · peak figures unknown, no roof drawn"
    fig.add_trace(go.Scatter(
        x=[point.intensity], y=[point.flops_per_s], mode="markers", name="this result",
        marker={"color": "#d62728", "size": 12},
        hovertemplate=(f"{point.intensity:.3g} FLOP/B<br>{format_si(point.flops_per_s, 'FLOP/s')}<br>"
                       f"{format_si(point.bytes_per_s, 'B/s')}<extra></extra>")))
    if peaks is None:  # one point on log axes needs a range around it, or plotly zooms to nothing
        fig.update_xaxes(range=[math.log10(point.intensity) - 2, math.log10(point.intensity) + 2])
        fig.update_yaxes(range=[math.log10(point.flops_per_s) - 2, math.log10(point.flops_per_s) + 2])
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)")
    fig.update_yaxes(type="log", title="achieved FLOP/s", tickformat="~s")  # 1G, not plotly's 1B
    fig.update_layout(title=title, template="plotly_white", margin={"l": 70, "r": 20, "t": 50, "b": 50},
                      showlegend=peaks is not None, height=360)
    return fig.to_plotly_json()


def op_time_figure(ops: Sequence[OpRow], limit: int = TOP_OPS) -> dict[str, Any]:
    """Self time per op as horizontal bars, slowest on top, coloured by op category."""
    shown = sorted(ops, key=lambda o: -o.self_ns)[:limit]
    factor, unit = time_scale([o.self_ns * 1e-9 for o in shown])
    rows = list(reversed(shown))  # plotly draws the first category at the bottom
    fig = go.Figure(go.Bar(
        x=[o.self_ns * 1e-9 / factor for o in rows], y=[o.op for o in rows], orientation="h",
        marker_color=[class_colour(o.category) for o in rows],
        customdata=[[o.category, o.occurrences, f"{o.share:.1%}"] for o in rows],
        hovertemplate="%{y}<br>%{customdata[0]} · %{customdata[1]}× · %{customdata[2]} of self time<br>"
                      "%{x:.3g} " + unit + "<extra></extra>"))
    fig.update_layout(title=f"Self time per op (top {len(shown)} of {len(ops)})", template="plotly_white",
                      xaxis_title=f"self time over the profiled calls ({unit})", yaxis={"automargin": True},
                      margin={"l": 20, "r": 20, "t": 50, "b": 50}, height=max(220, 60 + 28 * len(rows)))
    return fig.to_plotly_json()


def mix_segments(mix: dict[str, int]) -> list[MixSegment]:
    """A kernel's per-class counts as segments of one bar, largest first; classes with no instruction left out."""
    total = sum(mix.values())
    if total <= 0:
        return []
    return [MixSegment(name, count, count / total, class_colour(name))
            for name, count in sorted(mix.items(), key=lambda kv: (-kv[1], kv[0])) if count > 0]
