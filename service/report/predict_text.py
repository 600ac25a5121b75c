"""`kernelwatch predict`'s table: both shapes' counts, bound and predicted time, side by side. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from service.model.predict import Prediction, ShapeEstimate

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


@dataclass(frozen=True)
class PredictionReport:
    benchmark: str  # suite/name
    hardware: str  # e.g. "TPU v5e (published figures)"
    dtype: str  # whose compute peak the roofline uses
    prediction: Prediction
    measured_shapes: int  # distinct measured shapes of the family on this hardware
    notes: tuple[str, ...] = ()


def si(value: float, unit: str) -> str:
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def seconds(value: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def params_text(params: Mapping[str, object]) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items())


def _efficiency(e: ShapeEstimate) -> str:
    return f"{e.efficiency.value:.1%} ({e.efficiency.basis})"


def _measured(e: ShapeEstimate) -> str:
    return seconds(e.measured_s) if e.measured_s is not None else "-"


def prediction_to_text(report: PredictionReport) -> str:
    p = report.prediction
    roofs = p.roofs
    lines = [f"{report.benchmark} on {report.hardware}",
             f"  roofs: {si(roofs.peak_flops_per_s, 'FLOP/s')} ({report.dtype}), "
             f"{si(roofs.peak_bytes_per_s, 'B/s')}; ridge {roofs.ridge:.3g} FLOP/B; "
             f"{report.measured_shapes} measured shape(s)"]
    rows: list[tuple[str, str, str]] = [
        ("", "from", "to"),
        ("shape", params_text(p.source.shape.params), params_text(p.target.shape.params)),
        ("FLOPs", si(p.source.shape.flops, "FLOP"), si(p.target.shape.flops, "FLOP")),
        ("bytes", si(p.source.shape.bytes_accessed, "B"), si(p.target.shape.bytes_accessed, "B")),
        ("intensity", f"{p.source.shape.intensity:.3g} FLOP/B", f"{p.target.shape.intensity:.3g} FLOP/B"),
        ("bound", p.source.bound, p.target.bound),
        ("roofline time", seconds(p.source.roofline_s), seconds(p.target.roofline_s)),
        ("efficiency", _efficiency(p.source), _efficiency(p.target)),
        ("predicted time", seconds(p.source.predicted_s), seconds(p.target.predicted_s)),
        ("measured time", _measured(p.source), _measured(p.target)),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for label, a, b in rows:
        lines.append(f"  {label:<{widths[0]}}  {a:<{widths[1]}}  {b}".rstrip())
    held_out = p.target.efficiency.held_out or p.source.efficiency.held_out
    if held_out is not None:
        interpolated, fitted = held_out
        chosen = "the fitted cost a + b x bytes + c x FLOPs" if fitted < interpolated else "the interpolation"
        lines.append(f"  efficiency from {chosen}: each measured shape left out in turn, the interpolation erred "
                     f"{interpolated:.1%} and the fitted cost {fitted:.1%}")
    lines.append(f"  predicted change: x{p.ratio:.3g}")
    if p.crossing is not None:
        lines.append(f"  crosses the ridge: {p.crossing}")
    else:
        lines.append(f"  does not cross the ridge: {p.source.bound}-bound at both shapes")
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


def predictions_to_text(reports: Sequence[PredictionReport]) -> str:
    return "\n".join(prediction_to_text(r) for r in reports)
