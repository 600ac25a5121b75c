"""The trace timeline: each op execution a bar on its line's track, the op a link came from highlighted; with two
sides (the Diff page) base and head tracks one above the other on one time axis, each from its own first op.
Pure: timelines in, a plotly figure as JSON out."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from runners.parsers.xplane_to_timeline import Span, Timeline
from web.charts.series import time_scale

OP_COLOUR = "#9ecae1"
HEAD_OP_COLOUR = "#a1d99b"  # the Diff page's head ops: base's and head's were one colour under two legend keys
HIGHLIGHT = "#d62728"
TRACK_HEIGHT = 34  # px a track takes; the figure grows with its tracks
_THREAD_ID = re.compile(r"/\d{6,}$")  # XLA's CPU thread names end in a long numeric id: noise on an axis


@dataclass(frozen=True)
class TimelineSide:
    label: str  # "" for a result's own timeline; "base" / "head" on the Diff page
    timeline: Timeline
    highlight: str | None = None  # the op drawn in red (a renamed fusion has a name on each side)


def track_label(side: str, track: str) -> str:
    """A track's axis label: the side (base/head) where there are two, the line name without its thread id."""
    name = _THREAD_ID.sub("", track.split(" · ", 1)[-1])
    return f"{side} · {name}" if side else name


def _labels(sides: Sequence[TimelineSide]) -> list[list[str]]:
    """Each side's track labels, made unique (two CPU threads of one client read the same without their ids)."""
    seen: dict[str, int] = {}
    out = []
    for side in sides:
        labels = []
        for track in side.timeline.tracks:
            label = track_label(side.label, track)
            seen[label] = seen.get(label, 0) + 1
            labels.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
        out.append(labels)
    return out


def _bars(spans: Sequence[Span], labels: list[str], scale: float, name: str, colour: str,
          side: str) -> go.Bar:
    return go.Bar(
        name=name, orientation="h", y=[labels[s.track] for s in spans], x=[s.duration_ns / 1e9 / scale for s in spans],
        base=[s.start_ns / 1e9 / scale for s in spans], marker={"color": colour, "line": {"width": 0}},
        customdata=[[s.op, s.module, s.duration_ns / 1e3, side] for s in spans],
        hovertemplate="<b>%{customdata[0]}</b> · %{customdata[1]}<br>%{customdata[3]}"
                      "%{base:.4g} + %{x:.4g}<br>%{customdata[2]:.3f} µs<extra></extra>")


def timeline_figure(sides: Sequence[TimelineSide]) -> dict[str, Any]:
    """The figure of one timeline, or of base above head; each side's ``highlight`` op drawn in red."""
    factor, unit = time_scale([max(side.timeline.end_ns for side in sides) / 1e9])
    fig = go.Figure()
    all_labels = _labels(sides)
    for side, labels in zip(sides, all_labels, strict=True):
        prefix = f"{side.label} " if side.label else ""
        rest = [s for s in side.timeline.spans if s.op != side.highlight]
        marked = [s for s in side.timeline.spans if s.op == side.highlight]
        colour = HEAD_OP_COLOUR if side.label == "head" else OP_COLOUR
        fig.add_trace(_bars(rest, labels, factor, f"{prefix}ops", colour, prefix))
        if marked:
            fig.add_trace(_bars(marked, labels, factor, f"{prefix}{side.highlight}", HIGHLIGHT, prefix))
    order = [label for labels in all_labels for label in labels]
    tracks = len(order)
    fig.update_layout(
        barmode="overlay", bargap=0.25, height=120 + TRACK_HEIGHT * tracks, margin={"l": 10, "r": 10, "t": 40, "b": 50},
        title={"text": "op executions", "font": {"size": 14}}, showlegend=any(side.highlight for side in sides),
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
        xaxis={"title": {"text": f"time from the first op ({unit})"}, "rangemode": "tozero"},
        yaxis={"categoryorder": "array", "categoryarray": list(reversed(order)), "automargin": True},
        plot_bgcolor="#ffffff")
    fig.update_xaxes(showgrid=True, gridcolor="#eeeeee")
    return json.loads(fig.to_json())  # plain JSON types: the page embeds it as it is
