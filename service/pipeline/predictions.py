"""Predictions (`kernelwatch predict` and the dashboard's /model form alike): the time of a kernel family at a new
shape, from its analytic counts, the hardware's roofs and the efficiency measured at its nearest stored shapes
(service/model/predict.py does the arithmetic).

Which benchmarks: ``--kernel`` is a suite ("attention") or one benchmark ("attention/attention_xla"); a suite
answers for each of its benchmarks whose parameters include every one given. A parameter given for one shape
only is the same at the other; one given for neither takes the benchmark's first grid value, and the report says
so. The measured points are the
benchmark's stored wall-time medians with the same non-numeric parameters (dtype, fused, causal...) as the
target: a fused kernel's efficiency says nothing about the unfused one's.

Which hardware: ``--hardware`` names a table chip (tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e, h100, h200) or cpu;
without it, the hardware with the most measured shapes of the family. A chip with no measurements is answered
from its published roofs at DEFAULT_EFFICIENCY, and the report says so. A CPU host's roofs are its calibration,
as its runner stored it with its results (Run.calibration), else measured on this machine now (and said).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwatch.errors import InvalidInput
from kernelwatch.hardware import (
    H100_SXM,
    H200_SXM,
    TPU_V4,
    TPU_V5E,
    TPU_V5P,
    TPU_V6E,
    Calibration,
    Hardware,
    calibration_from_manifest,
    hardware_for,
    host_hardware,
)
from kernelwatch.memory_hierarchy import level_of
from runners.suite import variant_of
from service.model.compute_roof import compute_roof, declared_dtype, params_dtype
from service.model.predict import (
    DEFAULT_EFFICIENCY,
    FRESH_PAGES_BYTES,
    CliffSteps,
    Measured,
    Roofs,
    Shape,
    alone_at_its_level,
    family_cliff_steps,
    fresh_pages_bytes,
    predict,
)
from service.report.predict_text import Bound, PredictionReport
from service.store.family_points import StoredPoint

CPU = "cpu"
CHIPS: dict[str, Hardware] = {"tpu-v4": TPU_V4, "tpu-v5e": TPU_V5E, "tpu-v5p": TPU_V5P, "tpu-v6e": TPU_V6E,
                              "h100": H100_SXM, "h200": H200_SXM}


def hardware_key(backend: str, device_kind: str) -> str:
    """The --hardware name of a stored environment: a table chip's key, "cpu", or backend:device_kind."""
    chip = hardware_for(backend, device_kind)
    for key, entry in CHIPS.items():
        if entry is chip:
            return key
    return CPU if backend.strip().lower() == CPU else f"{backend}:{device_kind}"


# --- parsing and resolving the shapes -----------------------------------------------------------------------


