"""Profiler trace (an XSpace, as ``jax.profiler.ProfileData``) → what a user opens it as: the op timeline a page
draws, and a Chrome trace-event document (JSON) that Perfetto's UI and chrome://tracing load.

The timeline holds exactly the op executions the op table counts (``xplane_to_op_stats.op_lines``: the first
device plane's ops, or the host plane's events with ``hlo_op`` stats), one track per line, times from the first
op's start, so a bar on the page is a row of the table. A benchmark's trace repeats its program once per sample:
the page shows the first ``max_spans`` executions in time order and says how many there were.

The trace-event document holds every event of every plane (host threads, Python, runtime, device lines), one
process per plane and one thread per line, as xprof's trace viewer lays them out; ``ts``/``dur`` are
microseconds from the trace's first event, and each event's scalar stats become its ``args`` (so ``hlo_op`` and
``hlo_module`` are searchable in Perfetto). Past ``max_events`` events it stops and says so in ``metadata``.

Works on anything shaped like ProfileData; ``profile_from_bytes`` (the op table's) is the boundary for bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runners.parsers.xplane_to_execution_times import _stats
from runners.parsers.xplane_to_op_stats import TraceParseError, op_lines, profile_from_bytes

__all__ = ["MAX_SPANS", "Span", "Timeline", "op_timeline", "profile_from_bytes", "trace_events"]

MAX_SPANS = 4000  # bars a browser draws and pans smoothly; the rest are counted, and the download has them all
MAX_TRACE_EVENTS = 1_000_000  # ~100 MB of JSON: past it, Perfetto's UI in a browser tab struggles


@dataclass(frozen=True)
class Span:
    track: int  # index into Timeline.tracks
    module: str
    op: str
    start_ns: float  # from the first op's start
    duration_ns: float


@dataclass(frozen=True)
class Timeline:
    source: str  # "device" or "host", as the op table's
    tracks: tuple[str, ...]  # "<plane> · <line>"
    spans: tuple[Span, ...]  # in start order, the first MAX_SPANS
    total: int  # op executions in the trace
    end_ns: float  # the end of the last span shown

    @property
    def truncated(self) -> bool:
        return len(self.spans) < self.total


def op_timeline(profile: Any, max_spans: int = MAX_SPANS) -> Timeline:
    """The trace's op executions as tracks of spans; a TraceParseError where it holds no op events."""
    source, lines = op_lines(profile)
    events = [(e.start, e.end, track, e.module, e.op) for track, line in enumerate(lines) for e in line.events]
    if not events:
        raise TraceParseError("the trace holds no op events")
    events.sort()
    t0 = events[0][0]
    shown = events[:max_spans]
    spans = tuple(Span(track, module, op, start - t0, max(end - start, 0.0))
                  for start, end, track, module, op in shown)
    tracks = tuple(f"{line.plane} · {line.name}" for line in lines)
    return Timeline(source, tracks, spans, len(events), max(s.start_ns + s.duration_ns for s in spans))


# The stats XLA and JAX's profiler link a producer event to its consumers with (xprof's trace viewer draws them
# as arrows: a host-side dispatch to the execution it started): the producer's id and type, the consumer's.
_FLOW_STATS = (("_p", "_pt", "s"), ("_c", "_ct", "f"))


def _flow_ends(stats: dict[str, Any], pid: int, tid: int, ts: float) -> list[dict[str, Any]]:
    """The trace-event flow ends an event's producer/consumer stats make: a flow start at a producer, its finish
    (bound to the enclosing slice) at each consumer of the same type and id, as Perfetto and chrome://tracing
    draw them; none where the event has neither."""
    ends: list[dict[str, Any]] = []
    for id_stat, type_stat, phase in _FLOW_STATS:
        flow = stats.get(id_stat)
        if isinstance(flow, int) and not isinstance(flow, bool):
            kind = stats.get(type_stat)
            end: dict[str, Any] = {"ph": phase, "name": "flow", "cat": f"flow {kind}" if kind is not None else "flow",
                                   "id": f"{kind}:{flow}", "pid": pid, "tid": tid, "ts": ts}
            if phase == "f":
                end["bp"] = "e"
            ends.append(end)
    return ends


def _args(stats: dict[str, Any]) -> dict[str, Any]:
    """The stats a trace-event arg can hold as they are; ints past JSON's exact range as text (ids, flows)."""
    out: dict[str, Any] = {}
    for key, value in stats.items():
        if isinstance(value, bool | float | str):
            out[str(key)] = value
        elif isinstance(value, int):
            out[str(key)] = value if abs(value) < 2**53 else str(value)
    return out


def trace_events(profile: Any, max_events: int = MAX_TRACE_EVENTS) -> dict[str, Any]:
    """The whole trace as a Chrome trace-event document (``{"traceEvents": [...], "displayTimeUnit": "ns"}``)."""
    planes = list(profile.planes)
    lines = [(pid, tid, plane, line) for pid, plane in enumerate(planes, 1)
             for tid, line in enumerate(plane.lines, 1)]
    events_by_line = [(pid, tid, list(line.events)) for pid, tid, _, line in lines]
    starts = [float(e.start_ns) for _, _, events in events_by_line for e in events]
    t0 = min(starts) if starts else 0.0
    out: list[dict[str, Any]] = []
    for pid, plane in enumerate(planes, 1):
        out.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": str(plane.name)}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
    for pid, tid, _, line in lines:
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": str(line.name)}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    kept = dropped = 0
    for pid, tid, events in events_by_line:
        for event in events:
            if kept >= max_events:
                dropped += 1
                continue
            kept += 1
            item: dict[str, Any] = {"ph": "X", "name": str(event.name), "pid": pid, "tid": tid,
                                    "ts": round((float(event.start_ns) - t0) / 1e3, 3),
                                    "dur": round(max(float(event.duration_ns), 0.0) / 1e3, 3)}
            stats = _stats(event)
            args = _args(stats)
            if args:
                item["args"] = args
            out.append(item)
            out += _flow_ends(stats, pid, tid, item["ts"])
    metadata: dict[str, Any] = {"producer": "kernelwatch", "events": kept, "dropped_events": dropped}
    if dropped:
        metadata["note"] = f"the first {kept} of {kept + dropped} events: the trace is larger than a browser loads"
    return {"displayTimeUnit": "ns", "metadata": metadata, "traceEvents": out}
