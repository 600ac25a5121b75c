"""A result's roofline columns and its derived efficiency result, as ingest stores them: the manifest's records
in, row values and derived records out. The figures themselves are service/model/result_roofline.py's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelwatch.hardware import Hardware, calibration_from_manifest
from kernelwatch.memory_hierarchy import working_set
from service.contract import BenchmarkResult, EnvironmentInfo
from service.model.compute_roof import declared_dtype, params_dtype
from service.model.result_roofline import (
    EFFICIENCY_METRIC,
    RooflineFigures,
    efficiency_samples,
    result_figures,
    run_hardware,
)

ROOFLINE_COLUMNS = ("roofline_intensity", "roofline_bound", "roofline_s", "roofline_fraction", "roofline_above",
                    "roofline_peak_flops_per_s", "roofline_peak_bytes_per_s", "roofline_peak_source")
ROOFLINE_METRIC = "wall_time"  # the measured time a roofline is drawn against


def run_roof(env: EnvironmentInfo) -> Hardware | None:
    """The hardware a run's results are measured against: published figures, else the run's calibration."""
    c = env.calibration
    return run_hardware(env.backend, env.device_kind,
                        calibration_from_manifest(c.model_dump()) if c is not None else None)


def roofline_figures(hardware: Hardware | None, r: BenchmarkResult, median: float | None) -> RooflineFigures | None:
    if hardware is None or r.status != "ok" or r.metric != ROOFLINE_METRIC:
        return None
    held = working_set(r.bytes_accessed, r.cost) if r.bytes_accessed is not None else None
    return result_figures(hardware, params_dtype(r.params), r.flops, r.bytes_accessed, median,
                          dtype_declared=declared_dtype(r.params) is not None, working_set_bytes=held)


DEVICE_METRIC = "device_time"  # the kernels' own span per call, from the trace, where the run recorded it


def roofline_times(results: Sequence[BenchmarkResult],
                   medians: Sequence[float | None]) -> list[tuple[float | None, list[float]]]:
    """Per result, the median and samples its roofline is drawn against: its own, except where the run also
    recorded the benchmark's device time (accelerators), which is then the time the hardware spent. On an H200 a
    call's wall time was 70-260 us of which the kernels took 4-100 us (the rest Python's dispatch and the wait):
    against the wall time every kernel read a few percent of its roof."""
    device = {(r.suite, r.name, r.params_key()): (median, list(r.samples))
              for r, median in zip(results, medians, strict=True)
              if r.metric == DEVICE_METRIC and r.status == "ok" and median is not None}
    return [device.get((r.suite, r.name, r.params_key()), (median, list(r.samples)))
            if r.metric == ROOFLINE_METRIC else (median, list(r.samples))
            for r, median in zip(results, medians, strict=True)]


def roofline_columns(figures: RooflineFigures | None) -> dict[str, Any]:
    if figures is None:
        return dict.fromkeys(ROOFLINE_COLUMNS)
    return dict(roofline_intensity=figures.intensity, roofline_bound=figures.bound, roofline_s=figures.roofline_s,
                roofline_fraction=figures.achieved_fraction,
                roofline_above=figures.above if figures.achieved_fraction is not None else None,
                roofline_peak_flops_per_s=figures.peak_flops_per_s,
                roofline_peak_bytes_per_s=figures.peak_bytes_per_s, roofline_peak_source=figures.peak_source)


def efficiency_results(hardware: Hardware | None, results: Sequence[BenchmarkResult],
                       figures: Sequence[RooflineFigures | None],
                       times: Sequence[Sequence[float]]) -> list[BenchmarkResult]:
    """A derived result per result with figures against a published roof: the same benchmark's
    ``roofline_fraction``, one sample per measured sample. Stored as a series of its own, so detection, grouping
    and alerts treat efficiency as they treat time, with no special case on the read path. Not derived where the
    runner reported that metric itself (the runner's figure stands).

    None against a calibrated roof: it is one run's measurement and moves from run to run by more than the
    regressions looked for (several-fold on a loaded host), so a series of time over it would report the
    calibration's noise as findings. Those results keep their stored figures. ``times``: per result, the samples
    its figures were drawn against (``roofline_times``)."""
    if hardware is None or hardware.measured:
        return []
    reported = {(r.suite, r.name, r.params_key()) for r in results if r.metric == EFFICIENCY_METRIC}
    derived = []
    for r, f, measured in zip(results, figures, times, strict=True):
        if f is None or (r.suite, r.name, r.params_key()) in reported:
            continue
        samples = efficiency_samples(f.roofline_s, measured)
        if samples:
            # model_copy skips validation: these values are derived from validated ones.
            derived.append(r.model_copy(update=dict(
                metric=EFFICIENCY_METRIC, unit="1", direction="higher_is_better", samples=samples, message=None,
                compile_time_s=None, flops=None, bytes_accessed=None, max_abs_error=None, artifacts=[], cost={})))
    return derived