def parse_shape(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InvalidInput(f"shape part {part[:80]!r} is not NAME=VALUE")
        if key.strip() in out:  # which of two values was meant is not ours to guess
            raise InvalidInput(f"shape {text[:200]!r} gives {key.strip()[:80]} twice")
        out[key.strip()] = value.strip()
    if not out:
        raise InvalidInput(f"shape {text!r} names no parameter (NAME=VALUE[,NAME=VALUE])")
    return out


def _coerce(name: str, text: str, like: object) -> str | int | float | bool:
    """A parameter's text as the type its grid values have."""
    try:
        if isinstance(like, bool):
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return lowered in ("true", "1")
        if isinstance(like, int):
            return int(text)
        if isinstance(like, float):
            return float(text)
    except ValueError:
        raise InvalidInput(f"parameter {name}={text[:80]!r} is not a {type(like).__name__}") from None
    return text


@dataclass(frozen=True)
class ResolvedShapes:
    source: dict[str, Any]
    target: dict[str, Any]
    assumed: dict[str, Any]  # parameters given neither in --from nor --to: the grid's first value


def resolve_shapes(grid: Sequence[Mapping[str, Any]], source_text: Mapping[str, str],
                   target_text: Mapping[str, str], label: str) -> ResolvedShapes:
    if not grid:
        raise InvalidInput(f"{label} has no parameter grid")
    first = grid[0]
    for given in (source_text, target_text):
        unknown = sorted(set(given) - set(first))
        if unknown:
            raise InvalidInput(f"unknown parameter(s) {', '.join(unknown)} for {label} (its parameters: "
                               f"{', '.join(first)})")
    source: dict[str, Any] = {}
    target: dict[str, Any] = {}
    assumed: dict[str, Any] = {}
    for name, like in first.items():
        if name in source_text:
            source[name] = _coerce(name, source_text[name], like)
        if name in target_text:
            target[name] = _coerce(name, target_text[name], like)
        if name not in source and name not in target:
            assumed[name] = source[name] = target[name] = like
        source.setdefault(name, target.get(name))
        target.setdefault(name, source[name])
        for shape in (source, target):
            value = shape[name]
            if isinstance(value, int | float) and not isinstance(value, bool) and value <= 0:
                raise InvalidInput(f"parameter {name}={value} must be positive")
    return ResolvedShapes(source, target, assumed)


# --- the roofs ----------------------------------------------------------------------------------------------


def stored_calibration(point: StoredPoint) -> Calibration | None:
    """The host calibration a runner stored with the point's newest calibrated run (manifest
    environment.calibration, kept in Run.calibration), or None."""
    return calibration_from_manifest(point.calibration)


def roofs_for(hardware: Hardware, dtype: str, declared: bool = True, hierarchy: bool = False,
              fresh_pages: float = FRESH_PAGES_BYTES) -> tuple[Roofs, str, list[str]]:
    """The roofs for a dtype, the dtype whose compute peak was used, and what was substituted: the same rule
    as ingest's stored figures (service/model/compute_roof.py), so /model's roof and this table agree.

    One memory roof (DRAM's on a calibrated host) unless ``hierarchy``: bench/model_accuracy.py measures
    predictions against the cache-aware roofs as worse on matmul, norms and quantized (median and p90) and
    better only on the p90 of softmax and sampling (bench/README.md): the kernels' efficiency against a cache
    level's streaming bandwidth moves across levels as much as the roof does, and the interpolation then carries
    one level's efficiency into another's. The bound a result is held to is
    the hierarchy's (service/model/result_roofline.py); the shape-scaling of a prediction is not. The host's
    caches always travel with the roofs: a prediction learns only from shapes at its cache level where any were
    measured (service/model/predict.py). ``fresh_pages``: from what output size the runs' allocator maps every
    call's output afresh (predict.fresh_pages_bytes)."""
    roof = compute_roof(hardware, dtype, declared)
    if roof is None:
        raise InvalidInput(f"{hardware.name} has no published compute peak")
    notes = [f"{hardware.name}: {roof.note}"] if roof.note else []
    curve = hardware.memory_curve if hierarchy else ()
    return (Roofs(hardware.name, roof.peak_flops_per_s, hardware.memory_bytes_per_s, curve, hardware.caches,
                  fresh_pages), roof.used, notes)


def shape_bound(hardware: Hardware, roofs: Roofs, shape: Shape) -> Bound:
    """The roof a result of ``shape`` is held to (service/model/result_roofline.py: the memory roof of the level its
    bytes live in, on a host with a measured hierarchy), with the compute peak the prediction uses. The working
    set is the shape's bytes: XLA's own figure exists only for compiled shapes."""
    level = level_of(hardware.caches, shape.bytes_accessed) if hardware.memory_curve else None
    compute_s = shape.flops / roofs.peak_flops_per_s
    memory_s = shape.bytes_accessed / hardware.memory_roof(shape.bytes_accessed)
    return Bound(max(compute_s, memory_s), level, "compute" if compute_s > memory_s else "memory")


def allocator_regime(points: Sequence[StoredPoint]) -> tuple[float, list[StoredPoint], list[str]]:
    """The fresh-pages output size of the points' runs (predict.fresh_pages_bytes), the points measured under it,
    and a note where some were measured under another: runs that kept glibc's pages (`--keep-pages`) and runs that
    did not time a large output 3x apart (bench/fresh_pages.py), so a family is read from one of the two, the one
    with the most shapes."""
    by_regime: dict[float, list[StoredPoint]] = {}
    for point in points:
        by_regime.setdefault(fresh_pages_bytes(point.malloc_mmap_threshold), []).append(point)
    if not by_regime:
        return FRESH_PAGES_BYTES, [], []
    chosen = max(by_regime, key=lambda k: (len(by_regime[k]), k == FRESH_PAGES_BYTES))
    notes = []
    if len(by_regime) > 1:
        notes.append(f"measured under {len(by_regime)} allocator settings (--keep-pages or not); predicted from the "
                     f"{len(by_regime[chosen])} points whose runs map an output afresh from {chosen / 2**20:.0f} MiB")
    return chosen, by_regime[chosen], notes


def _host(points: Sequence[StoredPoint]) -> tuple[Hardware, list[str]]:
    for point in points:
        calibration = stored_calibration(point)
        if calibration is not None:
            return host_hardware(calibration, "CPU host (stored calibration)"), []
    from runners.calibration_cache import calibration_here

    return host_hardware(calibration_here(), "CPU host (calibrated here)"), [
        "no calibration is stored with these results: the CPU roofs were measured on this machine now; where the "
        "results came from another host, the bound column may be off (predicted times scale the same way)"]


# --- the whole command --------------------------------------------------------------------------------------


def _benchmarks(specs: Iterable[Any], kernel: str) -> list[Any]:
    chosen = [s for s in specs if kernel in (s.suite, f"{s.suite}/{s.name}")]
    if not chosen:
        suites = sorted({s.suite for s in specs})
        raise InvalidInput(f"unknown kernel {kernel!r}: give a suite ({', '.join(suites)}) or SUITE/NAME of the "
                           "suite read (a project's: --suite-root at its checkout)")
    return chosen


def _shown(params: Mapping[str, Any]) -> str:
    """A shape as the user gave it, each value clipped (a 400-digit row count is not echoed whole)."""
    return ",".join(f"{k}={str(v)[:24] + ('...' if len(str(v)) > 24 else '')}" for k, v in params.items())


def _counts(spec: Any, params: Mapping[str, Any]) -> Shape:
    from runners.suite import analytic_cost

    label = f"{spec.suite}/{spec.name}"
    try:
        counts = analytic_cost(spec, params)
    except Exception as exc:  # noqa: BLE001  (the benchmark's own cost code: whatever it raises is its answer)
        # A shape its cost function cannot count (a parameter of the wrong kind, one too large for a float):
        # the user's input, said at the boundary, not a traceback (or, on /model, a 500).
        raise InvalidInput(f"{label} cannot count the shape {_shown(params)}: "
                           f"{type(exc).__name__}: {str(exc)[:200]}") from None
    if counts is None:
        raise InvalidInput(f"{label} has no FLOP and byte model to predict from")
    flops, nbytes = counts
    if not (math.isfinite(flops) and math.isfinite(nbytes)):
        raise InvalidInput(f"{label} counts the shape {_shown(params)} beyond a float's range "
                           f"({flops:g} FLOPs, {nbytes:g} bytes)")
    # Zero FLOPs is pure data movement (an all-gather): memory-bound, still predictable. No bytes is not.
    if flops < 0 or nbytes <= 0:
        raise InvalidInput(f"{label} has no FLOP and byte model to predict from")
    return Shape(dict(params), counts[0], counts[1])


def _measured(spec: Any, points: Sequence[StoredPoint]) -> list[Measured]:
    """The stored points the benchmark's cost model can count (a point of an older grid it cannot: left out)."""
    measured = []
    for point in points:
        try:
            measured.append(Measured(_counts(spec, point.params), point.seconds))
        except InvalidInput:
            continue
    return measured


def _host_variants(specs: Sequence[Any], load_points: Any, chosen: str, hardware: Hardware, fresh_pages: float,
                   loaded: Mapping[str, Sequence[StoredPoint]]) -> list[tuple[str, list[Measured], Roofs]]:
    """Every variant of every benchmark measured on the host, with its suite: what its cliffs' steps are learned
    from (service/model/predict.py, ``family_cliff_steps``: a shape alone past a cliff in its own variant is
    predicted with the step its suite's other variants take there, else the host's; bench/model_accuracy.py:
    softmax's p90 error 39.7 -> 20.3 %), the points of the allocator regime ``fresh_pages`` (allocator_regime).
    ``loaded``: the points already read, by "suite/name" (not read twice)."""
    variants: list[tuple[str, list[Measured], Roofs]] = []
    for spec in specs:
        by_variant: dict[str, list[StoredPoint]] = {}
        label = f"{spec.suite}/{spec.name}"
        stored = loaded[label] if label in loaded else load_points(spec.suite, spec.name)
        for point in stored:
            if (hardware_key(point.backend, point.device_kind) == chosen
                    and fresh_pages_bytes(point.malloc_mmap_threshold) == fresh_pages):
                by_variant.setdefault(json.dumps(variant_of(spec, point.params), sort_keys=True, default=str),
                                      []).append(point)
        for points in by_variant.values():
            roofs = roofs_for(hardware, params_dtype(points[0].params), declared_dtype(points[0].params) is not None,
                              fresh_pages=fresh_pages)[0]
            variants.append((spec.suite, _measured(spec, points), roofs))
    return variants


def predict_reports(specs: Sequence[Any], kernel: str, source_text: str, target_text: str,
                    load_points: Any, hardware_name: str | None) -> list[PredictionReport]:
    """``load_points(suite, name)`` returns the benchmark's StoredPoints (a seam: the database in the command,
    a list in tests)."""
    source_given, target_given = parse_shape(source_text), parse_shape(target_text)
    if hardware_name is not None and hardware_name not in CHIPS and hardware_name != CPU:
        raise InvalidInput(f"unknown hardware {hardware_name!r}: one of {', '.join([*CHIPS, CPU])}")
    candidates = _benchmarks(specs, kernel)
    wanted = set(source_given) | set(target_given)
    fitting = [s for s in candidates if s.grid and wanted <= set(s.grid[0])]
    if not fitting:
        known = "; ".join(f"{s.suite}/{s.name}: {', '.join(s.grid[0]) if s.grid else '-'}" for s in candidates)
        taken = {name for s in candidates if s.grid for name in s.grid[0]}
        unknown = sorted(wanted - taken)
        if unknown:
            raise InvalidInput(f"unknown parameter(s) {', '.join(unknown)} for {kernel} (parameters: {known})")
        raise InvalidInput(f"no benchmark of {kernel} takes all of {', '.join(sorted(wanted))} (parameters: {known})")
    stored_of = {f"{s.suite}/{s.name}": load_points(s.suite, s.name) for s in fitting}
    unmeasured = [label for label, stored in stored_of.items() if not stored]
    skipped: list[str] = []
    if hardware_name is None and 0 < len(unmeasured) < len(fitting):
        # A suite's kernel (`--kernel matmul`) with one benchmark never measured: the others are predicted where
        # they were measured, and the one is named; it refused the whole suite.
        fitting = [s for s in fitting if f"{s.suite}/{s.name}" not in unmeasured]
        skipped = unmeasured
    reports = []
    host_variants: dict[tuple[str, float], list[tuple[str, list[Measured], Roofs]]] = {}
    for spec in fitting:
        label = f"{spec.suite}/{spec.name}"
        shapes = resolve_shapes(spec.grid, source_given, target_given, label)
        notes: list[str] = []
        if shapes.assumed:
            notes.append("not given, so the first grid value: " + ", ".join(f"{k}={v}" for k, v in
                                                                              shapes.assumed.items()))
        if variant_of(spec, shapes.source) != variant_of(spec, shapes.target):
            notes.append("--from and --to differ in a variant parameter; the measured points are the --to variant's")
        stored = stored_of[label]
        if skipped:
            verbs = ("takes", "has") if len(skipped) == 1 else ("take", "have")
            notes.append(f"{', '.join(skipped)} {verbs[0]} these parameters too and {verbs[1]} no stored "
                         "measurements (--hardware predicts from the roofline alone)")
        by_hardware: dict[str, list[StoredPoint]] = {}
        for point in stored:
            by_hardware.setdefault(hardware_key(point.backend, point.device_kind), []).append(point)
        chosen = hardware_name
        if chosen is None:
            if not by_hardware:
                raise InvalidInput(f"{label} has no stored measurements: name a chip with --hardware "
                                   f"({', '.join(CHIPS)}, or cpu: this host's calibration) for a roofline-only "
                                   "prediction")
            chosen = max(by_hardware, key=lambda k: len(by_hardware[k]))
            if len(by_hardware) > 1:
                notes.append(f"measured on {', '.join(sorted(by_hardware))}; {chosen} has the most shapes "
                             "(choose with --hardware)")
        fresh, on_hardware, regime_notes = allocator_regime(by_hardware.get(chosen, []))
        notes += regime_notes
        variant = variant_of(spec, shapes.target)
        family = [p for p in on_hardware if variant_of(spec, p.params) == variant]
        if chosen in CHIPS:
            hardware, described = CHIPS[chosen], f"{CHIPS[chosen].name} (published figures)"
        elif chosen == CPU:
            hardware, host_notes = _host(on_hardware)
            described = hardware.name
            notes += host_notes
        else:
            raise InvalidInput(f"{chosen} is not in the hardware table and is no CPU: no roofs to predict against")
        roofs, used_dtype, dtype_notes = roofs_for(hardware, params_dtype(shapes.target),
                                                   declared_dtype(shapes.target) is not None, fresh_pages=fresh)
        notes += dtype_notes
        measured = _measured(spec, family)
        if not measured:
            flags = ", ".join(f"{k}={v}" for k, v in variant.items())
            # Stored shapes this suite's cost function cannot count are another benchmark's of the same name (another
            # project's, or another version's): said, not read as "nothing measured" (the README's Your repository).
            uncounted = (f"; its {len(on_hardware)} stored shape(s) there are none this suite counts (another "
                         f"project's or another version's benchmark of that name: give --suite-root, the checkout "
                         f"holding the kernels_under_test/ that measured them)"
                         ) if on_hardware and not _measured(spec, on_hardware) else ""
            notes.append(f"no measurements of {label}{f' ({flags})' if flags else ''} on {chosen}: roofline only, "
                         f"at an assumed {DEFAULT_EFFICIENCY:.0%} of it{uncounted}")
        source, target = _counts(spec, shapes.source), _counts(spec, shapes.target)
        # The host's steps are read from every benchmark's stored points: only where a shape's level has none of
        # its own variant's measured shapes (the page and the command stay one query per benchmark otherwise).
        alone = any(alone_at_its_level(s.bytes_accessed, measured, roofs) for s in (source, target))
        steps: CliffSteps | None = None
        if alone:
            if (chosen, fresh) not in host_variants:
                host_variants[chosen, fresh] = _host_variants(specs, load_points, chosen, hardware, fresh,
                                                              {label: stored})
            on_host = host_variants[chosen, fresh]
            steps = family_cliff_steps([(m, r) for suite, m, r in on_host if suite == spec.suite],
                                       [(m, r) for _, m, r in on_host])
        prediction = predict(source, target, measured, roofs, steps=steps)
        for name, shape, estimate in (("--from", source, prediction.source), ("--to", target, prediction.target)):
            if (alone_at_its_level(shape.bytes_accessed, measured, roofs) and estimate.measured_s is None
                    and estimate.efficiency.basis != "across a cliff"):
                # Past a cliff with no step known: the nearest level's efficiency, held, which the cliff makes
                # wrong by as much as it is steep (a 32 MiB softmax output ran about 3x slower): said, not silent.
                notes.append(f"the {name} shape's working set is at {roofs.level(shape.bytes_accessed)}, where no "
                             "shape of this benchmark was measured and no other benchmark shows the step there: its "
                             "efficiency is the nearest measured level's, and a cache or page-fault cliff between "
                             "would make it slower; measure a shape there to know")
        reports.append(PredictionReport(benchmark=label, hardware=described, dtype=used_dtype, prediction=prediction,
                                        measured_shapes=len({json.dumps(m.shape.params, sort_keys=True, default=str)
                                                             for m in measured}),
                                        notes=tuple(notes),
                                        bounds=(shape_bound(hardware, roofs, source), shape_bound(hardware, roofs,
                                                                                                  target))))
    return reports


def default_suite_root() -> Path:
    """The suite that ships beside the service (this checkout's kernels_under_test/)."""
    return Path(__file__).resolve().parents[2]
