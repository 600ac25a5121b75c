"""What a shape change will cost: the roofline time at the new shape, divided by the efficiency the kernel family
achieved at the nearest measured shapes.

Pure: counts, roofs and measured times in, a prediction out. The counts come from the benchmark's own analytic
model (runners.suite.analytic_cost), the roofs from the hardware table or the host's calibration, the measured
times from the store; none of that is done here.

Why efficiency and not time: the roofline says how the *work* scales (FLOPs or bytes, whichever roof binds) and
tells when a change crosses the ridge; what it cannot know is how close the kernel gets to its roof, which
depends on size (fixed per-call overheads weigh on small shapes, caches help mid-sized ones) far more than on
anything else. So efficiency, achieved fraction = roofline time / measured time, is what is read between the
measured shapes, along one axis: the roofline time. That axis is a shape's size in units of
the hardware's own speed: it combines FLOPs and bytes through whichever roof binds, so memory- and
compute-bound shapes of a family sit on one line, and on it the overhead-dominated small shapes are on the left
and the near-roof large ones on the right. Between two measured shapes the *time* follows a straight line in the
roofline time, time = a + b x roofline time: a fixed cost per call (dispatch, each op's set-up) plus a cost per unit
of work. The efficiency it implies rises toward the larger shape as the fixed cost weighs less. Before 2026-12-06
the efficiency itself was interpolated, log-linearly in log roofline time; the straight line in time was better or
equal on every family's median in four measurements (bench/model_accuracy.py: quantized 27.1 / 22.7 / 24.0 / 24.0 ->
24.6 / 22.1 / 23.7 / 23.6 %), which is what a fixed cost predicts. Past the largest measured shape the efficiency
is held at the largest's (no extrapolated trend), and below the smallest the first line is followed where it shows
a fixed cost (below). The line runs through each measured size's efficiency after a running median of three over
the measured sizes, which bench/model_accuracy.py found steadier than the raw figures on a loaded CPU host.

On a host whose caches are known (``Roofs.caches``: a calibrated CPU), a kernel's efficiency changes across a
cache cliff far more than any roof says (a fused RMSNorm moves 22 GB/s at 32 MiB of bytes and 3.6 GB/s at 64 MiB
on the host this was measured on, where the calibrated roofs fall 1.5x), so a line drawn across the cliff predicts
neither side. Where measured shapes share the cache level of the predicted shape's working set, only they are
interpolated: a shape past the cliff is predicted from the shapes past it. The
working set a level must hold is half the shape's bytes (``RESIDENT_SHARE``: what a repeated call re-reads of a
streaming kernel that reads as much as it writes; all of the bytes and a quarter were worse).
bench/model_accuracy.py, two measurements: p90 error on matmul 29.5 -> 21.4 % and 34.9 -> 24.1 %, norms
26.2 -> 19.6 % and 34.5 -> 25.2 %, quantized 55.8 -> 45.9 % and 63.8 -> 44.0 %, sampling and softmax unchanged
(softmax's largest shape is alone past the cliff: nothing of its level to learn from).

The steepest of those cliffs was no cache's: glibc serves an allocation of 32 MiB or more from fresh pages on every
call, and a kernel's output that large pays a page fault per 4 KiB (``FRESH_PAGES_BYTES``; softmax of 2048x4096 f32
ran about 3x slower with it than without, bench/fresh_pages.py). A shape whose output is that large is at a level of
its own; where the runs kept their pages (`--keep-pages`), from ``ARENA_MAX_BYTES`` (64 MiB), the largest request a
thread's arena serves (``fresh_pages_bytes``). And a shape alone at its level in its variant (softmax's largest) is
predicted from its variant's nearest level, stepped by how the host's other variants' efficiencies step between
those two levels (``cliff_steps``, the geometric median over the variants measured on both sides: a cliff is the
host's, and every streaming kernel falls off it by a similar factor). The step is the kernel's own family's where
another variant of that family was measured across the same cliff, the host's otherwise (``family_cliff_steps``): a
norm and a top-k fall off one cliff by different factors (on this host's sweeps, the norms' L2 -> L3 steps were
0.55-0.83 while softmax's and the samplers' were 0.9-1.0), and a family's variants share their access pattern.

Below a variant's smallest measured shape, at the cache level of its two smallest shapes, the efficiency is not held
but follows a fixed cost per call (``_fixed_cost``): time = a + b x roofline time through those two shapes, where
that line has a positive intercept (a call's dispatch and its ops' fixed costs, which the smallest shapes pay in a
larger share). Holding the smallest shape's efficiency predicted every sweep's smallest shape 25-45 % fast on this
host (top-k at a 4k vocabulary, 128^3 matmuls). At the large end the efficiency is still held: what lies past the
largest measured shape is a cliff more often than a trend.

Past either end of its level's measured shapes but inside its variant's range (measured shapes of the variant lie
beyond, at another level), a shape follows its level's line, time = a + b x roofline time through the level's two
measured sizes nearest it (``_extrapolated``), where that line gives a positive time and an efficiency no higher
than the roof's; it was held at the end's efficiency before (2026-12-06). The level's own law is known there and
the cliff is known to lie between it and the shapes beyond. Most such shapes are the quantized matmuls at the end
of a cache level, where the work per byte changes with m. bench/model_accuracy.py on three sets (bench/README.md,
2026-12-06, fourth): quantized p90 45.6 -> 26.3, 41.1 -> 27.1 and 30.8 -> 22.8 %, its median no worse; softmax's
p90 20.5 -> 15.6 % on one; matmul's median 5.6 -> 6.5 % on one (the peer's 11.1 %), the rest within 0.4 points.
Without the cap at the roof, matmul's median went 3.6 -> 3.8 % on another (large matmuls' lines climb past the
roof); extending the line past the variant's largest shape as well took it to 5.5 % for nothing elsewhere.

A variant with more than ``COEFFICIENTS`` measured shapes also gets a fitted cost (service/model/cost_fit.py: a fixed
cost plus a cost per byte plus a cost per FLOP, fitted to its shapes at the shape's cache level, since one line cannot
cross a cliff), and :func:`estimate_efficiency`, what `kernelwatch predict` uses, takes whichever of the fit and the
interpolation above predicts the variant's own measured shapes better, each left out in turn. The interpolation's one
axis cannot tell apart two shapes of one roofline time (a 16x1024x1024 matmul on AMX tiles took 1.8x a 256^3 one of
equal FLOPs). bench/model_accuracy.py, bench/README.md "2026-12-06, sixth": matmul's p90 met in three sets of four
where the interpolation alone met it in none.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from kernelwatch.memory_hierarchy import DRAM, BandwidthPoint, CacheLevel, bandwidth_bound, level_of
from service.model.cost_fit import COEFFICIENTS, fit_cost
from service.model.roofline import Bound, ridge_point

ParamValue = str | int | float | bool
EfficiencyBasis = Literal["measured", "interpolated", "extrapolated", "nearest", "fixed cost", "across a cliff",
                          "fitted", "default"]

# What a kernel reaches of its roofline when nothing of its family was measured on the hardware: a round,
# stated guess (well-tuned kernels reach 60-80 %, naive ones 10-30 %), so the prediction is the roofline's
# shape-scaling with a number attached, and says so.
DEFAULT_EFFICIENCY = 0.5
# The share of a shape's bytes that a cache level must hold for the shape to count as at that level (the module's
# note).
RESIDENT_SHARE = 0.5
# glibc's malloc serves a request of DEFAULT_MMAP_THRESHOLD_MAX (32 MiB on 64-bit) or more from freshly mapped
# pages and unmaps them on free, and XLA:CPU allocates each call's output through it: a kernel whose output is that
# large pays a page fault and the kernel's zeroing for every 4 KiB of it, on every call. Measured here
# (bench/fresh_pages.py), softmax of 2048x4096 f32 (a 32 MiB output) took 21.1 ms against 7.1 ms with glibc told to
# keep its pages, and 1536 rows 5.1 ms either way: the "cache cliff" of the CPU sweeps was this one. A shape whose
# output (``RESIDENT_SHARE`` of its bytes) is that large is in a regime of its own (``Roofs.level``), its
# efficiency learned from such shapes.
FRESH_PAGES_BYTES = 32 * 2**20
FRESH_PAGES = "fresh pages"
# A thread's malloc arena is at most this large (glibc's HEAP_MAX_SIZE on 64-bit), so a request this large is mapped
# afresh whatever the mmap threshold says: with glibc told to keep its pages (`kernelwatch run --keep-pages`), the
# fresh-pages regime starts here (bench/fresh_pages.py: a 64 MiB output ran at the same third of its speed both
# ways, a 32-48 MiB one 2.9-3.0x faster with the pages kept).
ARENA_MAX_BYTES = 64 * 2**20


def fresh_pages_bytes(mmap_threshold: int | None) -> float:
    """The output size from which every call's output is mapped afresh, given the benchmark process's glibc mmap
    threshold (the manifest's environment.malloc_mmap_threshold; None where the runner left glibc's dynamic one,
    which rises to at most FRESH_PAGES_BYTES)."""
    if mmap_threshold is None:
        return FRESH_PAGES_BYTES
    return float(min(mmap_threshold, ARENA_MAX_BYTES))


def _positive(name: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def _non_negative(name: str, value: float) -> None:
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")


@dataclass(frozen=True)
class Roofs:
    """The roofs a family is predicted against: one dtype's compute peak, and the memory bandwidth. Given a
    measured hierarchy (``memory_curve``, kernelwatch/memory_hierarchy.py) the bandwidth depends on the shape's
    working set, so a cache cliff is in the roofline time itself; `kernelwatch predict` passes none
    (service/pipeline/predictions.py roofs_for says why: bench/model_accuracy.py measures it worse), the bench
    evaluates both."""

    name: str
    peak_flops_per_s: float
    peak_bytes_per_s: float  # the one memory roof (DRAM, HBM) where there is no curve
    memory_curve: tuple[BandwidthPoint, ...] = ()
    # The host's caches, where known: efficiency is interpolated among shapes at one cache level (module note).
    caches: tuple[CacheLevel, ...] = ()
    # From what output size each call's output comes from fresh pages (:func:`fresh_pages_bytes`: the runs' allocator).
    fresh_pages_bytes: float = FRESH_PAGES_BYTES

    def __post_init__(self) -> None:
        _positive("peak FLOP/s", self.peak_flops_per_s)
        _positive("peak bytes/s", self.peak_bytes_per_s)
        _positive("fresh-pages output size", self.fresh_pages_bytes)

    def bytes_per_s(self, bytes_accessed: float) -> float:
        """The memory roof of a shape that streams ``bytes_accessed`` (its working set)."""
        return bandwidth_bound(self.memory_curve, bytes_accessed) if self.memory_curve else self.peak_bytes_per_s

    @property
    def ridge(self) -> float:
        """The ridge against the one memory roof (DRAM's, on a host with a hierarchy)."""
        return ridge_point(self.peak_flops_per_s, self.peak_bytes_per_s)

    def roofline_s(self, flops: float, bytes_accessed: float) -> float:
        return max(flops / self.peak_flops_per_s, bytes_accessed / self.bytes_per_s(bytes_accessed))

    def level(self, bytes_accessed: float) -> str | None:
        """The cache level that holds a shape's working set (``RESIDENT_SHARE`` of its bytes), marked where its
        output comes from fresh pages (``fresh_pages_bytes``); None where the caches are unknown."""
        if not self.caches:
            return None
        working_set = RESIDENT_SHARE * bytes_accessed
        name = level_of(self.caches, working_set)
        return f"{name}, {FRESH_PAGES}" if working_set >= self.fresh_pages_bytes else name

    def level_order(self) -> list[str]:
        """Every label ``level`` can give, smallest working sets first."""
        labels, below = [], 0.0
        for name, size in [(c.name, float(c.size_bytes)) for c in sorted(self.caches, key=lambda c: c.size_bytes)
                           ] + [(DRAM, math.inf)]:
            if below < self.fresh_pages_bytes:
                labels.append(name)
            if size >= self.fresh_pages_bytes:
                labels.append(f"{name}, {FRESH_PAGES}")
            below = size
        return labels

    def bound(self, flops: float, bytes_accessed: float) -> Bound:
        # As service.model.roofline: exactly at the ridge is compute-bound; the ridge of the shape's own level.
        ridge = ridge_point(self.peak_flops_per_s, self.bytes_per_s(bytes_accessed))
        return "compute" if flops / bytes_accessed >= ridge else "memory"


@dataclass(frozen=True)
class Shape:
    """One point of a family: its parameters and the analytic counts there.

    0 FLOPs is a pure data-movement shape (an all-gather): intensity 0, memory-bound, its roofline time the bytes
    over the bandwidth. Bytes must be positive: a shape that touches no memory has no roofline time."""

    params: Mapping[str, ParamValue]
    flops: float
    bytes_accessed: float

    def __post_init__(self) -> None:
        _non_negative("flops", self.flops)
        _positive("bytes accessed", self.bytes_accessed)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes_accessed


@dataclass(frozen=True)
class Measured:
    """A measured shape: the stored median wall time of its series."""

    shape: Shape
    seconds: float

    def __post_init__(self) -> None:
        _positive("measured time", self.seconds)


def efficiency(point: Measured, roofs: Roofs) -> float:
    """Achieved fraction of the roofline: roofline time over measured time (1.0 on the roof; not clipped)."""
    return roofs.roofline_s(point.shape.flops, point.shape.bytes_accessed) / point.seconds


# held_out_errors: the interpolation's and the fitted cost's error over a family's measured shapes, in that order.
HeldOut = tuple[float, float]


@dataclass(frozen=True)
class EfficiencyEstimate:
    value: float
    basis: EfficiencyBasis
    neighbours: tuple[Measured, ...]  # the measured shapes it came from (none for the default)
    # What the choice between the interpolation and the fitted cost was made on (estimate_efficiency): each one's
    # held-out error over the family's measured shapes, in that order; None where no choice was made.
    held_out: HeldOut | None = None


# How a kernel's efficiency changes from one cache level to another on one host, learned from other variants
# (:func:`cliff_steps`): keyed by (from level, to level), the factor the efficiency is multiplied by.
CliffSteps = Mapping[tuple[str, str], float]


def cliff_steps(variants: Sequence[tuple[Sequence[Measured], Roofs]]) -> dict[tuple[str, str], float]:
    """The efficiency step across each cache cliff of one host, learned from variants measured on both sides of
    it: per variant and pair of adjacent levels it has memory-bound shapes at, the efficiency of its smallest such
    shape at the upper level over that of its largest at the lower (each a median over that size's
    measurements); over the variants, the geometric median. Compute-bound shapes teach no step (their efficiency
    does not fall off a memory cliff; counting them took the norms' p90 error from 17.9 to 21.1 % in one
    measurement, bench/README.md). A shape alone past a cliff in its own variant is then predicted from its
    variant's last shape before the cliff times the step other kernels take there (the module's note)."""
    found: dict[tuple[str, str], list[float]] = {}
    for points, roofs in variants:
        if not roofs.caches or not points:
            continue
        order = roofs.level_order()
        by_level: dict[int, dict[float, list[float]]] = {}
        for p in points:
            if roofs.bound(p.shape.flops, p.shape.bytes_accessed) != "memory":
                continue  # a compute-bound shape's efficiency does not fall off a memory cliff
            level = roofs.level(p.shape.bytes_accessed)
            assert level is not None
            x = roofs.roofline_s(p.shape.flops, p.shape.bytes_accessed)
            by_level.setdefault(order.index(level), {}).setdefault(x, []).append(efficiency(p, roofs))
        present = sorted(by_level)
        for low, high in zip(present, present[1:], strict=False):
            last_below = _median(by_level[low][max(by_level[low])])
            first_above = _median(by_level[high][min(by_level[high])])
            found.setdefault((order[low], order[high]), []).append(first_above / last_below)
    return {key: math.exp(_median([math.log(v) for v in values])) for key, values in found.items()}


def family_cliff_steps(family: Sequence[tuple[Sequence[Measured], Roofs]],
                       host: Sequence[tuple[Sequence[Measured], Roofs]]) -> dict[tuple[str, str], float]:
    """The steps across the host's cliffs (:func:`cliff_steps` over every variant measured on it, ``host``), each
    replaced by the step of the kernel's own ``family`` (its benchmark suite's other variants) where they were
    measured across that cliff: a family's variants share their access pattern and fall off a cliff alike, other
    kernels less so (bench/model_accuracy.py, four measurements: the norms' p90 error 30.6 / 32.3 / 35.1 / 30.5 ->
    30.6 / 25.8 / 26.4 / 17.9 %)."""
    return {**cliff_steps(host), **cliff_steps(family)}


def alone_at_its_level(bytes_accessed: float, points: Sequence[Measured], roofs: Roofs) -> bool:
    """Whether a shape's cache level (``Roofs.level``) has none of the measured ``points`` at it: where
    :func:`interpolate_efficiency` steps across a cliff, given steps (False without caches or points)."""
    level = roofs.level(bytes_accessed)
    return level is not None and bool(points) and all(roofs.level(p.shape.bytes_accessed) != level for p in points)


def _across_cliff(flops: float, bytes_accessed: float, points: Sequence[Measured], roofs: Roofs,
                  steps: CliffSteps) -> EfficiencyEstimate | None:
    """A memory-bound shape at a cache level none of its variant's shapes are at: the variant's end shape on the
    nearest level it has, stepped across the cliff between by ``steps``; None where no step is known for that pair
    (or the shape is compute-bound)."""
    level = roofs.level(bytes_accessed)
    if level is None or roofs.bound(flops, bytes_accessed) != "memory":
        return None  # a compute-bound shape does not fall off a memory cliff (cliff_steps)
    order = roofs.level_order()
    here = order.index(level)
    levels = {order.index(lv) for p in points if (lv := roofs.level(p.shape.bytes_accessed)) is not None}
    if not levels:
        return None
    nearest = min(levels, key=lambda i: (abs(i - here), i))
    key = (order[min(nearest, here)], order[max(nearest, here)])
    if key not in steps:
        return None
    near = [p for p in points if roofs.level(p.shape.bytes_accessed) == order[nearest]]
    end = interpolate_efficiency(flops, bytes_accessed, near, roofs)
    factor = steps[key] if here > nearest else 1 / steps[key]
    return EfficiencyEstimate(end.value * factor, "across a cliff", end.neighbours)


def interpolate_efficiency(flops: float, bytes_accessed: float, points: Sequence[Measured], roofs: Roofs,
                           default: float = DEFAULT_EFFICIENCY,
                           steps: CliffSteps | None = None) -> EfficiencyEstimate:
    """The family's efficiency at a shape, from its measured shapes (see the module docstring): the shape's own
    where it was measured (several measurements at one size: their median); else between the two measured sizes
    around it, on the straight line in time (against roofline time) through their smoothed efficiencies; the
    nearest end's outside them, except below the variant's smallest shape where the two smallest (at the shape's
    level) show a fixed cost per call (:func:`_fixed_cost`); ``default`` with none. With the host's caches known,
    only the measured shapes at the shape's cache level where there are any, that level's line followed past its
    end where the variant has shapes beyond (:func:`_extrapolated`; the module's note).

    Smoothed: each measured size's efficiency is replaced by the median of it and its two neighbours' (a running
    median of three, the ends kept), so one measurement taken while the machine was busy does not bend the curve
    for the shapes around it. A monotone or constant efficiency curve is left exactly as it was."""
    if not points:
        _positive("default efficiency", default)
        return EfficiencyEstimate(default, "default", ())
    if steps and alone_at_its_level(bytes_accessed, points, roofs):
        stepped = _across_cliff(flops, bytes_accessed, points, roofs, steps)
        if stepped is not None:
            return stepped
    level = roofs.level(bytes_accessed)
    same_level = [p for p in points if level is not None and roofs.level(p.shape.bytes_accessed) == level]
    everything, points = points, same_level or points
    x = math.log(roofs.roofline_s(flops, bytes_accessed))
    variant_range = [_log_roofline(p, roofs) for p in everything]
    by_x: dict[float, list[Measured]] = {}
    for p in points:
        by_x.setdefault(_log_roofline(p, roofs), []).append(p)
    xs = sorted(by_x)
    raw = [_median([efficiency(p, roofs) for p in by_x[key]]) for key in xs]

    # Same size within float noise: that shape's own efficiency, unsmoothed.
    for key, value in zip(xs, raw, strict=True):
        if math.isclose(key, x, rel_tol=0.0, abs_tol=1e-9):
            return EfficiencyEstimate(value, "measured", tuple(by_x[key]))
    smoothed = [raw[i] if i in (0, len(raw) - 1) else _median(raw[i - 1:i + 2]) for i in range(len(raw))]
    i = bisect.bisect_left(xs, x)

    def timed(j: int) -> tuple[float, float]:  # a measured size's (roofline time, smoothed time)
        return math.exp(xs[j]), math.exp(xs[j]) / smoothed[j]

    # Below the variant's smallest shape (not only its level's), at the level of the two smallest: a fixed cost.
    below_all = x < min(variant_range)
    if i == 0 and below_all and (level is None or same_level) and len(xs) >= 2:
        fixed = _fixed_cost(math.exp(x), [timed(0), timed(1)])
        if fixed is not None:
            return EfficiencyEstimate(fixed, "fixed cost", tuple(by_x[xs[0]] + by_x[xs[1]]))
    if i == 0 or i == len(xs):
        end = 0 if i == 0 else len(xs) - 1
        # Past its level's end but inside its variant's range: the level's line (the module's note).
        if same_level and len(xs) >= 2 and min(variant_range) < x < max(variant_range):
            pair = (0, 1) if i == 0 else (len(xs) - 2, len(xs) - 1)
            extended = _extrapolated(math.exp(x), timed(pair[0]), timed(pair[1]))
            if extended is not None:
                return EfficiencyEstimate(extended, "extrapolated", tuple(by_x[xs[pair[0]]] + by_x[xs[pair[1]]]))
        return EfficiencyEstimate(smoothed[end], "nearest", tuple(by_x[xs[end]]))
    # Time, not efficiency, is interpolated, linearly in roofline time: a fixed cost per call plus a cost per unit of
    # work, the same law as below the smallest shape (the module's note).
    fixed, slope = _line(timed(i - 1), timed(i))
    r = math.exp(x)
    return EfficiencyEstimate(r / (fixed + slope * r), "interpolated", tuple(by_x[xs[i - 1]] + by_x[xs[i]]))


def _fit_basis(bytes_accessed: float, points: Sequence[Measured], roofs: Roofs) -> list[Measured]:
    """The measured shapes a fit for a shape is made from: those at its cache level, all without known caches."""
    if not roofs.caches:
        return list(points)
    level = roofs.level(bytes_accessed)
    return [p for p in points if roofs.level(p.shape.bytes_accessed) == level]


def fitted_seconds(flops: float, bytes_accessed: float, points: Sequence[Measured], roofs: Roofs) -> float | None:
    """The time service.model.cost_fit's fit gives a shape, fitted to the ``points`` at the shape's cache level where
    the host's caches are known (as the interpolation reads only those: one line through shapes on both sides of a
    cliff predicts neither side); None where there is no fit (too few shapes there), or it gives no positive time or
    one faster than the roof (a roof bounds, as in :func:`_extrapolated`). bench/model_accuracy.py, four sets: fitted
    across levels, a fused RMSNorm past the fresh-pages cliff was predicted at 8.8 ms from the shapes below it and
    took 32.9 ms (bench/README.md, "2026-12-06, sixth")."""
    fit = fit_cost([(p.shape.flops, p.shape.bytes_accessed, p.seconds)
                    for p in _fit_basis(bytes_accessed, points, roofs)])
    seconds = fit.seconds(flops, bytes_accessed) if fit is not None else 0.0
    return seconds if seconds > 0 and seconds >= roofs.roofline_s(flops, bytes_accessed) else None


def _shape_key(point: Measured) -> str:
    return json.dumps(dict(point.shape.params), sort_keys=True, default=str)


def held_out_errors(points: Sequence[Measured], roofs: Roofs, steps: CliffSteps | None = None) -> HeldOut | None:
    """How well each way predicts this family: each measured shape (all its measurements) left out in turn and
    predicted from the rest by :func:`interpolate_efficiency` and by the fitted cost (service/model/cost_fit.py;
    where the rest has no fit at the shape's level, by the interpolation, as :func:`estimate_efficiency` would), the
    trimmed mean |predicted - measured| / measured of each (measured: the shape's median; :func:`_trimmed_mean`).
    None where the family has too few shapes to fit without the one left out."""
    by_shape: dict[str, list[Measured]] = {}
    for p in points:
        by_shape.setdefault(_shape_key(p), []).append(p)
    if len(by_shape) <= COEFFICIENTS:
        return None
    interpolated, fitted = [], []
    for key, held in by_shape.items():
        rest = [p for p in points if _shape_key(p) != key]
        shape, seconds = held[0].shape, _median([p.seconds for p in held])
        roofline = roofs.roofline_s(shape.flops, shape.bytes_accessed)
        by_line = roofline / interpolate_efficiency(shape.flops, shape.bytes_accessed, rest, roofs,
                                                    steps=steps).value
        by_fit = fitted_seconds(shape.flops, shape.bytes_accessed, rest, roofs) or by_line
        interpolated.append(abs(by_line - seconds) / seconds)
        fitted.append(abs(by_fit - seconds) / seconds)
    return _trimmed_mean(interpolated), _trimmed_mean(fitted)


def _trimmed_mean(errors: Sequence[float]) -> float:
    """The mean without the largest tenth (at least the largest one): a shape that neither way predicts, a kernel of
    its own (bf16 matmul at m = 1 ran XLA's matrix-vector kernel, 2.4x the time of m = 4), would otherwise decide
    the choice by itself. bench/model_accuracy.py, set r: with the plain mean the choice flipped for matmul's shapes
    as that one was left out or kept, matmul's p90 48.8 % against 35.3 % with the trim (fits across levels, both)."""
    kept = sorted(errors)[:len(errors) - max(1, len(errors) // 10)]
    return sum(kept) / len(kept)


def estimate_efficiency(flops: float, bytes_accessed: float, points: Sequence[Measured], roofs: Roofs,
                        default: float = DEFAULT_EFFICIENCY, steps: CliffSteps | None = None,
                        errors: Callable[[], HeldOut | None] | None = None) -> EfficiencyEstimate:
    """The efficiency `kernelwatch predict` uses: :func:`interpolate_efficiency`'s, or the fitted cost's
    (:func:`fitted_seconds`: service/model/cost_fit.py over the shapes at the shape's cache level; basis "fitted")
    where that predicts the family's own measured shapes better, each left out in turn (:func:`held_out_errors`,
    trimmed mean relative error). A shape whose counts were measured keeps that shape's efficiency; one that only
    shares its roofline time with a measured shape (equal FLOPs, other bytes, both compute-bound) does not.

    Why choose per family rather than keep one way: each fails where the other holds. On this host's sweeps
    (bench/model_accuracy.py, bench/README.md "2026-12-06, sixth") the fit predicts matmuls on AMX tiles and the
    quantized matmuls far better than the interpolation (whose one axis cannot tell a skinny matmul from a square one
    of equal FLOPs), and the norms worse (their efficiency is not one line even within a level). Which case a family
    is in, its own measured shapes say: the choice is made from them alone, never from the shape being predicted.
    ``errors``: :func:`held_out_errors` of these points, where the caller keeps them for several shapes (predict)."""
    interpolated = interpolate_efficiency(flops, bytes_accessed, points, roofs, default, steps)
    if interpolated.basis == "default" or any(
            math.isclose(p.shape.flops, flops) and math.isclose(p.shape.bytes_accessed, bytes_accessed)
            for p in points):
        return interpolated  # nothing to fit, or a shape of these very counts was measured
    held_out = errors() if errors is not None else held_out_errors(points, roofs, steps)
    if held_out is None:
        return interpolated
    seconds = fitted_seconds(flops, bytes_accessed, points, roofs)
    if held_out[1] >= held_out[0] or seconds is None:
        return replace(interpolated, held_out=held_out)
    return EfficiencyEstimate(roofs.roofline_s(flops, bytes_accessed) / seconds, "fitted",
                              tuple(_fit_basis(bytes_accessed, points, roofs)), held_out)


def _line(first: tuple[float, float], second: tuple[float, float]) -> tuple[float, float]:
    """The line time = a + b x roofline time through two measured sizes ((roofline time, time) each): (a, b)."""
    (r1, t1), (r2, t2) = first, second
    slope = (t2 - t1) / (r2 - r1)
    return t1 - slope * r1, slope


def _log_roofline(point: Measured, roofs: Roofs) -> float:
    return math.log(roofs.roofline_s(point.shape.flops, point.shape.bytes_accessed))


def _extrapolated(roofline_s: float, first: tuple[float, float], second: tuple[float, float]) -> float | None:
    """The efficiency at ``roofline_s`` on the :func:`_line` through two measured sizes' (roofline time, time), past
    them; None where that line has no positive slope, gives no positive time there, or would put the shape above
    its roof (efficiency over 1: a roof bounds)."""
    fixed, slope = _line(first, second)
    time = fixed + slope * roofline_s
    if slope <= 0 or time <= 0 or roofline_s / time > 1:
        return None
    return roofline_s / time


def _fixed_cost(roofline_s: float, smallest: Sequence[tuple[float, float]]) -> float | None:
    """The efficiency at ``roofline_s``, below the two smallest measured sizes ((roofline time, time), smallest
    first), on their :func:`_line`; None where that line has no positive fixed cost a or no positive slope b (the
    efficiency then does not fall toward small shapes: it is held)."""
    fixed, slope = _line(smallest[0], smallest[1])
    if not (fixed > 0 and slope > 0):
        return None
    return roofline_s / (fixed + slope * roofline_s)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True)
class ShapeEstimate:
    shape: Shape
    bound: Bound
    roofline_s: float
    efficiency: EfficiencyEstimate
    measured_s: float | None  # the stored median where this very shape was measured

    @property
    def predicted_s(self) -> float:
        return self.roofline_s / self.efficiency.value


@dataclass(frozen=True)
class Prediction:
    roofs: Roofs
    source: ShapeEstimate
    target: ShapeEstimate

    @property
    def crosses_ridge(self) -> bool:
        return self.source.bound != self.target.bound

    @property
    def crossing(self) -> str | None:
        """"memory-bound → compute-bound" (or the reverse) when the change crosses the ridge, else None."""
        if not self.crosses_ridge:
            return None
        return f"{self.source.bound}-bound → {self.target.bound}-bound"

    @property
    def ratio(self) -> float:
        """Predicted target time over predicted source time."""
        return self.target.predicted_s / self.source.predicted_s


def estimate(shape: Shape, points: Sequence[Measured], roofs: Roofs,
             default: float = DEFAULT_EFFICIENCY, steps: CliffSteps | None = None,
             errors: Callable[[], HeldOut | None] | None = None) -> ShapeEstimate:
    own = [p.seconds for p in points if dict(p.shape.params) == dict(shape.params)]
    measured = sorted(own)[len(own) // 2] if own else None
    return ShapeEstimate(shape=shape, bound=roofs.bound(shape.flops, shape.bytes_accessed),
                         roofline_s=roofs.roofline_s(shape.flops, shape.bytes_accessed),
                         efficiency=estimate_efficiency(shape.flops, shape.bytes_accessed, points, roofs, default,
                                                        steps, errors),
                         measured_s=measured)


def predict(source: Shape, target: Shape, points: Sequence[Measured], roofs: Roofs,
            default: float = DEFAULT_EFFICIENCY, steps: CliffSteps | None = None) -> Prediction:
    """Both shapes' roofline figures and predicted times from the family's measured ``points`` (possibly none:
    then both are the roofline at ``default`` efficiency); ``steps``: the host's :func:`cliff_steps`. The family's
    held-out errors, which both shapes' choice reads, are worked out once, and only where a shape needs them."""
    errors = functools.cache(lambda: held_out_errors(points, roofs, steps))
    return Prediction(roofs, estimate(source, points, roofs, default, steps, errors),
                      estimate(target, points, roofs, default, steps, errors))


def nearest_by_flops(flops: float, points: Sequence[Measured]) -> Measured:
    """The measured shape nearest in log FLOPs (ties: the first): the naive peer's anchor. Needs FLOPs at the
    shape and at every measured one: a pure data-movement family has nothing to scale by."""
    if not points:
        raise ValueError("no measured shapes")
    if flops <= 0 or any(p.shape.flops <= 0 for p in points):
        raise ValueError("scaling by FLOPs needs shapes with FLOPs; a pure data-movement shape has none")
    return min(points, key=lambda p: abs(math.log(p.shape.flops) - math.log(flops)))


def scale_by_flops(target: Shape, points: Sequence[Measured]) -> float:
    """The naive peer: the nearest measured shape's time scaled by the FLOP ratio, no roofline, no efficiency."""
    anchor = nearest_by_flops(target.flops, points)
    return anchor.seconds * target.flops / anchor.shape.flops
