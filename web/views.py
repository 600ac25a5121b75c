"""HTML pages: the alerts inbox (with triage), the commit list, and the series chart.

The inbox at ``/`` is where a kernel engineer starts: the alerts (a commit range's findings, grouped at
detection) newest first, filtered by what the URL says, each triaged in place by a logged-in user
(``web.session_auth``). Nothing here analyses: alerts, findings and their states are read as stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import plotly
from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, send_file, url_for
from plotly.utils import PlotlyJSONEncoder
from sqlalchemy.orm import Session
from werkzeug.datastructures import MultiDict
from werkzeug.wrappers import Response

from kernelwatch.digits import is_whole
from kernelwatch.errors import InvalidInput, NotFound
from service.detect.grouping import STATES
from service.detect.static_diff import COUNT_UNITS
from service.pipeline.alerts import alerts_page, triage
from service.report.alert_views import AlertFindingView, AlertView, worst_finding
from service.store.alert_context import AlertContext, alert_context, filter_choices
from service.store.db import unit_of_work
from service.store.queries import FindingView, recent_commits, series_view
from service.store.read_filters import ReadFilters
from service.store.series_companions import series_companions
from web.charts.series import figure_height, series_figure, time_scale
from web.session_auth import check_csrf, current_user

bp = Blueprint("web", __name__, template_folder="templates")

# plotly.js ships inside the plotly wheel; the dashboard must work with no internet.
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
STATIC = Path(__file__).parent / "static"
PAGE_SIZE = 50  # alerts per inbox page
FINDINGS_SHOWN = 5  # findings listed under each alert; the count says how many there are
SCAN_BATCH = 200  # alerts read at a time while filtering by branch or suite, which the store does not filter by
MAX_FILTER = 200  # a repository, branch, device kind or suite name is at most this long in the schema
MAX_NOTE = 20000  # as the API's triage


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
    """A finding's before or after level in the finding's unit: a time, a rate or error in its unit, or (for a
    code diff, whose view carries its own unit) a whole count of instructions or bundles."""
    if finding.unit == "s":
        return format_duration(value)
    if finding.unit in COUNT_UNITS:
        return f"{value:,.0f} {finding.unit}"
    return f"{value:.4g} {finding.unit}" if finding.unit not in ("", "1") else f"{value:.4g}"


@bp.app_template_filter("percent")
def format_percent(value: float) -> str:
    return f"{value:+.1%}"


@dataclass(frozen=True)
class InboxFilters:
    repository: str | None = None
    branch: str | None = None
    hardware: str | None = None
    state: str | None = None
    suite: str | None = None

    def args(self) -> dict[str, str]:
        """As URL arguments, the empty ones left out."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name))}

    @property
    def scanned(self) -> bool:
        """Whether a filter applies that the store's alert listing does not take (filtered here instead)."""
        return self.branch is not None or self.suite is not None


def inbox_filters(args: MultiDict[str, str]) -> InboxFilters:
    values: dict[str, str | None] = {}
    for f in fields(InboxFilters):
        value = (args.get(f.name) or "").strip() or None
        if value is not None and len(value) > MAX_FILTER:
            raise InvalidInput(f"{f.name} is at most {MAX_FILTER} characters")
        values[f.name] = value
    if values["state"] is not None and values["state"] not in STATES:
        raise InvalidInput(f"unknown alert state {values['state']!r}; one of: {', '.join(STATES)}")
    return InboxFilters(**values)


@dataclass(frozen=True)
class InboxEntry:
    alert: AlertView
    context: AlertContext
    findings: list[AlertFindingView]  # the largest changes first, at most FINDINGS_SHOWN
    finding_count: int  # of the suite filtered by, when there is one

    @property
    def worst(self) -> AlertFindingView | None:
        """The largest regression listed; the largest change when none is (an improvement's alert): in a mixed
        alert, a large speed-up must not stand in for the slow-down a person has to look at."""
        return worst_finding(self.findings, lambda f: f.code)


def _matches(alert: AlertView, context: AlertContext, filters: InboxFilters) -> bool:
    if filters.branch is not None and filters.branch not in context.branches:
        return False
    return filters.suite is None or filters.suite in context.suites


def _entry(alert: AlertView, context: AlertContext, suite: str | None) -> InboxEntry:
    if suite is None:
        return InboxEntry(alert, context, alert.findings[:FINDINGS_SHOWN], alert.finding_count)
    of_suite = [f for f in alert.findings if f.benchmark.startswith(suite + "/")]
    return InboxEntry(alert, context, of_suite[:FINDINGS_SHOWN], context.suites.get(suite, 0))


@dataclass(frozen=True)
class InboxPage:
    entries: list[InboxEntry]
    next_after: int | None  # the alert id to continue after; None on the last page
    total: int | None  # alerts matching the filters, over all pages; None when branch or suite filter them here


