"""The series chart: per-commit medians, each commit's sample spread, and the findings marked."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from service.store.queries import SeriesView

REGRESSION = "#d62728"
IMPROVEMENT = "#2ca02c"
MEDIAN = "#1f77b4"

_SCALES = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]


def time_scale(values: list[float]) -> tuple[float, str]:
    """The unit that puts the typical value between 1 and 1000 (seconds in, display unit out)."""
    if not values:
        return 1.0, "s"
    typical = sorted(values)[len(values) // 2]
    for factor, name in _SCALES:
        if typical >= factor:
            return factor, name
    return _SCALES[-1]


def series_figure(view: SeriesView) -> dict[str, Any]:
    medians = [p.median for p in view.points]
    factor, unit = time_scale(medians) if view.unit == "s" else (1.0, view.unit)
    labels = [f"{p.position}·{p.sha[:8]}" for p in view.points]
    box_x = [label for label, p in zip(labels, view.points, strict=True) for _ in p.samples]
    box_y = [s / factor for p in view.points for s in p.samples]

    fig = go.Figure()
    fig.add_trace(go.Box(x=box_x, y=box_y, name="samples", marker_color="#9aa5b1", boxpoints="outliers",
                         line_width=1, showlegend=True))
    fig.add_trace(go.Scatter(
        x=labels, y=[m / factor for m in medians], mode="lines+markers", name="median", line_color=MEDIAN,
        # The newest result of each point rides along, so a click on the point opens its drill-down page.
        customdata=[[p.subject, len(p.samples), p.result_ids[-1] if p.result_ids else None] for p in view.points],
        hovertemplate="%{x}<br>%{customdata[0]}<br>median %{y:.4g} " + unit + " (n=%{customdata[1]})<extra></extra>",
    ))
    by_sha = {p.sha: label for p, label in zip(view.points, labels, strict=True)}
    for finding in view.findings:
        label = by_sha.get(finding.commit_sha)
        if label is None or finding.kind == "static":
            continue  # a code diff is not a level of this chart: it explains a step, the table lists it
        colour = REGRESSION if finding.direction == "regression" else IMPROVEMENT
        fig.add_vline(x=label, line_color=colour, line_dash="dash", line_width=2)
        fig.add_annotation(x=label, y=1.0, yref="paper", showarrow=False, yanchor="bottom", font_color=colour,
                           text=f"{finding.magnitude:+.1%} at {finding.commit_sha[:8]}")
    fig.update_layout(
        title=f"{view.label} · {view.metric}",
        xaxis_title="commit (first-parent position · sha)",
        yaxis_title=f"{view.metric} ({unit})",
        template="plotly_white",
        margin={"l": 60, "r": 20, "t": 60, "b": 60},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig.to_plotly_json()
