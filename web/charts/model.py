"""The /model page's figure: the whole suite on one hardware's roofline. Pure: stored points in, plotly JSON out."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from service.store.model_points import ModelPoint
from web.charts.drilldown import RooflinePeaks, attainable
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


def model_figure(points: Sequence[ModelPoint], peaks: RooflinePeaks | None, hardware: str) -> dict[str, Any]:
    fig = go.Figure()
    intensities = [p.intensity for p in points]
    if peaks is not None:
        # Far enough either side of the points and the ridge that the roof's bend is always in view.
        low = min([*intensities, peaks.ridge]) / 10
        high = max([*intensities, peaks.ridge]) * 10
        xs = [low, peaks.ridge, high]  # two straight segments on log axes: the memory slope, then the flat peak
        fig.add_trace(go.Scatter(x=xs, y=[attainable(peaks, x) for x in xs], mode="lines", name="roof",
                                 line={"color": "#6a737d", "width": 2}))
        fig.add_vline(x=peaks.ridge, line={"color": "#953800", "dash": "dash"},
                      annotation_text=f"ridge {peaks.ridge:.3g} FLOP/B", annotation_position="top left")
        title = f"Roofline · {hardware} · {len(points)} benchmark(s)"
    else:
        title = f"Roofline · {hardware} · {NO_PEAKS_NOTE}"
    fig.add_trace(go.Scatter(
        x=intensities, y=[p.achieved_flops_per_s for p in points], mode="markers", name="benchmarks",
        # A point above its roof is drawn as a cross: the roof does not bound it, so its fraction is no figure.
        marker={"color": ["#d62728" if p.bound == "compute" else "#4c78a8" for p in points], "size": 9,
                "symbol": ["x" if p.above else "circle" for p in points]},
        text=[p.label for p in points],
        customdata=[[format_si(p.achieved_flops_per_s, "FLOP/s"),
                     "above the roof: none" if p.above else f"{p.fraction:.1%}" if p.fraction is not None else "-",
                     p.bound] for p in points],
        hovertemplate=("%{text}<br>%{x:.3g} FLOP/B<br>%{customdata[0]}<br>%{customdata[1]} of the roof"
                       "<br>%{customdata[2]}-bound<extra></extra>")))
    if peaks is None and points:  # log axes around the points alone, or a single point zooms to nothing
        ys = [p.achieved_flops_per_s for p in points]
        fig.update_xaxes(range=[math.log10(min(intensities)) - 1, math.log10(max(intensities)) + 1])
        fig.update_yaxes(range=[math.log10(min(ys)) - 1, math.log10(max(ys)) + 1])
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)")
    fig.update_yaxes(type="log", title="achieved FLOP/s", tickformat="~s")
    fig.update_layout(title=title, template="plotly_white", margin={"l": 70, "r": 20, "t": 50, "b": 50},
                      height=480)
    return fig.to_plotly_json()
