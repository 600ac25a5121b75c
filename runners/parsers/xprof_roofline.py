"""xprof's own roofline model of a trace, as its ``roofline_model`` tool computes it: the reference a result's
roofline figures are shown beside.

``xprof.convert.raw_to_tool_data.xspace_to_tool_data`` turns an XSpace into the tool's data offline: a list of
Google-Charts DataTables, the first holding one row per op (and per step) with the device's peaks as table
properties (``p``: peak_flop_rate in GFLOP/s, peak_hbm_bw in GiB/s, device_type, ...). It reads device planes
only: a trace of a CPU run gives the table with no rows and zero peaks, which is reported as such, never as
zeros.

``parse_roofline_tool`` is pure (the tool's JSON in, rows out); the call into xprof is service/store/traces.py's.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

GIB = float(2**30)
MAX_ROWS = 50  # ops shown: the tool ranks them by self time
TOTAL_STEP = "Total"  # the step whose rows aggregate every step (the tool also has a row set per step)


class XprofRooflineError(ValueError):
    """The tool's output is not the table this parser knows; the message says what was missing."""


@dataclass(frozen=True)
class XprofOp:
    operation: str
    category: str
    occurrences: int
    total_self_time_us: float
    measured_flops_per_s: float | None
    measured_bytes_per_s: float | None  # memory bandwidth, bytes/s (the tool's GiB/s converted)
    operational_intensity: float | None  # FLOP per byte
    bound_by: str
    roofline_efficiency: float | None  # a fraction (the tool's percent over 100)


@dataclass(frozen=True)
class XprofRoofline:
    device_type: str
    peak_flops_per_s: float | None  # None where the tool knows no peak (a CPU trace)
    peak_hbm_bytes_per_s: float | None
    ops: tuple[XprofOp, ...]

    @property
    def empty(self) -> bool:
        return not self.ops


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _positive(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and number > 0 else None


def parse_roofline_tool(data: bytes | str) -> XprofRoofline:
    """The tool's JSON (what ``xspace_to_tool_data(..., "roofline_model", {})`` returns) as ops and peaks."""
    try:
        tables = json.loads(data)
    except ValueError as exc:
        raise XprofRooflineError(f"xprof's roofline_model output is not JSON: {exc}") from None
    if not isinstance(tables, list) or not tables or not isinstance(tables[0], dict) or "cols" not in tables[0]:
        raise XprofRooflineError("xprof's roofline_model output holds no op table")
    table = tables[0]
    ids = [c.get("id") for c in table["cols"] if isinstance(c, dict)]
    found = table.get("p")
    properties: dict[str, Any] = found if isinstance(found, dict) else {}

    def column(row: dict[str, Any], name: str) -> Any:
        if name not in ids:
            return None
        cells = row.get("c") or []
        i = ids.index(name)
        cell = cells[i] if i < len(cells) else None
        return cell.get("v") if isinstance(cell, dict) else None

    rows = [r for r in table.get("rows") or [] if isinstance(r, dict)]
    # Every step's rows are there as well as the total's; keep the total's where the tool has one.
    totals = [r for r in rows if str(column(r, "step")) == TOTAL_STEP]
    ops = []
    for row in (totals or rows)[:MAX_ROWS]:
        bandwidth = _number(column(row, "measured_memory_bw"))
        efficiency = _number(column(row, "roofline_efficiency"))
        ops.append(XprofOp(
            operation=str(column(row, "operation") or "?"), category=str(column(row, "category") or ""),
            occurrences=int(_number(column(row, "occurrences")) or 0),
            total_self_time_us=_number(column(row, "total_self_time")) or 0.0,
            measured_flops_per_s=None if (f := _number(column(row, "measured_flop_rate"))) is None else f * 1e9,
            measured_bytes_per_s=None if bandwidth is None else bandwidth * GIB,
            operational_intensity=_number(column(row, "operational_intensity")),
            bound_by=str(column(row, "bound_by") or ""),
            roofline_efficiency=None if efficiency is None else efficiency / 100))
    peak_flops = _positive(properties.get("peak_flop_rate"))
    peak_hbm = _positive(properties.get("peak_hbm_bw"))
    return XprofRoofline(device_type=str(properties.get("device_type") or ""),
                         peak_flops_per_s=None if peak_flops is None else peak_flops * 1e9,
                         peak_hbm_bytes_per_s=None if peak_hbm is None else peak_hbm * GIB, ops=tuple(ops))
