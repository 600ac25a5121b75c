"""The drill-down pages from a result to its assembly: /results/<id>, its HLO, and each kernel's code.

Everything shown is stored data (records, and the text of the result's artifacts); what a page filters by is in
its URL, so a link shows exactly what its sender saw.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Blueprint, Response, abort, render_template, request
from plotly.utils import PlotlyJSONEncoder
from sqlalchemy.orm import Session

from runners.artifacts import ArtifactStore
from runners.parsers.xplane_to_timeline import trace_events
from service.store.drilldown import ResultHeader, hlo_view, kernel_listing, kernels, op_table, result_header
from service.store.traces import (
    TraceFile,
    TraceUnavailable,
    choose_trace,
    trace_bytes,
    trace_files,
    trace_profile,
    trace_timeline,
    trace_xprof_roofline,
)
from web.charts.drilldown import (
    mix_segments,
    op_time_figure,
    roof_for,
    roofline_figure,
    roofline_point,
    stored_roof,
)
from web.charts.timeline import TimelineSide, timeline_figure
from web.highlight import highlight_hlo
from web.pages import add_filters, service_stores
from web.units import (
    class_colour,
    format_fraction,
    format_ns,
    format_ratio,
    format_relative,
    format_roof_fraction,
    format_seconds,
    format_share,
    format_si,
    format_value,
)

bp = Blueprint("drilldown", __name__, template_folder="templates")

add_filters(bp, {"ns": format_ns, "si": format_si, "share": format_share, "seconds": format_seconds,
                 "measured": format_value, "class_colour": class_colour, "hlo": highlight_hlo,
                 "times": format_ratio, "signed_pct": format_relative, "of_peak": format_fraction,
                 "of_roof": format_roof_fraction})


@contextmanager
def _result_session(result_id: int) -> Iterator[tuple[Session, ResultHeader, ArtifactStore]]:
    """A session, the result's header and the artifact store; 404 when there is no such result."""
    sessions, store = service_stores()
    with sessions() as session:
        header = result_header(session, result_id)
        if header is None:
            abort(404)
        yield session, header, store


def _plotly(figure: dict[str, Any]) -> Any:
    return json.loads(json.dumps(figure, cls=PlotlyJSONEncoder))


@bp.get("/results/<int:result_id>")
def result(result_id: int) -> str:
    with _result_session(result_id) as (session, header, _):
        ops = op_table(session, result_id)
        compiled = kernels(session, result_id)
    category = request.args.get("category") or None
    query = (request.args.get("q") or "").strip()
    shown = [o for o in ops if (category is None or o.category == category)
             and (not query or query.lower() in o.op.lower())]
    point = roofline_point(header.flops, header.bytes_accessed, header.seconds)
    if header.roofline is not None:  # ingest stored the figures: draw those, the page computes nothing
        roof = stored_roof(header.roofline)
    else:  # a result stored before ingest computed figures
        dtype = header.params.get("dtype")
        roof = roof_for(header.backend, header.device_kind, str(dtype) if dtype is not None else None)
    return render_template(
        "result.html", header=header, ops=shown, all_ops=ops, kernels=compiled, category=category, query=query,
        categories=sorted({o.category for o in ops}), point=point, roof=roof, traces=trace_files(header),
        op_figure=_plotly(op_time_figure(shown)) if shown else None,
        roofline=_plotly(roofline_figure(point, roof.peaks, header.hardware)) if point else None)


@bp.get("/results/<int:result_id>/hlo")
def hlo(result_id: int) -> str:
    with _result_session(result_id) as (session, header, store):
        view = hlo_view(session, result_id, store)
    assert view is not None  # the result exists
    return render_template("hlo.html", header=header, view=view, open_fusion=request.args.get("fusion") or None,
                           show_text=request.args.get("text") == "1")


@bp.get("/results/<int:result_id>/kernels/<path:name>")
def kernel(result_id: int, name: str) -> str:
    isa = request.args.get("isa") or None
    with _result_session(result_id) as (session, header, store):
        listing = kernel_listing(session, result_id, name, store, isa=isa)
        siblings = kernels(session, result_id)
    if listing is None:
        abort(404)
    loops_only = request.args.get("only") == "loops"
    rows = [r for r in listing.rows if r.loop_depth > 0] if loops_only else listing.rows
    return render_template("kernel.html", header=header, listing=listing, rows=rows, loops_only=loops_only,
                           segments=mix_segments(listing.mix), kernels=siblings)


