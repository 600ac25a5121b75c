"""How healthy the host was while a run measured: CPU steal, busy time and load, and on GPUs clocks and throttling.

A shared VM's hypervisor can take CPU time away from a benchmark ("steal"): the guest's clock keeps running, so
every sample in that stretch reads slower and a change point may be the neighbour, not the kernel. The kernel
counts stolen time per CPU in /proc/stat; two readings, one before a run's first benchmark and one after its last,
give the share of the interval's CPU time that was stolen. A run above HEAVY_STEAL_FRACTION is marked heavy, so
that a verdict resting on such runs can say so.

The parsers and the figures are pure (text in, numbers out); HostSampler is the edge that reads the files and
asks NVML, with the /proc directory injectable so that tests hand it fixture files. NVML (the pynvml module of
nvidia-ml-py) is optional: absent, or present on a host without a GPU, GPU figures are simply left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners.proc_stat import CPU_FIELDS, CpuCounters, parse_proc_stat

# A run whose interval had at least this share of all CPU time stolen is "heavy steal". On the shared 2-core VM this
# was written on, sampled every 10 s for 16 minutes while it was 76 % busy (several people's tests and benchmark
# runs), steal was 133 ticks in 193,479 (0.07 %) and at most 0.45 % in any window; single runs of the demo suite,
# 2 to 5 s each, read up to 2.6 % (a short interval's share rests on a few hundred ticks, so a burst of a dozen
# shows). A host without a noisy neighbour reads ~0 whatever its own load: 5 % is above what this one showed. And
# 5 % of all CPU time is at least 5 % of the time the benchmark wanted to run (an idle CPU has nothing to steal),
# five times the 1 % smallest change detection and compare report (min_effect): steal of that size alone can make
# a flagged change, so a verdict resting on such a run deserves the mark.
HEAVY_STEAL_FRACTION = 0.05

# NVML's clocks-event (throttle) reason bits (nvml.h, nvmlClocksEventReason*), named as people read them.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


@dataclass(frozen=True)
class GpuSample:
    index: int
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    throttle_mask: int | None


@dataclass(frozen=True)
class Snapshot:
    cpu: CpuCounters
    load_1m: float | None  # None: /proc/loadavg could not be read
    gpus: tuple[GpuSample, ...] = ()


def parse_loadavg(text: str) -> float:
    """The 1-minute load average, the first field of /proc/loadavg; ValueError when it is not a number."""
    fields = text.split()
    if not fields:
        raise ValueError("empty /proc/loadavg")
    value = float(fields[0])
    if not value >= 0:  # also refuses NaN
        raise ValueError(f"load average {fields[0]!r} is not a non-negative number")
    return value


def throttle_reason_names(mask: int) -> list[str]:
    """NVML's throttle reasons bitmask as names, lowest bit first; unknown bits as their hex value."""
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_REASONS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return names


def figures(start: Snapshot, end: Snapshot) -> dict[str, Any] | None:
    """The manifest's ``host_health`` for the interval between two snapshots; None when the interval holds no
    CPU time to divide (shorter than a clock tick) or the counters went backwards (a reboot between them)."""
    deltas = {name: getattr(end.cpu, name) - getattr(start.cpu, name) for name in CPU_FIELDS}
    total = sum(deltas.values())
    if total <= 0 or any(d < 0 for d in deltas.values()):
        return None
    # Busy: the guest running something (its own work, the kernel's, interrupts); neither idle nor stolen.
    busy = total - deltas["idle"] - deltas["iowait"] - deltas["steal"]
    health: dict[str, Any] = {
        "steal_fraction": round(deltas["steal"] / total, 6),
        "busy_fraction": round(busy / total, 6),
        "cores": end.cpu.cores,
    }
    if end.load_1m is not None:
        health["load_1m"] = end.load_1m
    if end.gpus:
        # As they stood when the run's last benchmark ended: NVML reports the present, not the interval.
        health["gpus"] = [{
            "index": g.index,
            **({"sm_clock_mhz": g.sm_clock_mhz} if g.sm_clock_mhz is not None else {}),
            **({"mem_clock_mhz": g.mem_clock_mhz} if g.mem_clock_mhz is not None else {}),
            "throttle_reasons": throttle_reason_names(g.throttle_mask) if g.throttle_mask is not None else [],
        } for g in end.gpus]
    return health


def heavy(health: Mapping[str, Any] | None) -> bool:
    """Whether a run's host_health (as the manifest carries it, or as stored) says it ran under heavy steal."""
    if not health:
        return False
    steal = health.get("steal_fraction")
    return isinstance(steal, int | float) and steal >= HEAVY_STEAL_FRACTION


GpuReader = Callable[[], tuple[GpuSample, ...]]


def nvml_reader() -> GpuReader | None:
    """A reader of every GPU's clocks and throttle reasons through NVML; None where NVML is not installed or
    finds no GPU (a CPU host, a container without the driver)."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        count = int(pynvml.nvmlDeviceGetCount())
    except Exception:  # NVMLError and its many subclasses: no driver, no device, no permission
        return None
    if count == 0:
        return None
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) \
        or getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)

    def query(call: Callable[..., Any] | None, *args: Any) -> int | None:
        if call is None:
            return None
        try:
            return int(call(*args))
        except Exception:  # a figure this GPU does not support (NVML_ERROR_NOT_SUPPORTED): that figure only
            return None

    def read() -> tuple[GpuSample, ...]:
        return tuple(GpuSample(index=i,
                               sm_clock_mhz=query(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
                               mem_clock_mhz=query(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM),
                               throttle_mask=query(reasons, h))
                     for i, h in enumerate(handles))

    return read


class HostSampler:
    """Takes snapshots of a host: ``proc`` is its /proc directory (a fixture directory in tests), ``gpus`` reads
    its GPUs (None: none are read). ``for_this_host`` is the runner's: this /proc, and NVML where it works."""

    def __init__(self, proc: Path = Path("/proc"), gpus: GpuReader | None = None) -> None:
        self._proc = proc
        self._gpus = gpus

    @classmethod
    def for_this_host(cls) -> HostSampler:
        return cls(Path("/proc"), nvml_reader())

    def snapshot(self) -> Snapshot | None:
        """Now's counters; None where /proc/stat cannot be read or parsed (macOS, a locked-down container)."""
        try:
            cpu = parse_proc_stat((self._proc / "stat").read_text(errors="replace"))
        except (OSError, ValueError):
            return None
        try:
            load: float | None = parse_loadavg((self._proc / "loadavg").read_text(errors="replace"))
        except (OSError, ValueError):
            load = None
        gpus: tuple[GpuSample, ...] = ()
        if self._gpus is not None:
            try:
                gpus = self._gpus()
            except Exception:  # a GPU gone mid-run (Xid error, reset): the CPU figures still stand
                gpus = ()
        return Snapshot(cpu=cpu, load_1m=load, gpus=gpus)
