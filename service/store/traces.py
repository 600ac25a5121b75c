"""A result's captured profiler traces, read back from the artifact store: which there are, their bytes, and
their op timeline. For the trace pages and downloads and for `kernelwatch trace`; every way a stored trace can
fail to come back (pruned, missing or damaged on disk, not an XSpace) is one TraceUnavailable with the reason."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners.artifacts import ArtifactError, ArtifactStore
from runners.parsers.xplane_to_op_stats import TraceParseError
from runners.parsers.xplane_to_timeline import Timeline, op_timeline, profile_from_bytes
from runners.parsers.xprof_roofline import XprofRoofline, XprofRooflineError, parse_roofline_tool
from service.store.drilldown import ResultHeader

TRACE_KIND = "xplane"


class TraceUnavailable(Exception):
    """The result has no such trace, or its bytes cannot be read back as one; the message says which."""


@dataclass(frozen=True)
class TraceFile:
    result_id: int  # the result that captured it (``records_result_id`` of the one asked for)
    run_uid: str
    name: str
    sha256: str
    size: int


def trace_files(header: ResultHeader) -> list[TraceFile]:
    """The result's traces whose bytes retention has kept, in the order the run stored them."""
    return [TraceFile(header.records_result_id, header.run_uid, a.name, a.sha256, a.size)
            for a in header.artifacts if a.kind == TRACE_KIND and a.pruned_at is None]


def choose_trace(header: ResultHeader, sha256: str | None) -> TraceFile:
    """The trace named by its digest (a prefix will do), or the result's first; TraceUnavailable if none."""
    files = trace_files(header)
    if not files:
        pruned = any(a.kind == TRACE_KIND for a in header.artifacts)
        raise TraceUnavailable(f"Result {header.result_id} has no profiler trace"
                               + (": retention pruned its bytes." if pruned else " (the run did not capture one)."))
    if not sha256:
        return files[0]
    wanted = sha256.strip().lower()
    found = [f for f in files if f.sha256.startswith(wanted)] if len(wanted) >= 8 else []
    if len(found) != 1:
        raise TraceUnavailable(f"Result {header.result_id} has no trace {sha256!r}: give 8 or more hex digits of "
                               "one of its traces' digests.")
    return found[0]


def trace_bytes(store: ArtifactStore, trace: TraceFile) -> bytes:
    try:
        return store.get(trace.sha256)
    except ArtifactError as exc:  # ArtifactMissing included: the record outlived its bytes
        raise TraceUnavailable(f"The trace {trace.name} ({trace.sha256[:12]}) cannot be read back: {exc}") from None


def trace_profile(store: ArtifactStore, trace: TraceFile) -> Any:
    """The trace as ProfileData."""
    try:
        return profile_from_bytes(trace_bytes(store, trace), trace.name)
    except TraceParseError as exc:
        raise TraceUnavailable(f"The trace cannot be read: {exc}") from None


def trace_timeline(store: ArtifactStore, trace: TraceFile) -> Timeline:
    try:
        return op_timeline(trace_profile(store, trace))
    except TraceParseError as exc:
        raise TraceUnavailable(f"The trace {trace.name} holds no op to draw: {exc}") from None


def xprof_roofline(xplane: bytes) -> XprofRoofline:
    """xprof's roofline_model tool over one serialized XSpace (written to a file of its own: the tool reads
    paths), parsed (runners/parsers/xprof_roofline.py)."""
    from xprof.convert import raw_to_tool_data

    with tempfile.TemporaryDirectory(prefix="kw-xprof-") as directory:
        path = Path(directory) / "trace.xplane.pb"
        path.write_bytes(xplane)
        data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "roofline_model", {})
    if data is None:
        raise XprofRooflineError("xprof could not read the trace as an XSpace")
    return parse_roofline_tool(data)


def trace_xprof_roofline(store: ArtifactStore, trace: TraceFile) -> XprofRoofline:
    """xprof's own roofline model of the trace."""
    try:
        return xprof_roofline(trace_bytes(store, trace))
    except XprofRooflineError as exc:
        raise TraceUnavailable(f"xprof's roofline model of {trace.name} cannot be read: {exc}") from None