def _header_and_store(result_id: int) -> tuple[ResultHeader, ArtifactStore]:
    with _result_session(result_id) as (_, header, store):
        return header, store


def _trace_error(header: ResultHeader, error: TraceUnavailable) -> tuple[str, int]:
    return render_template("trace.html", header=header, error=str(error), traces=trace_files(header)), 404


@bp.get("/results/<int:result_id>/trace")
def trace(result_id: int) -> str | tuple[str, int]:
    """The op timeline of the result's trace (``?artifact=`` a digest where it has several), the op of
    ``?op=`` highlighted: the executions the op table counts, each at its time."""
    header, store = _header_and_store(result_id)
    op = (request.args.get("op") or "").strip() or None
    try:
        chosen = choose_trace(header, request.args.get("artifact"))
        timeline = trace_timeline(store, chosen)
    except TraceUnavailable as error:
        return _trace_error(header, error)
    ops = sorted({s.op for s in timeline.spans})
    return render_template("trace.html", header=header, error=None, traces=trace_files(header), chosen=chosen,
                           timeline=timeline, op=op, ops=ops, op_found=op is None or op in ops,
                           figure=_plotly(timeline_figure([TimelineSide("", timeline, op)])))


def _download(header: ResultHeader, chosen: TraceFile, data: bytes, suffix: str, mimetype: str) -> Response:
    # Named by the result and digest only, never by the name a runner gave the file (it could carry a path); the
    # result that captured it, where another of the session did (result 133's page serves result 13's trace).
    filename = f"kernelwatch-result-{header.records_result_id}-{chosen.sha256[:12]}{suffix}"
    return Response(data, mimetype=mimetype, headers={
        "Content-Disposition": f"attachment; filename={filename}", "X-Content-Type-Options": "nosniff"})


@bp.get("/results/<int:result_id>/trace.xplane.pb")
def trace_download(result_id: int) -> Response | tuple[str, int]:
    """The raw XSpace, as the runner captured it: what xprof and TensorBoard's profile plugin open."""
    header, store = _header_and_store(result_id)
    try:
        chosen = choose_trace(header, request.args.get("artifact"))
        return _download(header, chosen, trace_bytes(store, chosen), ".xplane.pb", "application/octet-stream")
    except TraceUnavailable as error:
        return _trace_error(header, error)


@bp.get("/results/<int:result_id>/xprof-roofline")
def xprof_roofline_page(result_id: int) -> str | tuple[str, int]:
    """xprof's roofline model of the result's trace beside KernelWatch's stored figures: on a device trace its
    per-op rates, bounds and efficiencies against the device's peaks; on a CPU trace it has none, and says so."""
    header, store = _header_and_store(result_id)
    try:
        chosen = choose_trace(header, request.args.get("artifact"))
        theirs = trace_xprof_roofline(store, chosen)
    except TraceUnavailable as error:
        return render_template("xprof_roofline.html", header=header, error=str(error), ours=header.roofline), 404
    return render_template("xprof_roofline.html", header=header, error=None, chosen=chosen, theirs=theirs,
                           ours=header.roofline)


@bp.get("/results/<int:result_id>/trace.json.gz")
def trace_perfetto(result_id: int) -> Response | tuple[str, int]:
    """The whole trace as Chrome trace-event JSON, gzipped: Perfetto's UI (ui.perfetto.dev, or one served
    locally) and chrome://tracing open it as it is."""
    header, store = _header_and_store(result_id)
    try:
        chosen = choose_trace(header, request.args.get("artifact"))
        document = trace_events(trace_profile(store, chosen))
    except TraceUnavailable as error:
        return _trace_error(header, error)
    data = gzip.compress(json.dumps(document, separators=(",", ":")).encode(), compresslevel=6)
    return _download(header, chosen, data, ".trace.json.gz", "application/gzip")
