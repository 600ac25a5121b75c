"""Where a result sits against its hardware: the roofline for kernels, bus bandwidth for collectives, and a
check of the benchmark's own FLOP and byte counts against XLA's.

The roofline (Williams, Waterman & Patterson, "Roofline: an insightful visual performance model", CACM 2009):
a kernel doing F FLOPs over B bytes of memory traffic cannot finish before max(F / peak FLOP/s, B / peak bytes/s).
Its arithmetic intensity I = F / B against the ridge point peak FLOP/s / peak bytes/s says which term wins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from kernelwatch.hardware import Hardware

Bound = Literal["compute", "memory"]
Collective = Literal["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce"]


def _positive(name: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def ridge_point(peak_flops_per_s: float, peak_bytes_per_s: float) -> float:
    """The intensity (FLOP/byte) at which the memory roof meets the compute roof."""
    _positive("peak FLOP/s", peak_flops_per_s)
    _positive("peak bytes/s", peak_bytes_per_s)
    return peak_flops_per_s / peak_bytes_per_s


@dataclass(frozen=True)
class Roofline:
    flops: float
    bytes_accessed: float
    peak_flops_per_s: float
    peak_bytes_per_s: float
    measured_s: float | None

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes_accessed

    @property
    def ridge(self) -> float:
        return ridge_point(self.peak_flops_per_s, self.peak_bytes_per_s)

    @property
    def bound(self) -> Bound:
        """Exactly at the ridge both roofs give the same time; it is called compute-bound, the roof it has
        reached and cannot move past by saving bytes."""
        return "compute" if self.intensity >= self.ridge else "memory"

    @property
    def compute_s(self) -> float:
        return self.flops / self.peak_flops_per_s

    @property
    def memory_s(self) -> float:
        return self.bytes_accessed / self.peak_bytes_per_s

    @property
    def roofline_s(self) -> float:
        """The fastest this work could run on this hardware: the slower of the two roofs."""
        return max(self.compute_s, self.memory_s)

    @property
    def achieved_fraction(self) -> float | None:
        """Roofline time over measured time: 1.0 is on the roof. Above 1 means the counts or the peaks are
        wrong (bytes that stayed in cache, a peak below what the chip does), which is worth seeing, so it is not
        clipped."""
        if self.measured_s is None:
            return None
        return self.roofline_s / self.measured_s


def roofline(flops: float, bytes_accessed: float, peak_flops_per_s: float, peak_bytes_per_s: float,
             measured_s: float | None = None) -> Roofline:
    """A result's roofline figures from its counts, the peaks, and (optionally) its measured time. Zero FLOPs is
    pure data movement (intensity 0, memory-bound); zero bytes has no intensity and is refused."""
    if not (flops >= 0 and math.isfinite(flops)):
        raise ValueError(f"flops must be a non-negative finite number, got {flops!r}")
    _positive("bytes accessed", bytes_accessed)
    ridge_point(peak_flops_per_s, peak_bytes_per_s)  # validates both peaks
    if measured_s is not None:
        _positive("measured time", measured_s)
    return Roofline(flops, bytes_accessed, peak_flops_per_s, peak_bytes_per_s, measured_s)


def roofline_on(hardware: Hardware, dtype: str, flops: float, bytes_accessed: float,
                measured_s: float | None = None) -> Roofline | None:
    """The roofline against a table entry; None where the hardware publishes no peak for the dtype."""
    peak = hardware.peak_flops(dtype)
    if peak is None:
        return None
    return roofline(flops, bytes_accessed, peak, hardware.memory_bytes_per_s, measured_s)


# nccl-tests doc/PERFORMANCE.md, "Summary": the factor that turns algorithm bandwidth (size / time) into bus
# bandwidth, the per-rank link traffic a perfect algorithm needs, comparable across rank counts and with the
# hardware's unidirectional link bandwidth. All-reduce moves each element 2(n-1) times over n links; reduce-scatter
# and all-gather do half of that; all-to-all sends (n-1)/n of each buffer away; broadcast and reduce are bound by
# the root's single link. S is the whole buffer: for all-gather the gathered output, for reduce-scatter the input.
def bus_factor(collective: Collective, ranks: int) -> float:
    if ranks < 1:
        raise ValueError(f"a collective needs at least one rank, got {ranks}")
    n = ranks
    factors: dict[str, float] = {
        "all-reduce": 2 * (n - 1) / n,
        "reduce-scatter": (n - 1) / n,
        "all-gather": (n - 1) / n,
        "all-to-all": (n - 1) / n,
        "broadcast": 1.0,
        "reduce": 1.0,
    }
    return factors[collective]


@dataclass(frozen=True)
class CollectiveBandwidth:
    collective: Collective
    ranks: int
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    peak_bytes_per_s: float | None  # the interconnect's per-direction figure, where known

    @property
    def fraction_of_peak(self) -> float | None:
        if self.peak_bytes_per_s is None:
            return None
        return self.busbw_bytes_per_s / self.peak_bytes_per_s


def collective_bandwidth(collective: Collective, size_bytes: float, seconds: float, ranks: int,
                         hardware: Hardware | None = None) -> CollectiveBandwidth:
    """algbw = S / t and busbw = algbw × bus_factor, against the interconnect's per-direction peak (nccl-tests
    measures "a unidirectional bandwidth"; NVLink's and ICI's published figures add both directions)."""
    _positive("size", size_bytes)
    _positive("time", seconds)
    algbw = size_bytes / seconds
    link = hardware.interconnect if hardware is not None else None
    return CollectiveBandwidth(collective, ranks, algbw, algbw * bus_factor(collective, ranks),
                               link.per_direction_bytes_per_s if link is not None else None)


# XLA's cost_analysis() keys, as runners/capture.py stores them.
XLA_FLOPS = "flops"
XLA_BYTES = "bytes accessed"


@dataclass(frozen=True)
class CostDisagreement:
    quantity: Literal["flops", "bytes"]
    analytic: float
    xla: float

    @property
    def relative_difference(self) -> float:
        """(XLA − analytic) / analytic: +0.5 means XLA counts half as much again as the benchmark does."""
        return (self.xla - self.analytic) / self.analytic


def cost_disagreements(analytic_flops: float | None, analytic_bytes: float | None, xla_cost: Mapping[str, float],
                       tolerance: float = 0.1) -> list[CostDisagreement]:
    """Where the benchmark's own counts and XLA's cost analysis differ by more than ``tolerance`` (relative to the
    benchmark's). They legitimately differ (XLA counts a fused op's bytes once, counts transcendentals apart, and
    may count a padded shape), so a disagreement is shown, not corrected; a count missing on either side, or
    not positive, is no disagreement."""
    if tolerance < 0:
        raise ValueError(f"tolerance must not be negative, got {tolerance}")
    pairs: list[tuple[Literal["flops", "bytes"], float | None, float | None]] = [
        ("flops", analytic_flops, xla_cost.get(XLA_FLOPS)), ("bytes", analytic_bytes, xla_cost.get(XLA_BYTES))]
    found = []
    for quantity, analytic, xla in pairs:
        if analytic is None or xla is None or analytic <= 0 or xla < 0:
            continue
        disagreement = CostDisagreement(quantity, analytic, xla)
        if abs(disagreement.relative_difference) > tolerance:
            found.append(disagreement)
    return found
