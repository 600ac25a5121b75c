"""`kernelwatch calibrate`'s text: a host's kept calibrations, each as the roofs it gives (matmul rates per dtype,
one memory roof per level of the hierarchy). Pure: calibrations in, text out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from kernelwatch.hardware import Calibration, host_hardware
from kernelwatch.memory_hierarchy import format_bytes


def calibration_lines(key: str, calibration: Calibration, kept_at: float | None) -> list[str]:
    when = (f", kept {datetime.fromtimestamp(kept_at, UTC):%Y-%m-%d %H:%M} UTC" if kept_at else "")
    lines = [f"calibration {key}{when}"]
    rates = dict(calibration.flops_by_dtype) or {calibration.dtype: calibration.flops_per_s}
    lines.append("  matmul:  " + ", ".join(f"{dtype} {rate / 1e9:,.0f} GFLOP/s" for dtype, rate in rates.items()))
    for level in host_hardware(calibration).memory_levels():
        size = f" ({format_bytes(level.capacity_bytes)})" if level.capacity_bytes else ""
        lines.append(f"  {level.name + size:<16} {level.bytes_per_s / 1e9:>8,.1f} GB/s")
    if calibration.bandwidth:
        curve = ", ".join(f"{format_bytes(p.working_set_bytes)} {p.bytes_per_s / 1e9:.0f}"
                          for p in calibration.bandwidth)
        lines.append(f"  measured GB/s by working set: {curve}")
    if calibration.measured_busy:
        lines.append("  provisional: measured while the host stayed busy, so its roofs may sit low; later runs "
                     "measure it again (a few times) and keep the faster figures, as does `kernelwatch calibrate "
                     "--measure` on a quiet host")
    return lines


def calibrations_text(path: str, kept: Sequence[tuple[str, Calibration, float | None]],
                      facts: Mapping[str, str] | None = None) -> str:
    if not kept:
        return (f"No calibration is kept in {path}: a CPU runner measures its host at its first run there (or run "
                "`kernelwatch calibrate --measure`).\n")
    lines = [f"{len(kept)} calibration(s) kept in {path} (one per host and environment):"]
    for key, calibration, kept_at in kept:
        lines += ["", *calibration_lines(key, calibration, kept_at)]
    for name, value in (facts or {}).items():
        lines.append(f"{name}: {value}")
    return "\n".join(lines) + "\n"
