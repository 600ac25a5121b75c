"""HTML pages: the commit list with flagged findings, and the series chart."""

from __future__ import annotations

import json
from pathlib import Path

import plotly
from flask import Blueprint, abort, current_app, render_template, send_file
from plotly.utils import PlotlyJSONEncoder

from service.store.queries import FindingView, recent_commits, series_view
from web.charts.series import series_figure, time_scale

bp = Blueprint("web", __name__, template_folder="templates")

# plotly.js ships inside the plotly wheel; the dashboard must work with no internet.
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _sessions():  # type: ignore[no-untyped-def]
    return current_app.extensions["kernelwatch"].sessions


@bp.app_template_filter("duration")
def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    factor, unit = time_scale([seconds])
    return f"{seconds / factor:.3g} {unit}"


@bp.app_template_filter("finding_value")
def format_finding_value(value: float, finding: FindingView) -> str:
    """A finding's before or after level in its own terms: a time, a rate or error in its unit, or (for a code
    diff) a count of instructions."""
    if finding.kind == "static":
        return f"{value:,.0f} instr"
    if finding.unit == "s":
        return format_duration(value)
    return f"{value:.4g} {finding.unit}" if finding.unit not in ("", "1") else f"{value:.4g}"


@bp.app_template_filter("percent")
def format_percent(value: float) -> str:
    return f"{value:+.1%}"


@bp.get("/")
def index() -> str:
    with _sessions()() as session:
        commits = recent_commits(session, limit=200)
    flagged = sum(1 for c in commits if any(f.flags_commit for f in c.findings))
    return render_template("index.html", commits=commits, flagged=flagged)


@bp.get("/series/<int:series_id>")
def series(series_id: int) -> str:
    with _sessions()() as session:
        view = series_view(session, series_id)
    if view is None:
        abort(404)
    figure = json.loads(json.dumps(series_figure(view), cls=PlotlyJSONEncoder))
    return render_template("series.html", view=view, figure=figure)


@bp.get("/static/plotly.min.js")
def plotly_js():  # type: ignore[no-untyped-def]
    return send_file(PLOTLY_JS, mimetype="text/javascript", max_age=86400)
