"""xprof's roofline_model tool read back: its op table and device peaks parsed (the table shaped as xprof 2.x
writes it: one row set per step and a "Total" one, percentages and GiB/s), and the real tool run on a real CPU
trace, where it has no rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

from runners.parsers.xprof_roofline import GIB, XprofRooflineError, parse_roofline_tool
from service.store.traces import xprof_roofline

COLUMNS = ["step", "rank", "category", "operation", "occurrences", "total_time", "total_self_time",
           "measured_flop_rate", "measured_memory_bw", "operational_intensity", "bound_by", "roofline_efficiency"]


def tool_output(rows: list[list[Any]], peaks: dict[str, str]) -> str:
    table = {"cols": [{"id": c, "label": c, "type": "string"} for c in COLUMNS],
             "rows": [{"c": [{"v": v} for v in row]} for row in rows], "p": peaks}
    return json.dumps([table, {"cols": [{"id": "severity"}, {"id": "message"}], "rows": []}])


def test_the_total_rows_and_the_device_peaks_are_read_in_si_units() -> None:
    data = tool_output([
        ["0", 1, "convolution fusion", "fusion.1", 10, 500.0, 400.0, 900_000.0, 1200.0, 700.0, "Compute", 91.5],
        ["Total", 1, "convolution fusion", "fusion.1", 20, 1000.0, 800.0, 880_000.0, 1100.0, 750.0, "Compute", 89.0],
        ["Total", 2, "loop fusion", "fusion.7", 20, 300.0, 300.0, 1_000.0, "NaN", None, "HBM", None],
    ], {"device_type": "TPU v5 lite", "peak_flop_rate": "197000", "peak_hbm_bw": "763"})
    parsed = parse_roofline_tool(data)
    assert parsed.device_type == "TPU v5 lite" and not parsed.empty
    assert parsed.peak_flops_per_s == pytest.approx(197e12) and parsed.peak_hbm_bytes_per_s == pytest.approx(763 * GIB)
    assert [o.operation for o in parsed.ops] == ["fusion.1", "fusion.7"]  # the Total rows, not step 0's
    conv, loop = parsed.ops
    assert (conv.occurrences, conv.total_self_time_us, conv.bound_by) == (20, 800.0, "Compute")
    assert conv.measured_flops_per_s == pytest.approx(880e12) and conv.measured_bytes_per_s == pytest.approx(1100 * GIB)
    assert conv.roofline_efficiency == pytest.approx(0.89) and conv.operational_intensity == 750.0
    # What the tool leaves unknown stays unknown, never zero or NaN.
    assert loop.measured_bytes_per_s is None and loop.roofline_efficiency is None and loop.operational_intensity is None


@pytest.mark.parametrize("data", [b"not json", b"{}", b"[]", b'[{"rows": []}]'])
def test_output_that_is_not_the_table_is_refused_with_a_reason(data: bytes) -> None:
    with pytest.raises(XprofRooflineError):
        parse_roofline_tool(data)


def test_a_cpu_trace_has_no_rows_and_no_peaks(tmp_path: Path) -> None:
    x = np.ones((64, 256), np.float32)
    f = jax.jit(lambda v: (v * 2).sum())
    f(x).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        for _ in range(3):
            f(x).block_until_ready()
    (path,) = tmp_path.glob("plugins/profile/*/*.xplane.pb")
    parsed = xprof_roofline(path.read_bytes())
    assert parsed.empty and parsed.peak_flops_per_s is None and parsed.peak_hbm_bytes_per_s is None
    with pytest.raises(XprofRooflineError):
        xprof_roofline(b"\x00 not an xspace")
