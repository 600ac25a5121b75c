"""Profiler trace (an XSpace, as ``jax.profiler.ProfileData``) → per-(module, op) statistics: count, time, category.

Accelerators: the first device plane (``/device:TPU:N`` / ``/device:GPU:N``, lowest N) gives device time. Its
"XLA Ops" line holds one event per op execution, named after the HLO instruction; the module is the event's
``hlo_module`` stat when present, else the "XLA Modules" event on the same plane that contains it in time (named
``<module>(<program id>)``). A device plane without an "XLA Ops" line (raw GPU stream lines) falls back to events
carrying an ``hlo_op`` stat, whose last ``::``-separated part names the op, as xprof reads GPU kernels; each
kernel is an occurrence (xprof merges back-to-back kernels of one op). Kernels replayed by a command buffer (a
CUDA graph) all carry the buffer's thunk as their ``hlo_op``: there the kernel's own name is the op, renamed to
the HLO instruction it spells where the module's HLO is given (``kernel_hlo_names``; read off H200 traces). A
pair of ``device_offset_ps`` and ``device_duration_ps`` stats, where present, gives the duration, as in xprof; the
device offset counts from the line's timestamp, which ProfileData does not expose, so the event's start is kept.

CPU: no device plane; op events sit on lines of the ``/host:CPU`` plane and carry ``hlo_op`` and ``hlo_module``
stats (a while or conditional op's event contains the events of the ops it runs).

Self time is total time minus the time of op events directly nested inside it on the same line; without nesting
they are equal. This matches xprof's hlo_stats on device traces (checked in the tests; on CPU hlo_stats is empty).

Works on anything shaped like ProfileData, so it is testable without a profiler session; ``parse_xplane_file``
is the boundary for bytes from disk.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from runners.parsers.xplane_to_execution_times import MODULE_LINE, TraceError, _device_planes, _stats

PARSER_VERSION = 2  # 2: kernels of GPU command buffers by their own names
HOST_PLANE = "/host:CPU"
OPS_LINE = "XLA Ops"
UNKNOWN_MODULE = "<unknown>"
MAX_XPLANE_BYTES = 256 << 20
_EPSILON_NS = 1e-3  # 1 ps: starts and ends are doubles computed separately from picosecond offsets

CATEGORIES = ("loop_fusion", "input_fusion", "output_fusion", "custom_fusion", "fusion", "convolution", "dot",
              "collective", "custom_call", "copy", "transpose", "control_flow", "library", "other")
_FUSION_KINDS = {"kLoop": "loop_fusion", "kInput": "input_fusion", "kOutput": "output_fusion",
                 "kCustom": "custom_fusion"}
_COLLECTIVE = re.compile(r"^(all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all|"
                         r"collective-broadcast|ragged-all-to-all)(-start|-done)?$")
_LIBRARY = re.compile(r"(ynn|xnn|onednn|mkl|eigen)", re.IGNORECASE)
_MODULE_EVENT = re.compile(r"^(.*)\((\d+)\)$")
COMMAND_BUFFER = "command_buffer"  # XLA:GPU's thunk that replays recorded kernels as one CUDA graph
_KERNEL_PART = re.compile(r"__\d+$")
_OPCODE_CATEGORY = {
    "convolution": "convolution", "dot": "dot", "custom-call": "custom_call", "copy": "copy",
    "copy-start": "copy", "copy-done": "copy", "transpose": "transpose", "while": "control_flow",
    "conditional": "control_flow", "call": "control_flow",
}

# instructions named after the framework op (``dot_general.1``) rather than the opcode
_JAX_NAME_CATEGORY = {"dot_general": "dot", "conv_general_dilated": "convolution", "cond": "control_flow",
                      "psum": "collective", "all_gather": "collective", "ppermute": "collective",
                      "all_to_all": "collective", "psum_scatter": "collective"}


class TraceParseError(TraceError):
    pass


class HloOp(Protocol):
    """What categorization reads of an HLO instruction; ``hlo_text_to_module.Instruction`` has it, and so does
    :class:`HloOpInfo`. An optional ``target`` attribute (custom-call target, custom fusion kind) is read too."""

    @property
    def opcode(self) -> str: ...

    @property
    def fusion_kind(self) -> str | None: ...


@dataclass(frozen=True)
class HloOpInfo:
    """The smallest :class:`HloOp`: an opcode, a fusion's kind, and a custom call's target or a custom fusion's
    backend kind (``__ynn_fusion``)."""

    opcode: str
    fusion_kind: str | None = None
    target: str | None = None
    of_fusion: str | None = None  # a fusion's ROOT instruction: the fusion it stands for (by_kind.hlo_ops)


@dataclass(frozen=True)
class OpStat:
    module: str
    op: str
    category: str
    occurrences: int
    total_ns: float
    self_ns: float
    source: str  # "device" (first device plane) or "host"
    devices: int | None = None  # device planes the op ran on, when counted; None otherwise
    parser_version: int = PARSER_VERSION


def _base_name(op: str) -> str:
    """``all-reduce-start.3`` → ``all-reduce-start``, ``cond.1.clone`` → ``cond``: HLO instruction names are the
    opcode (or the framework op's name) with ``.N`` and ``.clone`` suffixes."""
    return re.sub(r"(\.(\d+|clone))+$", "", op)


def categorize(op: str, info: HloOp | None = None) -> str:
    """One of CATEGORIES: from the HLO opcode and fusion kind when known, else guessed from the op's name."""
    if info is not None:
        opcode = info.opcode
        target = str(getattr(info, "target", None) or "")
        if _LIBRARY.search(target) or (opcode in ("fusion", "custom-call") and _LIBRARY.search(op)):
            return "library"
        if opcode == "fusion":
            return _FUSION_KINDS.get(info.fusion_kind or "", "fusion")
        if _COLLECTIVE.match(opcode):
            return "collective"
        return _OPCODE_CATEGORY.get(opcode, "other")
    base = _base_name(op)
    if _LIBRARY.search(base):
        return "library"
    if _COLLECTIVE.match(base):
        return "collective"
    if base in ("custom-call", "custom_call"):
        return "custom_call"
    if base in _OPCODE_CATEGORY:
        return _OPCODE_CATEGORY[base]
    if base in _JAX_NAME_CATEGORY:
        return _JAX_NAME_CATEGORY[base]
    if "fusion" in base or base.startswith("wrapped_"):  # XLA CPU wraps a lone op in a kLoop fusion "wrapped_<op>"
        return "fusion"
    return "other"


@dataclass
class OpEvent:
    """One execution of an op: its module and HLO instruction, start and end (ns, the trace's clock)."""

    module: str
    op: str
    start: float
    end: float
    children: float = 0.0


def _span(event: Any, stats: Mapping[str, Any]) -> tuple[float, float]:
    """The event's time; with device timing stats (both, as xprof requires) its duration is the device's."""
    start = float(event.start_ns)
    duration, offset = stats.get("device_duration_ps"), stats.get("device_offset_ps")
    if isinstance(duration, int | float) and isinstance(offset, int | float):
        return start, start + float(duration) / 1000.0
    return start, start + float(event.duration_ns)


def _contains(outer: OpEvent, inner: OpEvent) -> bool:
    return outer.start - _EPSILON_NS <= inner.start and inner.end <= outer.end + _EPSILON_NS


def _nest(events: list[OpEvent]) -> None:
    """Charge each event's time to the innermost event on the same line that contains it."""
    events.sort(key=lambda e: (e.start, -e.end))
    open_: list[OpEvent] = []
    for event in events:
        while open_ and not _contains(open_[-1], event):
            open_.pop()
        if open_:
            open_[-1].children += event.end - event.start
        open_.append(event)


@dataclass(frozen=True)
class OpLine:
    """The op events of one line of a plane (the timeline draws a line as a track; the op table nests them)."""

    plane: str
    name: str
    events: list[OpEvent]


def _host_lines(planes: Iterable[Any]) -> list[OpLine]:
    """Op events of the host plane, by line. Most host events are not ops, but whether one carries ``hlo_op``
    can only be learned from its own stats (ProfileData exposes no metadata id, and stats are per event), so every
    event's stats are read, the cheapest way the binding allows: one ``dict()`` over its iterator, inline."""
    lines = []
    for plane in planes:
        if plane.name != HOST_PLANE:
            continue
        for line in plane.lines:
            found = []
            for event in line.events:
                try:
                    stats = dict(event.stats)
                except (TypeError, ValueError):  # as _stats: unreadable stats are none
                    continue
                if "hlo_op" in stats and "hlo_module" in stats:
                    start, end = _span(event, stats)
                    found.append(OpEvent(str(stats["hlo_module"]), str(stats["hlo_op"]), start, end))
            if found:
                lines.append(OpLine(str(plane.name), str(line.name), found))
    return lines


def _device_lines(plane: Any) -> list[OpLine]:
    lines = list(plane.lines)
    modules = []
    for line in lines:
        if line.name == MODULE_LINE:
            for event in line.events:
                start, end = _span(event, _stats(event))
                match = _MODULE_EVENT.match(str(event.name))
                modules.append((start, end, match.group(1) if match else str(event.name)))
    modules.sort()
    starts = [m[0] for m in modules]

    def module_of(start: float, end: float) -> str:
        # executions of modules on one line do not overlap: only the last one to start before the op can hold it
        i = bisect.bisect_right(starts, start + _EPSILON_NS) - 1
        return modules[i][2] if i >= 0 and end <= modules[i][1] + _EPSILON_NS else UNKNOWN_MODULE

    has_ops_line = any(line.name == OPS_LINE for line in lines)
    found_lines = []
    for line in lines:
        if line.name == MODULE_LINE or (has_ops_line and line.name != OPS_LINE):
            continue
        found = []
        for event in line.events:
            stats = _stats(event)
            if has_ops_line:
                op = str(event.name)
            elif "hlo_op" in stats:
                op = str(stats["hlo_op"]).split("::")[-1]
                if op.startswith(COMMAND_BUFFER):
                    # The kernels XLA recorded into a CUDA graph all carry the command buffer's thunk as their op;
                    # each kernel is named after its fusion (LLVM's spelling: input_reduce_fusion_1), which says
                    # more (an H200 trace of an unfused layernorm: 15 kernels, one "command_buffer_1").
                    op = str(event.name)
            else:
                continue
            start, end = _span(event, stats)
            module = str(stats["hlo_module"]) if "hlo_module" in stats else module_of(start, end)
            found.append(OpEvent(module, op, start, end))
        if found:
            found_lines.append(OpLine(str(plane.name), str(line.name), found))
    return found_lines


def op_lines(profile: Any) -> tuple[str, list[OpLine]]:
    """Where op time comes from (``device``: the first device plane; ``host``: the host plane's op events) and
    those op events, by line, as the op table counts them. A TraceParseError where the trace has neither."""
    planes = list(profile.planes)
    devices = _device_planes(planes)
    if devices:
        return "device", _device_lines(devices[0])
    lines = _host_lines(planes)
    if not lines:
        names = ", ".join(str(p.name) for p in planes) or "none"
        raise TraceParseError(f"the trace has neither a device plane nor host op events (hlo_op and hlo_module "
                              f"stats on {HOST_PLANE}); planes: {names}")
    return "host", lines


def _aggregate(lines: list[OpLine]) -> dict[tuple[str, str], list[float]]:
    table: dict[tuple[str, str], list[float]] = {}
    for line in lines:
        events = line.events
        _nest(events)  # (sets each event's children: once per op_lines call)
        for e in events:
            row = table.setdefault((e.module, e.op), [0, 0.0, 0.0])
            row[0] += 1
            row[1] += e.end - e.start
            row[2] += e.end - e.start - e.children
    return table


def xplane_to_op_stats(profile: Any, hlo: Mapping[str, Mapping[str, HloOp]] | None = None, *,
                       count_devices: bool = False) -> list[OpStat]:
    """Per (module, op) statistics, by self time then name. ``hlo`` maps module → op → :class:`HloOp` and
    refines categories; ``count_devices`` also walks the other device planes to count where each op ran."""
    source, lines = op_lines(profile)
    table = _aggregate(lines)
    devices = _device_planes(list(profile.planes)) if count_devices else []
    seen: dict[tuple[str, str], int] = {}
    if count_devices and devices:
        for plane in devices:
            for key in {(e.module, e.op) for line in _device_lines(plane) for e in line.events}:
                seen[key] = seen.get(key, 0) + 1
    if hlo:
        table = _named_as_in_hlo(table, hlo)
    stats = []
    for (module, op), (count, total, self_ns) in table.items():
        info = (hlo or {}).get(module, {}).get(op)
        stats.append(OpStat(module, op, categorize(op, info), int(count), total, self_ns, source,
                            seen.get((module, op)) if count_devices and devices else None))
    return sorted(stats, key=lambda s: (-s.self_ns, s.module, s.op))


def kernel_hlo_names(kernel: str) -> list[str]:
    """The HLO instruction names a GPU kernel's name may spell: LLVM writes ``.`` as ``_`` and numbers the
    kernels of one op ``__1``, ``__2`` (``sort_11_1__2`` is a kernel of ``sort.11.1``, ``input_reduce_fusion_1``
    is ``input_reduce_fusion.1``). The name itself first, then the dotted spellings, longest first."""
    base = _KERNEL_PART.sub("", kernel)
    parts = base.split("_")
    out = [kernel, base]
    for k in range(1, len(parts)):
        if all(p.isdigit() for p in parts[-k:]):
            out.append("_".join(parts[:-k]) + "." + ".".join(parts[-k:]))
    return list(dict.fromkeys(out))


def _named_as_in_hlo(table: dict[tuple[str, str], list[float]],
                     hlo: Mapping[str, Mapping[str, HloOp]]) -> dict[tuple[str, str], list[float]]:
    """Rows renamed to the module's HLO instruction where a kernel's name spells one (``kernel_hlo_names``),
    merged where several kernels are one instruction's."""
    out: dict[tuple[str, str], list[float]] = {}
    for (module, op), row in table.items():
        names = hlo.get(module, {})
        if op not in names:
            op = next((n for n in kernel_hlo_names(op) if n in names), op)
        # A fusion's ROOT stands for the fusion (HloOpInfo.of_fusion; an Instruction has no such attribute).
        of_fusion = getattr(names.get(op), "of_fusion", None)
        if isinstance(of_fusion, str):
            op = of_fusion
        merged = out.setdefault((module, op), [0, 0.0, 0.0])
        for i in range(3):
            merged[i] += row[i]
    return out


def summary(stats: Iterable[OpStat]) -> dict[str, float]:
    """Self time (ns) per category, largest first. Self time, because a while op's total contains its body's."""
    totals: dict[str, float] = {}
    for stat in stats:
        totals[stat.category] = totals.get(stat.category, 0.0) + stat.self_ns
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def parse_xplane_file(path: str | os.PathLike[str], max_bytes: int = MAX_XPLANE_BYTES,
                      hlo: Mapping[str, Mapping[str, HloOp]] | None = None) -> list[OpStat]:
    """Read an ``.xplane.pb`` (at most ``max_bytes``) and convert it; every failure is a TraceParseError."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise TraceParseError(f"{source}: cannot read: {exc}") from exc
    if len(data) > max_bytes:
        raise TraceParseError(f"{source}: larger than the {max_bytes}-byte limit")
    return parse_xplane_bytes(data, source, hlo)


def profile_from_bytes(data: bytes, source: str = "<bytes>", max_bytes: int = MAX_XPLANE_BYTES) -> Any:
    """A serialized XSpace as ProfileData; too large, garbage and truncation are TraceParseErrors."""
    if len(data) > max_bytes:
        raise TraceParseError(f"{source}: larger than the {max_bytes}-byte limit")
    from jax.profiler import ProfileData

    try:
        return ProfileData.from_serialized_xspace(data)
    except Exception as exc:  # the native parser raises RuntimeError today; its types are not documented
        raise TraceParseError(f"{source}: not a readable XSpace: {exc}") from exc


def parse_xplane_bytes(data: bytes, source: str = "<bytes>",
                       hlo: Mapping[str, Mapping[str, HloOp]] | None = None) -> list[OpStat]:
    """A serialized XSpace → op statistics; garbage, truncation and traces without ops are TraceParseErrors."""
    profile = profile_from_bytes(data, source, max_bytes=len(data))
    try:
        return xplane_to_op_stats(profile, hlo)
    except TraceParseError as exc:
        raise TraceParseError(f"{source}: {exc}") from exc
    except (UnicodeDecodeError, OverflowError, ValueError) as exc:
        raise TraceParseError(f"{source}: malformed trace: {exc}") from exc
