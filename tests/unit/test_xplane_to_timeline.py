"""The trace as a user opens it: the op timeline a page draws (exactly the executions the op table counts) and
the Chrome trace-event document Perfetto loads, on synthetic device traces and on a real CPU trace, against xprof's
own trace viewer conversion."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from jax.profiler import ProfileData

from runners.parsers.xplane_to_op_stats import TraceParseError, parse_xplane_file, profile_from_bytes
from runners.parsers.xplane_to_timeline import op_timeline, trace_events
from tests.unit.test_xplane_to_op_stats import cpu_trace, xla_ops_plane  # noqa: F401 (a fixture)
from web.charts.timeline import TimelineSide, timeline_figure, track_label


def device_profile() -> Any:
    return ProfileData.from_text_proto(xla_ops_plane("/device:TPU:1") + xla_ops_plane("/device:TPU:0"))


def test_a_device_timeline_is_the_first_devices_ops_in_time_order() -> None:
    timeline = op_timeline(device_profile())
    assert timeline.source == "device" and timeline.tracks == ("/device:TPU:0 · XLA Ops",)
    assert timeline.total == 6 and not timeline.truncated
    assert [s.op for s in timeline.spans] == ["while.1", "fusion.2", "fusion.2", "fusion.2", "all-reduce.3",
                                              "fusion.2"]
    starts = [s.start_ns for s in timeline.spans]
    assert starts == sorted(starts) and starts[0] == 0.0 and starts[1] == 1_000.0  # from the first op, in ns
    assert timeline.spans[2].duration_ns == 1_500.0  # the device's own duration stat, as the op table reads it
    assert [s.module for s in timeline.spans[:2]] == ["jit_f", "jit_f"]
    assert timeline.end_ns == 49_000.0 + 500.0

    first_two = op_timeline(device_profile(), max_spans=2)
    assert first_two.truncated and first_two.total == 6 and len(first_two.spans) == 2


def test_a_trace_without_ops_has_no_timeline() -> None:
    empty = SimpleNamespace(planes=[SimpleNamespace(name="/host:CPU", lines=[
        SimpleNamespace(name="python", events=[SimpleNamespace(name="f", start_ns=0, duration_ns=5, stats=[])])])])
    with pytest.raises(TraceParseError, match="neither a device plane nor host op events"):
        op_timeline(empty)
    with pytest.raises(TraceParseError, match="not a readable XSpace"):
        profile_from_bytes(b"\x0a\xff\xff not an xspace")
    with pytest.raises(TraceParseError, match="larger than"):
        profile_from_bytes(b"x" * 11, max_bytes=10)


def test_trace_events_hold_every_plane_line_and_event() -> None:
    document = trace_events(device_profile())
    events = document["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert sorted(processes.values()) == ["/device:TPU:0", "/device:TPU:1"]
    assert sorted(set(threads.values())) == ["XLA Modules", "XLA Ops"] and len(threads) == 4
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == 2 * (3 + 6) and min(e["ts"] for e in complete) == 0.0
    assert all((e["pid"], e["tid"]) in threads for e in complete)
    timed = [e for e in complete if "device_duration_ps" in e.get("args", {})]
    assert len(timed) == 2 and {e["args"]["device_duration_ps"] for e in timed} == {1_500_000}
    assert document["metadata"] == {"producer": "kernelwatch", "events": 18, "dropped_events": 0}

    capped = trace_events(device_profile(), max_events=5)
    assert len([e for e in capped["traceEvents"] if e["ph"] == "X"]) == 5
    assert capped["metadata"]["dropped_events"] == 13 and "the first 5 of 18" in capped["metadata"]["note"]
    json.dumps(document, allow_nan=False)  # plain JSON throughout


def test_ids_past_json_exact_integers_become_text() -> None:
    stats = [("run_id", 2**60), ("hlo_op", "fusion.1"), ("hlo_module", "jit_f"), ("small", 7), ("blob", b"\x00")]
    profile = SimpleNamespace(planes=[SimpleNamespace(name="/host:CPU", lines=[SimpleNamespace(name="t", events=[
        SimpleNamespace(name="fusion.1", start_ns=1_000, duration_ns=2_000, stats=stats)])])])
    [event] = [e for e in trace_events(profile)["traceEvents"] if e["ph"] == "X"]
    assert event["args"] == {"run_id": str(2**60), "hlo_op": "fusion.1", "hlo_module": "jit_f", "small": 7}
    assert (event["ts"], event["dur"]) == (0.0, 2.0)  # µs


def test_producer_and_consumer_stats_become_flow_events() -> None:
    """A dispatch that produced an execution (XLA's _p/_pt on one, _c/_ct on the other) is one flow, as xprof's
    trace viewer draws it: the export dropped the link and Perfetto showed two unrelated slices."""
    def event(name: str, start: int, stats: list[tuple[str, Any]]) -> SimpleNamespace:
        return SimpleNamespace(name=name, start_ns=start, duration_ns=1_000, stats=stats)

    profile = SimpleNamespace(planes=[SimpleNamespace(name="/host:CPU", lines=[
        SimpleNamespace(name="python", events=[event("PjitFunction(f)", 0, [("_p", 7), ("_pt", 15)])]),
        SimpleNamespace(name="xla", events=[event("ThunkExecute", 3_000, [("_c", 7), ("_ct", 15)]),
                                            event("fusion.1", 4_000, [("_c", 8), ("_ct", 15)])])])])
    flows = [e for e in trace_events(profile)["traceEvents"] if e["ph"] in ("s", "f")]
    assert [(e["ph"], e["id"], e["tid"], e["ts"]) for e in flows] == [
        ("s", "15:7", 1, 0.0), ("f", "15:7", 2, 3.0), ("f", "15:8", 2, 4.0)]
    assert all(e.get("bp") == "e" for e in flows if e["ph"] == "f")


def test_a_real_cpu_trace_matches_its_op_table_and_xprofs_trace_viewer(cpu_trace: Path,  # noqa: F811
                                                                        tmp_path: Path) -> None:
    from xprof.convert import raw_to_tool_data

    profile = profile_from_bytes(cpu_trace.read_bytes())
    timeline = op_timeline(profile)
    assert timeline.source == "host" and not timeline.truncated
    drawn: dict[tuple[str, str], int] = {}
    for span in timeline.spans:
        drawn[span.module, span.op] = drawn.get((span.module, span.op), 0) + 1
    assert drawn == {(s.module, s.op): s.occurrences for s in parse_xplane_file(cpu_trace)}

    flows = [e for e in trace_events(profile)["traceEvents"] if e["ph"] in ("s", "f")]
    starts = {e["id"] for e in flows if e["ph"] == "s"}
    assert flows and {e["id"] for e in flows if e["ph"] == "f"} <= starts  # every consumer's producer is there
    copy = tmp_path / cpu_trace.name  # xprof writes caches beside the file it reads
    shutil.copy(cpu_trace, copy)
    reference = json.loads(raw_to_tool_data.xspace_to_tool_data([str(copy)], "trace_viewer", {})[0])

    def op_events(document: dict[str, Any]) -> list[tuple[str, str, float]]:
        return sorted((e["name"], e["args"]["hlo_module"], round(e["dur"], 2)) for e in document["traceEvents"]
                      if e.get("ph") == "X" and "hlo_op" in e.get("args", {}))

    ours = op_events(trace_events(profile))
    assert ours and ours == op_events(reference)
    assert len(ours) == timeline.total


def test_the_figure_stacks_base_above_head_and_highlights_each_sides_name() -> None:
    base, head = op_timeline(device_profile()), op_timeline(device_profile(), max_spans=3)
    figure = timeline_figure([TimelineSide("base", base, "fusion.2"), TimelineSide("head", head, "while.1")])
    names = [trace["name"] for trace in figure["data"]]
    assert names == ["base ops", "base fusion.2", "head ops", "head while.1"]
    colours = [trace["marker"]["color"] for trace in figure["data"]]
    assert colours[0] != colours[2] and colours[1] == colours[3]  # two legend keys, two colours; red marks the op
    assert figure["layout"]["yaxis"]["categoryarray"] == ["head · XLA Ops", "base · XLA Ops"]  # base on top
    highlighted = figure["data"][1]
    assert len(highlighted["x"]) == 4 and {row[0] for row in highlighted["customdata"]} == {"fusion.2"}
    assert figure["layout"]["xaxis"]["title"]["text"] == "time from the first op (µs)"
    single = timeline_figure([TimelineSide("", base)])
    assert [t["name"] for t in single["data"]] == ["ops"] and not single["layout"]["showlegend"]


def test_track_labels_drop_thread_ids() -> None:
    assert track_label("", "/host:CPU · tf_XLAPjRtCpuClient/2132983323690799507") == "tf_XLAPjRtCpuClient"
    assert track_label("head", "/device:GPU:0 · Stream #13(compute)") == "head · Stream #13(compute)"
