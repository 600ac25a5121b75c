"""/model: the whole suite on one hardware's roofline (stored figures only), and the `kernelwatch predict` form.

The predict form runs the very functions the command does (service.pipeline.predictions.predict_reports and the pure
text formatter); a user's mistake there is an InvalidInput, shown on the page with status 400.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, render_template, request
from plotly.utils import PlotlyJSONEncoder

from kernelwatch.errors import InvalidInput
from kernelwatch.hardware import calibration_from_manifest, host_hardware
from kernelwatch.memory_hierarchy import format_bytes
from service.pipeline.predictions import CHIPS, CPU, hardware_key
from service.store.model_points import (
    HardwareChoice,
    environment_calibration,
    hardware_choices,
    model_points,
    pick_hardware,
    repositories,
)
from web.charts.drilldown import RooflinePeaks
from web.charts.model import NO_PEAKS_NOTE, MemoryRoof, model_figure, suite_peaks
from web.pages import add_filters, service_stores
from web.units import format_roof_fraction

bp = Blueprint("model", __name__, template_folder="templates")
add_filters(bp, {"of_roof": format_roof_fraction})


def _plotly(figure: dict[str, Any]) -> Any:
    return json.loads(json.dumps(figure, cls=PlotlyJSONEncoder))


def _predict(kernel: str, source: str, target: str, hardware: str | None, repository: str | None) -> str:
    from runners.suite import SuiteNotFound, discover
    from service.pipeline.predictions import default_suite_root, predict_reports
    from service.report.predict_text import predictions_to_text
    from service.store.family_points import stored_points

    try:
        specs = discover(default_suite_root())
    except SuiteNotFound as exc:
        raise InvalidInput(str(exc)) from None
    sessions, _ = service_stores()
    with sessions() as session:
        reports = predict_reports(specs, kernel, source, target,
                                  lambda suite, name: stored_points(session, suite, name, repository), hardware)
    return predictions_to_text(reports)


def _predict_hardware(wanted: str, chosen: HardwareChoice | None) -> str | None:
    """One ``hardware`` field serves the chart and the form: a chip name ("h200", "cpu") is the command's own;
    an environment id or device kind the chart picked stands for that environment's chip; empty lets the command
    choose (the hardware with the most measured shapes). Anything else goes to the command, which rejects it."""
    if not wanted or wanted in CHIPS or wanted == CPU:
        return wanted or None
    if chosen is not None and wanted in (str(chosen.environment_id), chosen.device_kind):
        return hardware_key(chosen.backend, chosen.device_kind)
    return wanted


def memory_roofs(stored: dict[str, Any] | None) -> list[MemoryRoof]:
    """One roof per level of a calibration's measured hierarchy; none for an older one-roof calibration (the
    chart draws the points' own memory roof then) or a chip with published figures."""
    calibration = calibration_from_manifest(stored)
    if calibration is None or not calibration.bandwidth:
        return []
    return [MemoryRoof(level.name, level.bytes_per_s,
                       format_bytes(level.capacity_bytes) if level.capacity_bytes else None)
            for level in host_hardware(calibration).memory_levels()]


@bp.get("/model")
def model() -> tuple[str, int]:
    sessions, _ = service_stores()
    wanted = (request.args.get("hardware") or "").strip()
    with sessions() as session:
        repos = repositories(session)
        repository = request.args.get("repo") or (repos[0] if repos else None)
        choices = hardware_choices(session, repository) if repository else []
        chosen = pick_hardware(choices, wanted, key=hardware_key)
        points = model_points(session, repository, chosen.environment_id) if repository and chosen else []
        calibration = environment_calibration(session, chosen.environment_id) if chosen else None
    peaks = suite_peaks(points)
    levels = memory_roofs(calibration)
    if peaks is not None and levels:
        # The compute peak the points were held to; the DRAM roof as the one the ridge is drawn for.
        peaks = RooflinePeaks(peaks.flops_per_s, levels[-1].bytes_per_s)
    figure = _plotly(model_figure(points, peaks, chosen.label, levels)) if chosen and points else None
    form = {name: (request.args.get(name) or "").strip() for name in ("kernel", "from", "to")}
    table, error, status = None, None, 200
    if request.args.get("predict"):
        try:
            if not form["kernel"] or not form["from"] or not form["to"]:
                raise InvalidInput("kernel, from and to are all required (e.g. softmax, rows=256, rows=512)")
            table = _predict(form["kernel"], form["from"], form["to"], _predict_hardware(wanted, chosen), repository)
        except InvalidInput as exc:
            error, status = str(exc), 400
    return render_template(
        "model.html", repos=repos, repository=repository, choices=choices, chosen=chosen, points=points,
        peaks=peaks, levels=levels, no_peaks_note=NO_PEAKS_NOTE, figure=figure, form=form, chips=[*CHIPS, CPU],
        table=table,
        predict_hardware=_predict_hardware(wanted, chosen) if wanted else "",
        error=error), status
