"""The /model page's figure: the whole suite on one hardware's roofline. Pure: stored points in, plotly JSON out."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from service.model.result_roofline import on_roof, roof_fraction_text
from service.store.model_points import ModelPoint
from web.charts.drilldown import RooflinePeaks, attainable, log_ticks
from web.units import format_si

NO_PEAKS_NOTE = "no peak figures are stored for this hardware: points only, no roof"


def suite_peaks(points: Sequence[ModelPoint]) -> RooflinePeaks | None:
    """The roof most points were measured against. Results of different dtypes can carry different compute
    peaks; one chart draws one roof, so the commonest wins (each point's hover still gives its own fraction)."""
    counted = Counter((p.peak_flops_per_s, p.peak_bytes_per_s) for p in points
                      if p.peak_flops_per_s and p.peak_bytes_per_s)
    if not counted:
        return None
    (flops, bandwidth), _ = counted.most_common(1)[0]
    assert flops is not None and bandwidth is not None
    return RooflinePeaks(flops, bandwidth)


@dataclass(frozen=True)
class MemoryRoof:
    """One memory roof to draw: a level of a calibrated host's hierarchy, or a chip's one memory bandwidth."""

    name: str
    bytes_per_s: float
    capacity: str | None = None  # "2 MiB", for the legend; None for DRAM / HBM


RIDGE_REACH = 1000.0  # a ridge this far (in FLOP/B ratio) from the points is left off the axes
ROOF_COLOURS = ("#2ca02c", "#17becf", "#9467bd", "#6a737d", "#8c564b", "#e377c2")
BOUND_COLOURS = {"compute": "#d62728", "memory": "#4c78a8"}
ABOVE_ROOF_KEY = "above its roof (no fraction)"


def _legend_keys(points: Sequence[ModelPoint]) -> list[go.Scatter]:
    """What the points' colours and symbols mean, one legend entry each for those on the chart: the points are one
    trace (one hover, one set of labels), and a legend entry of a trace shows only its first point's marker, so a
    red and a blue point and a cross were drawn under one red "benchmarks" key."""
    keys = [go.Scatter(x=[None], y=[None], mode="markers", name=f"{bound}-bound", hoverinfo="skip",
                       marker={"color": colour, "size": 9, "symbol": "circle"})
            for bound, colour in BOUND_COLOURS.items() if any(p.bound == bound and not p.above for p in points)]
    if any(p.above for p in points):
        keys.append(go.Scatter(x=[None], y=[None], mode="markers", name=ABOVE_ROOF_KEY, hoverinfo="skip",
                               marker={"color": "#6a737d", "size": 9, "symbol": "x"}))
    return keys


def _roof_line(point: ModelPoint) -> str:
    """A point's hover line about its roof, as every face words a fraction (roof_fraction_text): within the roof's
    noise "on its roof", never a figure over 100 %; past it no fraction at all (the roof does not bound it)."""
    if point.above:
        return "above the roof: none"
    if on_roof(point.fraction):
        return "on its roof"
    return f"{roof_fraction_text(point.fraction, decimals=1, sep=' ')} of its roof"


OWN_ROOF_KEY = "each point's own roof"


def _own_roofs(points: Sequence[ModelPoint]) -> go.Scatter | None:
    """A dash above (or at) each point at the roof it is held to: on a host whose hierarchy was measured, a point's
    memory roof is the bandwidth at its own working set, between the drawn level lines, so where its ceiling lies
    was said in its hover alone. None where no point has its own peaks stored."""
    held = [(p, attainable(RooflinePeaks(p.peak_flops_per_s, p.peak_bytes_per_s), p.intensity)) for p in points
            if p.peak_flops_per_s and p.peak_bytes_per_s and not p.above]
    if not held:
        return None
    return go.Scatter(
        x=[p.intensity for p, _ in held], y=[roof for _, roof in held], mode="markers", name=OWN_ROOF_KEY,
        marker={"symbol": "line-ew-open", "size": 16, "color": "#57606a", "line": {"width": 2}},
        customdata=[[p.label, format_si(roof, "FLOP/s"), format_si(p.peak_bytes_per_s or 0, "B/s")]
                    for p, roof in held],
        hovertemplate=("%{customdata[0]}<br>its roof: %{customdata[1]}<br>memory %{customdata[2]} at its working "
                       "set<extra></extra>"))


def _short(label: str) -> str:
    """A point's label on the chart: suite/name, the parameters left to the hover and the table."""
    return label.split(" [", 1)[0]


def _point_labels(points: Sequence[ModelPoint], achieved: Sequence[float]) -> tuple[list[str], list[str]]:
    """Each point's label and its position. A benchmark's shapes share its name, so where it has several the label
    adds the parameters that tell them apart; and of its points the lowest is labelled below, the rest above, since
    its shapes often share an intensity and stand one above the other (two names printed on one another, as before,
    read as neither)."""
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(points):
        groups.setdefault(_short(p.label), []).append(i)
    labels, positions = [""] * len(points), ["top center"] * len(points)
    for name, members in groups.items():
        params = [points[i].params for i in members]
        varying = [k for k in params[0] if len({str(ps.get(k)) for ps in params}) > 1]
        for i, ps in zip(members, params, strict=True):
            labels[i] = name + ("".join(f" {k}={ps[k]}" for k in varying) if len(members) > 1 else "")
        if len(members) > 1:
            positions[min(members, key=lambda i: achieved[i])] = "bottom center"
    return labels, positions


def model_figure(points: Sequence[ModelPoint], peaks: RooflinePeaks | None, hardware: str,
                 memory_roofs: Sequence[MemoryRoof] = ()) -> dict[str, Any]:
    """The suite on its hardware's roofline. The axes span the points (half a decade either side) and the ridge
    only where it is within ``RIDGE_REACH`` of them: a ridge far from every point would squeeze them into a
    corner. Every roof is drawn across that
    span: one memory roof per level where the host's hierarchy was measured (``memory_roofs``; each point is held
    to the roof of its own working set's level, which its hover names), else the one memory roof of ``peaks``."""
    fig = go.Figure()
    intensities = [p.intensity for p in points]
    achieved = [p.achieved_flops_per_s for p in points]
    low, high = (min(intensities) / 3, max(intensities) * 3) if points else (0.1, 10.0)
    if peaks is not None and low / RIDGE_REACH < peaks.ridge < high * RIDGE_REACH:
        low, high = min(low, peaks.ridge / 3), max(high, peaks.ridge * 3)  # near enough to show the bend
    roofs = list(memory_roofs) or ([MemoryRoof("roof", peaks.bytes_per_s)] if peaks is not None else [])
    tops: list[float] = []
    if peaks is not None:
        for i, roof in enumerate(roofs):
            ridge = peaks.flops_per_s / roof.bytes_per_s
            xs = [low, *([ridge] if low < ridge < high else []), high]  # the slope, the bend, the flat peak
            level = RooflinePeaks(peaks.flops_per_s, roof.bytes_per_s)
            ys = [attainable(level, x) for x in xs]
            tops.append(max(ys))
            name = roof.name if not memory_roofs else (
                f"{roof.name} roof ({format_si(roof.bytes_per_s, 'B/s')}"
                + (f", {roof.capacity}" if roof.capacity else "") + ")")
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name,
                                     line={"color": ROOF_COLOURS[i % len(ROOF_COLOURS)] if memory_roofs
                                           else "#6a737d", "width": 2, "dash": "solid" if i == len(roofs) - 1
                                           else "dot"}))
        # The ridge of the slowest memory roof (DRAM, HBM): where the suite's large shapes turn compute-bound.
        if low < peaks.ridge < high:
            fig.add_vline(x=peaks.ridge, line={"color": "#953800", "dash": "dash"})
            # Its label is an annotation of its own: on a log axis plotly reads an annotation's x as log10 of the
            # value (a shape's as the value), so add_vline's own annotation_text stood at 10^ridge, off the chart
            # (plotly.py issue 2580), and the ridge was never labelled.
            fig.add_annotation(x=math.log10(peaks.ridge), xref="x", y=1, yref="y domain", xanchor="right",
                               yanchor="top", showarrow=False, text=f"ridge {peaks.ridge:.3g} FLOP/B")
        title = f"Roofline · {hardware} · {len(points)} benchmark(s)"
    else:
        title = f"Roofline · {hardware} · {NO_PEAKS_NOTE}"
    labels, positions = _point_labels(points, achieved)
    if memory_roofs:
        own = _own_roofs(points)
        if own is not None:
            fig.add_trace(own)
    for key in _legend_keys(points):
        fig.add_trace(key)
    fig.add_trace(go.Scatter(
        x=intensities, y=achieved, mode="markers+text", name="benchmarks", showlegend=False,
        # A point above its roof is drawn as a cross: the roof does not bound it, so its fraction is no figure.
        marker={"color": [BOUND_COLOURS.get(p.bound, BOUND_COLOURS["memory"]) for p in points], "size": 9,
                "symbol": ["x" if p.above else "circle" for p in points]},
        text=labels, textposition=positions, textfont={"size": 9},
        customdata=[[p.label, format_si(p.achieved_flops_per_s, "FLOP/s"),
                     _roof_line(p), p.bound, p.peak_source or "no roof"] for p in points],
        hovertemplate=("%{customdata[0]}<br>%{x:.3g} FLOP/B<br>%{customdata[1]}<br>%{customdata[2]}"
                       "<br>%{customdata[3]}-bound<br>%{customdata[4]}<extra></extra>")))
    if points:
        y_low = min(achieved) / 3
        y_high = max([*achieved, *tops]) * 2
        fig.update_xaxes(range=[math.log10(low), math.log10(high)], dtick=log_ticks(low, high))
        fig.update_yaxes(range=[math.log10(y_low), math.log10(y_high)], dtick=log_ticks(y_low, y_high))
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)")
    fig.update_yaxes(type="log", title="achieved FLOP/s", tickformat="~s")
    fig.update_layout(title=title, template="plotly_white", margin={"l": 70, "r": 20, "t": 50, "b": 50},
                      height=520, legend={"orientation": "h", "y": -0.18})
    return fig.to_plotly_json()
