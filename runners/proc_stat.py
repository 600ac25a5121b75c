"""/proc/stat's aggregate CPU counters: the host's busy, idle and stolen time. Standard library alone, for the
benchmark process (the calibration waits on it: runners/calibrate.py) and the runner's host health alike."""

from __future__ import annotations

from dataclasses import dataclass

# The aggregate line's fields, in the kernel's order (proc(5)). guest and guest_nice follow but are already counted
# in user and nice, so they are not read: adding them would count guest time twice.
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuCounters:
    """The aggregate ``cpu`` line of /proc/stat: cumulative time of all CPUs since boot, in clock ticks."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int
    cores: int  # the cpuN lines beside it: the CPUs the counters add up

    @property
    def total(self) -> int:
        return self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal


def parse_proc_stat(text: str) -> CpuCounters:
    """The aggregate counters of /proc/stat's text; ValueError when there is no well-formed ``cpu`` line.

    Old kernels end the line before steal (added in 2.6.11); missing trailing fields read as 0."""
    aggregate: list[str] | None = None
    cores = 0
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "cpu":
            aggregate = fields[1:]
        elif fields[0].startswith("cpu") and fields[0][3:].isdigit():
            cores += 1
    if aggregate is None:
        raise ValueError("no aggregate 'cpu' line in /proc/stat")
    if len(aggregate) < 4 or not all(f.isdigit() for f in aggregate[:len(CPU_FIELDS)]):
        raise ValueError(f"malformed aggregate 'cpu' line in /proc/stat: {' '.join(aggregate)[:200]!r}")
    values = [int(f) for f in aggregate[:len(CPU_FIELDS)]]
    values += [0] * (len(CPU_FIELDS) - len(values))
    return CpuCounters(**dict(zip(CPU_FIELDS, values, strict=True)), cores=max(cores, 1))
