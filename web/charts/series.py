"""The series chart: per-commit medians with each median's interval, each commit's sample spread, the findings
marked, and companion panels under it on the same commit axis (the benchmark's kernel sizes, its numerical
error). Pure: the view and its companions in, a plotly figure as JSON out."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from service.store.queries import SeriesPointView, SeriesView
from service.store.series_companions import CONFIDENCE, CompanionTrace, PointRun, SeriesCompanions

REGRESSION = "#d62728"
IMPROVEMENT = "#2ca02c"
MEDIAN = "#1f77b4"
TOOLCHAIN = "#555555"  # the boundary where the series goes on under another toolchain (a sibling series)
# Kernel-size traces cycle through these (none is the median's blue or a finding's red or green); the error has
# its own, so it never shares a colour with a kernel count.
STATIC_COLOURS = ["#8c564b", "#9467bd", "#17becf", "#bcbd22", "#7f7f7f", "#ff7f0e", "#aec7e8", "#c5b0d5"]
ERROR_COLOUR = "#e377c2"

_SCALES = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]
MAIN_HEIGHT = 520  # px of the main chart; each companion panel adds COMPANION_HEIGHT
COMPANION_HEIGHT = 170
MARGIN_TOP = 110  # px above the plots: the title, the legend, then the findings' labels
LEGEND_GAP = 24  # px between the top of the plots and the legend: room for the findings' labels
SLIDER_POINTS = 30  # from this many commits a range slider under the chart helps to pan a zoomed view


def time_scale(values: list[float]) -> tuple[float, str]:
    """The unit that puts the typical value between 1 and 1000 (seconds in, display unit out)."""
    if not values:
        return 1.0, "s"
    typical = sorted(values)[len(values) // 2]
    for factor, name in _SCALES:
        if typical >= factor:
            return factor, name
    return _SCALES[-1]


def point_label(point: SeriesPointView) -> str:
    return f"{point.position}·{point.sha[:8]}"


def interval_text(run: PointRun | None, n: int, factor: float, unit: str) -> str:
    """The hover's interval line: the median's order-statistic interval, or why there is none."""
    if run is None or run.ci_low is None or run.ci_high is None:
        return f"no {CONFIDENCE:.0%} CI (n={n}: too few samples)"
    return f"{CONFIDENCE:.0%} CI [{run.ci_low / factor:.4g}, {run.ci_high / factor:.4g}] {unit}"


def run_text(run: PointRun | None) -> str:
    if run is None:
        return "run unknown"
    return f"run {run.run_id[:12]} · {run.started_at:%Y-%m-%d %H:%M} UTC"


def figure_height(companions: SeriesCompanions | None) -> int:
    panels = int(bool(companions and companions.static)) + int(bool(companions and companions.error))
    return MAIN_HEIGHT + COMPANION_HEIGHT * panels


def series_figure(view: SeriesView, companions: SeriesCompanions | None = None) -> dict[str, Any]:
    medians = [p.median for p in view.points]
    factor, unit = time_scale(medians) if view.unit == "s" else (1.0, view.unit)
    labels = [point_label(p) for p in view.points]
    runs = companions.runs if companions else {}
    # A panel without data is left out rather than drawn empty: most CPU runs capture no kernel code.
    panels = [(title, traces) for title, traces in
              (("kernel size", companions.static if companions else []),
               ("max abs error", companions.error if companions else [])) if traces]
    rows = 1 + len(panels)
    main_share = MAIN_HEIGHT / figure_height(companions)
    heights = [main_share] + [(1 - main_share) / len(panels)] * len(panels) if panels else [1.0]
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.04 if rows > 1 else 0.0,
                        row_heights=heights)

    box_x = [label for label, p in zip(labels, view.points, strict=True) for _ in p.samples]
    box_y = [s / factor for p in view.points for s in p.samples]
    fig.add_trace(go.Box(x=box_x, y=box_y, name="samples", marker_color="#9aa5b1", boxpoints="outliers",
                         line_width=1, showlegend=True), row=1, col=1)
    fig.add_trace(go.Scatter(
        x=labels, y=[m / factor for m in medians], mode="lines+markers", name="median", line_color=MEDIAN,
        # The newest result of each point rides along at index 2, so a click on the point opens its drill-down
        # page; the interval and run are preformatted, as plotly's hover cannot format a missing bound.
        customdata=[[p.subject, len(p.samples), p.result_ids[-1] if p.result_ids else None,
                     interval_text(runs.get(p.sha), len(p.samples), factor, unit), run_text(runs.get(p.sha))]
                    for p in view.points],
        hovertemplate=("%{x}<br>%{customdata[0]}<br>median %{y:.4g} " + unit
                       + " (n=%{customdata[1]})<br>%{customdata[3]}<br>%{customdata[4]}<extra></extra>"),
    ), row=1, col=1)

    by_sha = {p.sha: label for p, label in zip(view.points, labels, strict=True)}
    for row, (title, traces) in enumerate(panels, start=2):
        for index, trace in enumerate(traces):
            colour = STATIC_COLOURS[index % len(STATIC_COLOURS)] if title == "kernel size" else ERROR_COLOUR
            _add_companion(fig, trace, by_sha, row, colour, step=title == "kernel size")
        # Errors span decades (1e-7 against 1e-3 is the change to see), but an exact kernel's zero has no log.
        log = title == "max abs error" and all(p.value > 0 for t in traces for p in t.points)
        fig.update_yaxes(title_text=title, row=row, col=1, rangemode="tozero" if title == "kernel size" else None,
                         type="log" if log else None, exponentformat="e")

    for finding in view.findings:
        label = by_sha.get(finding.commit_sha)
        if label is None or finding.kind == "static":
            continue  # a code diff is not a level of this chart: it explains a step, the table lists it
        colour = REGRESSION if finding.direction == "regression" else IMPROVEMENT
        # Through every panel: a step in time beside a change of kernel size or error is the story to see.
        fig.add_vline(x=label, line_color=colour, line_dash="dash", line_width=2)
        fig.add_annotation(x=label, y=1.0, yref="paper", showarrow=False, yanchor="bottom", font_color=colour,
                           text=f"{finding.magnitude:+.1%} at {finding.commit_sha[:8]}")

    by_position = {p.position: label for p, label in zip(view.points, labels, strict=True)}
    for event in companions.events if companions else []:
        label = by_position.get(event.position)
        if label is None:
            continue
        # Grey, dotted, at the bottom: not a finding, but what a step across it would be blamed on.
        fig.add_vline(x=label, line_color=TOOLCHAIN, line_dash="dot", line_width=2)
        where = "continues after" if event.continues else "before"
        fig.add_annotation(x=label, y=0.0, yref="paper", showarrow=False, yanchor="bottom",
                           xanchor="right" if event.continues else "left", font_color=TOOLCHAIN,
                           text=f"{'; '.join(event.changes[:2]) or 'environment changed'} ({where})")

    fig.update_xaxes(title_text="commit (first-parent position · sha)", row=rows, col=1)
    if len(view.points) >= SLIDER_POINTS:
        fig.update_xaxes(rangeslider={"visible": True, "thickness": 0.05}, row=rows, col=1)
    fig.update_yaxes(title_text=f"{view.metric} ({unit})", row=1, col=1)
    height = figure_height(companions)
    fig.update_layout(
        title=f"{view.label} · {view.metric}",
        template="plotly_white",
        height=height,
        margin={"l": 70, "r": 20, "t": MARGIN_TOP, "b": 60},
        # Above the plot, clear of the findings' labels: under it, rotated commit labels and the range slider
        # take a height that depends on the data, and a legend there ran into them.
        legend={"orientation": "h", "x": 0, "xanchor": "left", "yanchor": "bottom",
                "y": 1 + LEGEND_GAP / (height - MARGIN_TOP - 60)},
        hovermode="closest",
    )
    return fig.to_plotly_json()


def _add_companion(fig: go.Figure, trace: CompanionTrace, by_sha: dict[str, str], row: int, colour: str,
                   step: bool) -> None:
    shown = [p for p in trace.points if p.sha in by_sha]
    fig.add_trace(go.Scatter(
        x=[by_sha[p.sha] for p in shown], y=[p.value for p in shown], mode="lines+markers", name=trace.name,
        line={"color": colour, "shape": "hv" if step else "linear"},  # a code size holds until a commit changes it
        # Index 2 is the result, as on the medians: a click opens the result that holds the listing or error.
        customdata=[[trace.name, None, p.result_id] for p in shown],
        hovertemplate="%{x}<br>%{customdata[0]}: %{y:.4g}<extra></extra>",
    ), row=row, col=1)
