"""`kernelwatch predict`'s table: both shapes' counts, bound and predicted time, side by side. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from service.model.predict import Prediction, ShapeEstimate
from service.model.result_roofline import roof_fraction_text

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


@dataclass(frozen=True)
class PredictionReport:
    benchmark: str  # suite/name
    hardware: str  # e.g. "TPU v5e (published figures)"
    dtype: str  # whose compute peak the roofline uses
    prediction: Prediction
    measured_shapes: int  # distinct measured shapes of the family on this hardware
    notes: tuple[str, ...] = ()
    # Each shape's roof as a result of that shape is held to (its memory level's bandwidth on a host with a measured
    # hierarchy: service/model/result_roofline.py), and that level's name: the prediction scales between shapes on
    # the one memory roof of ``prediction.roofs`` (service/pipeline/predictions.py roofs_for says why), which the
    # table does not show as a bound. None: the model's own roofline time (one memory roof, no levels).
    bounds: tuple[Bound, Bound] | None = None


@dataclass(frozen=True)
class Bound:
    roofline_s: float
    level: str | None  # the memory level whose bandwidth bounds it; None with one memory roof
    kind: str  # "memory" or "compute": which of the two roofs is the lower at this shape


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


def _roofline(e: ShapeEstimate, bound: Bound | None) -> str:
    if bound is None:
        return seconds(e.roofline_s)
    return seconds(bound.roofline_s) + (f" ({bound.level})" if bound.level else "")


def _of_roof(e: ShapeEstimate, bound: Bound | None) -> str:
    """The predicted time's fraction of the shape's roof (as a result page would show the measured one), and how
    the model read the time: measured, interpolated, fitted..."""
    fraction = (bound.roofline_s if bound else e.roofline_s) / e.predicted_s
    return f"{roof_fraction_text(fraction, decimals=1)} ({e.efficiency.basis})"


def _measured(e: ShapeEstimate) -> str:
    return seconds(e.measured_s) if e.measured_s is not None else "-"


def prediction_to_text(report: PredictionReport) -> str:
    p = report.prediction
    roofs = p.roofs
    source_bound, target_bound = report.bounds or (None, None)
    by_level = any(b.level for b in report.bounds or ())
    dram = si(roofs.peak_bytes_per_s, 'B/s')
    memory, against = ((f"memory by level (each shape's below), DRAM {dram}", " against DRAM") if by_level
                       else (dram, ""))
    lines = [f"{report.benchmark} on {report.hardware}",
             f"  roofs: {si(roofs.peak_flops_per_s, 'FLOP/s')} ({report.dtype}), {memory}; ridge{against} "
             f"{roofs.ridge:.3g} FLOP/B; {report.measured_shapes} measured shape(s)"]
    rows: list[tuple[str, str, str]] = [
        ("", "from", "to"),
        ("shape", params_text(p.source.shape.params), params_text(p.target.shape.params)),
        ("FLOPs", si(p.source.shape.flops, "FLOP"), si(p.target.shape.flops, "FLOP")),
        ("bytes", si(p.source.shape.bytes_accessed, "B"), si(p.target.shape.bytes_accessed, "B")),
        ("intensity", f"{p.source.shape.intensity:.3g} FLOP/B", f"{p.target.shape.intensity:.3g} FLOP/B"),
        ("bound", source_bound.kind if source_bound else p.source.bound,
         target_bound.kind if target_bound else p.target.bound),
        ("roofline time", _roofline(p.source, source_bound), _roofline(p.target, target_bound)),
        ("of the roof", _of_roof(p.source, source_bound), _of_roof(p.target, target_bound)),
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
    before, after = ((source_bound.kind, target_bound.kind) if source_bound and target_bound
                     else (p.source.bound, p.target.bound))
    if before != after:
        lines.append(f"  crosses the ridge: {before}-bound → {after}-bound")
    else:
        lines.append(f"  does not cross the ridge: {before}-bound at both shapes")
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


def predictions_to_text(reports: Sequence[PredictionReport]) -> str:
    return "\n".join(prediction_to_text(r) for r in reports)