def inbox_page(session: Session, filters: InboxFilters, after: int | None) -> InboxPage:
    """A page of alerts newest first, after the alert id ``after``. Branch and suite are filtered here, over
    batches of the store's listing, until a page is full."""
    store_filters = ReadFilters(repository=filters.repository, hardware=filters.hardware)
    # With a suite filter the findings shown are that suite's: ask for enough that the largest of it are there.
    findings_limit = 200 if filters.suite is not None else FINDINGS_SHOWN
    batch = SCAN_BATCH if filters.scanned else PAGE_SIZE + 1
    entries: list[InboxEntry] = []
    cursor = after
    total: int | None = None
    while True:
        page = alerts_page(session, store_filters, state=filters.state, limit=batch, after=cursor,
                           findings_limit=findings_limit)
        if total is None and not filters.scanned:
            total = page.total
        contexts = alert_context(session, [a.id for a in page.items])
        for alert in page.items:
            # Detection may delete an alert it emptied between the two reads: then it is not listed.
            context = contexts.get(alert.id)
            if context is not None and _matches(alert, context, filters):
                entries.append(_entry(alert, context, filters.suite))
                if len(entries) > PAGE_SIZE:
                    return InboxPage(entries[:PAGE_SIZE], entries[PAGE_SIZE - 1].alert.id, total)
        if page.next is None:
            return InboxPage(entries, None, total)
        cursor = page.next


def _after_arg() -> int | None:
    raw = request.args.get("after") or ""
    if not raw:
        return None
    if not is_whole(raw) or len(raw) > 18:
        raise InvalidInput(f"after is an alert id, got {raw[:40]!r}")
    return int(raw)


@bp.get("/")
def index() -> str:
    filters = inbox_filters(request.args)
    after = _after_arg()
    with _sessions()() as session:
        page = inbox_page(session, filters, after)
        choices = filter_choices(session)
    return render_template("index.html", entries=page.entries, filters=filters, choices=choices, states=STATES,
                           next_after=page.next_after, total=page.total, after=after,
                           return_to=urlencode(filters.args()), user=current_user())


def _kept_filters(raw: str) -> dict[str, str]:
    """The inbox filters a triage form carried back, and nothing else: the redirect is built from known names,
    never from a URL the form sent, so it cannot lead off the site."""
    known = {f.name for f in fields(InboxFilters)}
    return {k: v[:MAX_FILTER] for k, v in parse_qsl(raw[:4000]) if k in known and v}


@bp.post("/alerts/<int:alert_id>/triage")
def triage_alert(alert_id: int) -> Response | tuple[str, int]:
    check_csrf()
    user = current_user()
    if user is None:
        return render_template("error.html", status=403, login=True,
                               message="Log in with a token that has the triage scope to triage alerts "
                                       "(a revoked token's session ends)."), 403
    state = request.form.get("state", "")[:16]
    note = request.form.get("note", "")
    if len(note) > MAX_NOTE:
        raise InvalidInput(f"a note is at most {MAX_NOTE} characters")
    notifier = current_app.extensions["kernelwatch"].notifier
    marked: list[int] = []
    try:
        with unit_of_work(_sessions()) as session:
            view = triage(session, alert_id, state, note, user.name)
            if notifier is not None:  # the Slack thread owes a reply, owed in the triage's own transaction
                marked = notifier.mark_alerts(session, [alert_id])
    except NotFound:
        abort(404)
    except InvalidInput as exc:
        flash(str(exc), "error")
    else:
        if notifier is not None:
            notifier.send(marked)  # after the commit, as the API's triage does
        flash(f"Alert {alert_id} is {view.state}" + (" (note added)" if note.strip() else "") + ".", "ok")
    kept = _kept_filters(request.form.get("return", ""))
    target = url_for("web.index") + (f"?{urlencode(kept)}" if kept else "")
    return redirect(f"{target}#alert-{alert_id}", 303)


@bp.get("/commits")
def commits() -> str:
    with _sessions()() as session:
        listed = recent_commits(session, limit=200)
    # As each commit's alert reads its findings (CommitView.flagged): a code diff's growth counts where nothing
    # was measured to change; a regression refuted by re-running base and head does not.
    flagged = sum(1 for c in listed if c.flagged)
    return render_template("commits.html", commits=listed, flagged=flagged)


@bp.get("/series/<int:series_id>")
def series(series_id: int) -> str:
    with _sessions()() as session:
        view = series_view(session, series_id)
        companions = series_companions(session, view) if view is not None else None
    if view is None or companions is None:
        abort(404)
    figure = json.loads(json.dumps(series_figure(view, companions), cls=PlotlyJSONEncoder))
    return render_template("series.html", view=view, companions=companions, figure=figure,
                           height=figure_height(companions))


@bp.get("/static/plotly.min.js")
def plotly_js():  # type: ignore[no-untyped-def]
    return send_file(PLOTLY_JS, mimetype="text/javascript", max_age=86400)


# Browsers ask for /favicon.ico of every site: without an icon each page's first load logged a 404 in the console.
@bp.get("/static/favicon.svg")
@bp.get("/favicon.ico")
def favicon():  # type: ignore[no-untyped-def]
    return send_file(STATIC / "favicon.svg", mimetype="image/svg+xml", max_age=86400)


@bp.get("/static/inbox.js")
def inbox_js():  # type: ignore[no-untyped-def]
    return send_file(STATIC / "inbox.js", mimetype="text/javascript", max_age=3600)
