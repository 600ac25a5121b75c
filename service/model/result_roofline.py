"""One stored result's roofline figures, and its efficiency samples: what ingest computes once per result so that
pages and detection read them rather than compute them.

Pure: a result's counts, its dtype and its measured times in; figures out. Which hardware a run is measured
against is ``run_hardware``: the published table where the chip is in it, else the run's own calibration, else
none (and then the result has no figures, rather than another chip's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kernelwatch.hardware import Calibration, Hardware, hardware_for, host_hardware
from kernelwatch.memory_hierarchy import format_bytes, level_of
from service.model.compute_roof import compute_roof
from service.model.roofline import Bound, roofline

# The metric of the derived efficiency series (roofline time over measured time: 1.0 is on the roof). Ingest
# derives it against published roofs only (service/pipeline/ingest.py says why).
EFFICIENCY_METRIC = "roofline_fraction"


# A roof is an upper bound: a result measured faster than its roof allows says the roof is wrong for it (a
# calibration that missed a cache level, a published peak for another dtype, counts XLA over-stated), not that
# the kernel beat the hardware. Within this much it is the measurement's own spread (a best-of-N calibration
# against a median), past it a defect ingest flags and the pages name instead of a fraction over 100 %. 10 %, not
# the 5 % it was: on a shared 2-core host the samples of one run spread 3-9 % (bench/verdict_calibration.py) and
# a calibration measured in a noisy minute sits that much low, and the demo's CI run of 2026-12-04 had a result at
# 105.3 % of its L3 roof. A tolerance from each result's own spread would be tighter where the host is quiet.
ABOVE_ROOF_TOLERANCE = 0.10


def above_roof(achieved_fraction: float | None) -> bool:
    return achieved_fraction is not None and achieved_fraction > 1.0 + ABOVE_ROOF_TOLERANCE


def on_roof(achieved_fraction: float | None) -> bool:
    """Past the roof by no more than its measurement noise: shown as on the roof, never as a figure over 100 %."""
    return achieved_fraction is not None and 1.0 < achieved_fraction and not above_roof(achieved_fraction)


def roof_fraction_text(achieved_fraction: float | None, decimals: int = 0, above: str = "above the roof",
                       sep: str = "") -> str:
    """An achieved fraction of a roof as every face shows it: a percentage up to 100 %; "on the roof" past it within
    ABOVE_ROOF_TOLERANCE (the roof's measurement noise: 109 % read as a kernel beating the host); ``above`` past
    that (the roof's defect). Never a figure over 100 % as fact. Below 1 %, two significant digits; ``sep`` before
    the % sign (the pages' " %", the tables' and titles' none)."""
    if achieved_fraction is None or not math.isfinite(achieved_fraction):
        return "–"
    if above_roof(achieved_fraction):
        return above
    if on_roof(achieved_fraction):
        return "on the roof"
    percent = achieved_fraction * 100
    return f"{percent:.{decimals}f}{sep}%" if percent >= 0.995 else f"{percent:.2g}{sep}%"


@dataclass(frozen=True)
class RooflineFigures:
    intensity: float  # FLOP per byte
    bound: Bound
    roofline_s: float  # the fastest the work could run on the roof's hardware
    achieved_fraction: float | None  # roofline_s over the median measured time; None without a positive median
    peak_flops_per_s: float
    peak_bytes_per_s: float
    peak_source: str  # which hardware, dtype and source the peaks are, in words for the result page

    @property
    def above(self) -> bool:
        """The measured time beats this roof's bound: the roof does not bound the result."""
        return above_roof(self.achieved_fraction)


def run_hardware(backend: str, device_kind: str, calibration: Calibration | None) -> Hardware | None:
    """Published figures first: a datasheet is the same for every run, a calibration is one run's measurement."""
    published = hardware_for(backend, device_kind)
    if published is not None:
        return published
    if calibration is None or not (calibration.flops_per_s > 0 and calibration.bytes_per_s > 0):
        return None
    return host_hardware(calibration)


def result_figures(hardware: Hardware, dtype: str, flops: float | None, bytes_accessed: float | None,
                   median_s: float | None, dtype_declared: bool = True,
                   working_set_bytes: float | None = None) -> RooflineFigures | None:
    """A result's figures against ``hardware`` for work in ``dtype`` (service/model/compute_roof.py picks the
    peak); None where its counts are missing, negative or no bytes, or the hardware gives no compute roof. Zero
    FLOPs is pure data movement (an all-gather): intensity 0, memory-bound."""
    if flops is None or bytes_accessed is None or flops < 0 or bytes_accessed <= 0:
        return None
    roof = compute_roof(hardware, dtype, dtype_declared)
    if roof is None:
        return None
    # The memory roof of the result's working set (kernelwatch/memory_hierarchy.py working_set; its bytes
    # accessed where none is given): on a host with a measured hierarchy, the level its data lives in, else the
    # one memory bandwidth.
    held = working_set_bytes if working_set_bytes is not None and working_set_bytes > 0 else bytes_accessed
    bandwidth = hardware.memory_roof(held)
    figures = roofline(flops, bytes_accessed, roof.peak_flops_per_s, bandwidth,
                       median_s if median_s is not None and median_s > 0 else None)
    origin = "calibrated on this host" if hardware.measured else hardware.source
    stand_in = f" in place of {roof.requested}" if roof.used != roof.requested else ""
    # The calibration's curve at the working set, not the level's drawn roof (the curve at the middle of the level):
    # "L3 bandwidth" beside a different L3 line on /model read as a contradiction.
    level = (f", the bandwidth measured at a {format_bytes(held)} working set (in "
             f"{level_of(hardware.caches, held)})" if hardware.memory_curve else "")
    return RooflineFigures(
        intensity=figures.intensity, bound=figures.bound, roofline_s=figures.roofline_s,
        achieved_fraction=figures.achieved_fraction, peak_flops_per_s=roof.peak_flops_per_s,
        peak_bytes_per_s=bandwidth,
        peak_source=f"{hardware.name}, {roof.used} peak{stand_in}{level} ({origin})")


def efficiency_samples(roofline_s: float, samples: Sequence[float]) -> list[float]:
    """Each measured time as a fraction of the roof, sample by sample, so that the efficiency series carries the
    measurement's own spread and the detector weighs its steps exactly as it weighs the time's. A zero time
    (a timer's resolution) has no fraction and is left out."""
    return [roofline_s / t for t in samples if t > 0]
