"""The compare chart: each listed benchmark's change head/base with its interval, coloured by verdict.

PURE: comparison rows in, a plotly figure (a plain dict) out. The change is drawn in percent of the base on a
symmetric axis, so a +20 % regression and a -20 % improvement lie as far from zero; the geomeans sit on top. The
axis stops a little past -100 % whatever the largest change (no time falls by more): made symmetric about a +399 %
regression it ran to -439 %, half the chart where no result can lie.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.detect.compare import Comparison, Geomean
from web.charts.series import IMPROVEMENT, REGRESSION

UNCHANGED = "#6a737d"
INCONCLUSIVE = "#d4a72c"
GEOMEAN = "#1f77b4"
ROW_HEIGHT = 22  # pixels per benchmark: labels stay readable however many rows a page lists
FLOOR = -105.0  # the axis's left end at most: a time falls by 100 % at most, and the marker needs its room


def _colour(verdict: str) -> str:
    return {"regression": REGRESSION, "improvement": IMPROVEMENT, "inconclusive": INCONCLUSIVE}.get(verdict, UNCHANGED)


def _percent(ratio: float | None) -> float | None:
    return None if ratio is None else (ratio - 1) * 100


def row_label(row: Comparison) -> str:
    """A benchmark's label, with its metric and environment when they are not the usual wall time."""
    label = row.key.label
    if row.key.metric != "wall_time":
        label += f" · {row.key.metric}"
    return label


def ratio_figure(rows: Sequence[Comparison], geomeans: Sequence[Geomean] = ()) -> dict[str, Any]:
    """Dots at each row's change (rows without a ratio: failed, new, missing, are left out), error bars to its
    interval where there is one; the geomeans of the whole comparison first, as diamonds."""
    points: list[tuple[str, float, float | None, float | None, str, str]] = []
    for g in geomeans:
        name = f"geomean {g.metric}" + (f" ({g.environment})" if len(geomeans) > 1 else "") + f" n={g.count}"
        points.append((name, (g.ratio - 1) * 100, _percent(g.low), _percent(g.high), "geomean", GEOMEAN))
    for row in rows:
        change = _percent(row.ratio)
        if change is None:
            continue
        points.append((row_label(row), change, _percent(row.ratio_low), _percent(row.ratio_high), row.verdict,
                       _colour(row.verdict)))
    labels = [p[0] for p in points]
    # Duplicate labels (one benchmark on two environments) would be merged by a category axis: number them.
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[i] = f"{label} ({seen[label]})"
    plus = [(hi - c) if hi is not None else 0.0 for _, c, _, hi, _, _ in points]
    minus = [(c - lo) if lo is not None else 0.0 for _, c, lo, _, _, _ in points]
    extent = max([abs(c) + max(p, m) for (_, c, *_), p, m in zip(points, plus, minus, strict=True)] + [1.0])
    trace = {
        "type": "scatter", "mode": "markers", "orientation": "h",
        "x": [p[1] for p in points], "y": labels,
        "error_x": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "thickness": 1.5,
                    "width": 3, "color": "#57606a"},
        "marker": {"color": [p[5] for p in points], "size": [11 if p[4] == "geomean" else 8 for p in points],
                   "symbol": ["diamond" if p[4] == "geomean" else "circle" for p in points]},
        "customdata": [[p[4], "–" if p[2] is None else f"{p[2]:+.1f}%", "–" if p[3] is None else f"{p[3]:+.1f}%"]
                       for p in points],
        "hovertemplate": "%{y}<br>%{x:+.2f}% (%{customdata[0]})<br>interval %{customdata[1]} … "
                         "%{customdata[2]}<extra></extra>",
        "showlegend": False,
    }
    return {
        "data": [trace],
        "layout": {
            "template": "plotly_white",
            "height": max(220, 90 + ROW_HEIGHT * len(points)),
            "margin": {"l": 20, "r": 20, "t": 30, "b": 50},
            "xaxis": {"title": {"text": "change head vs base (%), 95% interval", "standoff": 8},
                      "range": [max(-extent * 1.1, FLOOR), extent * 1.1], "zeroline": True, "zerolinecolor": "#1b1f24",
                      "zerolinewidth": 1, "ticksuffix": "%"},
            "yaxis": {"autorange": "reversed", "automargin": True, "type": "category"},
        },
    }
