"""Profiler trace (an XSpace, as ``jax.profiler.ProfileData``) → the duration of each program execution.

Accelerators: each execution of a compiled module is one event on the device plane's "XLA Modules" line (TPU);
its duration is device time, free of the host's dispatch and of Python. A raw GPU trace has no such line: there
an execution is the span of the kernels launched from inside one host execution, matched through CUPTI's
correlation ids (``gpu_executions``; read off real H200 traces of jax 0.11.2). The first device plane is used:
every device of a single-program run executes the same module.

CPU: there is no device plane; op events on the host plane carry ``run_id`` stats, and one execution spans
from its first op's start to its last op's end.

Works on anything shaped like ProfileData (``.planes`` → ``.name``, ``.lines`` → ``.name``, ``.events`` →
``.start_ns``, ``.duration_ns``, ``.stats``), so it is testable without a profiler session.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

PARSER_VERSION = 2  # 2: GPU traces without an "XLA Modules" line
_DEVICE_PLANE = re.compile(r"^/device:(TPU|GPU):(\d+)$")
MODULE_LINE = "XLA Modules"


class TraceError(ValueError):
    pass


@dataclass(frozen=True)
class Executions:
    source: str  # "device" or "host"
    seconds: list[float]


def _stats(event: Any) -> dict[str, Any]:
    try:
        return dict(event.stats)
    except (TypeError, ValueError):
        return {}


def _device_planes(planes: Iterable[Any]) -> list[Any]:
    found = []
    for plane in planes:
        match = _DEVICE_PLANE.match(str(plane.name))
        if match:
            found.append((int(match.group(2)), plane))
    return [plane for _, plane in sorted(found, key=lambda pair: pair[0])]


def device_executions(planes: Iterable[Any]) -> list[float] | None:
    """Durations (seconds) of module executions on the first device plane, in start order; None if no device.

    A plane with an "XLA Modules" line (TPU traces) has one event per execution. A raw GPU trace has none: its
    device plane holds the kernels and memsets CUPTI saw, one line per stream, each carrying the
    ``correlation_id`` of the host call that launched it (a command buffer's kernels share their graph launch's).
    There an execution is the span of the device work launched from inside one host "Execute" event (the event
    with the ``run_id`` stat), from its first kernel's start to its last one's end (``gpu_executions``)."""
    planes = list(planes)
    devices = _device_planes(planes)
    if not devices:
        return None
    for line in devices[0].lines:
        if line.name == MODULE_LINE:
            events = sorted(line.events, key=lambda e: e.start_ns)
            return [float(e.duration_ns) / 1e9 for e in events]
    found = gpu_executions(devices[0], planes)
    if found is None:
        raise TraceError(f"device plane {devices[0].name} has no '{MODULE_LINE}' line, and no device event there "
                         "can be traced to a host execution (correlation_id to a launch inside a run_id event)")
    return found


def _host_runs(planes: Iterable[Any]) -> tuple[list[float], dict[Any, float]]:
    """The starts of the host's program executions (its events with a ``run_id`` stat), in order, and each
    launch's start by its ``correlation_id``."""
    starts: list[float] = []
    launches: dict[Any, float] = {}
    for plane in planes:
        if not str(plane.name).startswith("/host:"):
            continue
        for line in plane.lines:
            for event in line.events:
                stats = _stats(event)
                if "run_id" in stats and "hlo_op" not in stats:
                    starts.append(float(event.start_ns))
                elif "correlation_id" in stats:
                    launches.setdefault(stats["correlation_id"], float(event.start_ns))
    return sorted(starts), launches


def gpu_executions(device: Any, planes: Iterable[Any]) -> list[float] | None:
    """Per host execution (``_host_runs``), the span of the device events its launches put on ``device``, in
    start order; None when no device event maps to one. A launch outside every execution counts with the one
    that started last before it (work a host thread issued after its Execute event closed)."""
    starts, launches = _host_runs(planes)
    if not starts:
        return None
    spans: dict[int, list[float]] = {}
    for line in device.lines:
        for event in line.events:
            stats = _stats(event)
            launched = launches.get(stats.get("correlation_id"))
            if launched is None:
                continue
            index = bisect.bisect_right(starts, launched) - 1
            if index < 0:
                continue
            start, end = float(event.start_ns), float(event.start_ns) + float(event.duration_ns)
            span = spans.setdefault(index, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
    if not spans:
        return None
    return [(end - start) / 1e9 for start, end in sorted(spans.values())]


def host_executions(planes: Iterable[Any]) -> list[float]:
    """Per ``run_id`` on the host CPU plane: last op end minus first op start, in start order."""
    spans: dict[Any, list[float]] = {}
    for plane in planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            for event in line.events:
                try:  # inline _stats: this loop reads every host event
                    stats = dict(event.stats)
                except (TypeError, ValueError):
                    continue
                if "run_id" not in stats or "hlo_op" not in stats:
                    continue
                start, end = float(event.start_ns), float(event.start_ns) + float(event.duration_ns)
                span = spans.setdefault(stats["run_id"], [start, end])
                span[0], span[1] = min(span[0], start), max(span[1], end)
    return [(end - start) / 1e9 for start, end in sorted(spans.values())]


def xplane_to_executions(profile: Any) -> Executions:
    planes = list(profile.planes)
    on_device = device_executions(planes)
    if on_device is not None:
        return Executions("device", on_device)
    return Executions("host", host_executions(planes))


def per_call(executions: list[float], calls: int) -> list[float]:
    """Fold executions into one time per call: a call may run several programs (k per call, k whole)."""
    if calls <= 0 or not executions or len(executions) % calls:
        raise TraceError(f"{len(executions)} program executions in the trace do not divide into {calls} calls")
    k = len(executions) // calls
    return [sum(executions[i * k : (i + 1) * k]) for i in range(calls)]
