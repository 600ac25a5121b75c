"""How well does `kernelwatch predict` predict? Leave-one-out over parameter sweeps measured on this CPU.

For every family with a sweep: each benchmark's suite grid plus a denser sweep of its size axes (same factories,
same Case counts; the suite's grids have 2-5 points per variant, too few to predict a shape from its neighbours),
each point timed by the harness the runner uses (`runners.harness.measure`: compile apart, warm-up,
block_until_ready) once per round, in-process (``--separate``: a process per round; measure_points). The roofs are
this host's calibration (`runners.calibrate`). Then every point is predicted from the others of its variant (same
benchmark, same dtype/fused flags) two ways:

- model: service.model.predict, the roofline at the shape over the efficiency read between the nearest measured
  shapes (time on a straight line in roofline time; held at the largest's efficiency past it, the first line
  followed below the smallest where it shows a fixed cost), among the shapes at the shape's cache level where any
  were measured; or, where it predicts the variant's other shapes better (each left out in turn), the fitted cost
  a + b x bytes + c x FLOPs (service/model/cost_fit.py). Both ways are also reported alone;
- peer, "flops-scaling": the time of the measured shape nearest in FLOPs, scaled by the FLOP ratio (what one
  writes without a model).

Prints per family the median and 90th-percentile absolute percentage error of each, and peer/model ratios.
Target (issue 20), on every family: model p90 at most half the peer's, and model median no worse than the peer's.

    python bench/model_accuracy.py [--samples 9] [--rounds 3] [--threads 1] [--quick] [--save F | --load F]
        [--separate [--keep-pages]]  # each round in a process of its own [glibc keeping its pages]
        [--shuffle]  # each round in an order of its own (seeded): what ran before a shape differs per round
        [--repeat F2]  # F2: another --save of the same sweeps; prints how far two measurements of a shape disagree

bench/model_sets/ keeps saved sets of the hosts this ran on (``--load bench/model_sets/2026-12-06-epyc-t.json``; an EPYC
(t, u) and an AMX Xeon (v, w)):
a change to the model is judged on every host's measurements, not only this one's.

XLA's CPU thread pool is limited to --threads (default 1): steadier on a shared machine, and the calibration
is made under the same limit, so roofs and measurements agree.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runners.suite import Params, ParamValue  # noqa: E402  (after the path set-up: the bench runs as a script)


def _p(**values: ParamValue) -> Params:
    return dict(values)


# Denser sweeps of each benchmark's size axes (the suite's own grid points are added to these).
SWEEPS: dict[str, list[Params]] = {
    "matmul/matmul_dense": [_p(m=s, n=s, k=s, dtype="float32") for s in (128, 192, 256, 384, 512, 768, 1024)]
    + [_p(m=m, n=512, k=512, dtype="float32") for m in (64, 128, 1024)],
    "matmul/matmul_bf16": [_p(m=s, n=s, k=s) for s in (128, 256, 384, 768)]
    + [_p(m=m, n=1024, k=1024) for m in (4, 64, 256)],
    "softmax/softmax_rows": [_p(rows=r, cols=c) for r in (64, 128, 256, 512, 1024, 2048) for c in (1024, 4096)],
    "norms/rmsnorm": [_p(rows=r, hidden=h, fused=f) for r in (256, 512, 2048) for h in (1024, 4096)
                      for f in (True, False)],
    "norms/layernorm": [_p(rows=r, hidden=h, fused=f) for r in (256, 512, 2048) for h in (1024, 4096)
                        for f in (True, False)],
    # Quantized matmuls against their own dtype's roof (int8 weights dequantized into the activation dtype; fp8
    # operands scaled into float32): decode to prefill rows over two weight sizes.
    "quantized/int8_weight_only": [_p(m=m, k=k, n=1024, act_dtype=a) for m in (1, 4, 16, 64, 256, 1024)
                                   for k in (1024, 2048) for a in ("bfloat16", "float32")],
    "quantized/fp8_per_tensor": [_p(m=m, k=k, n=1024) for m in (1, 4, 16, 64, 256, 1024) for k in (1024, 2048)],
    # Sampling over the vocabulary: where the logits leave the caches is where scaling from a neighbour fails.
    "sampling/topk_exact": [_p(batch=8, vocab=v, k=k, temperature=0.7) for v in (4096, 8192, 16384, 65536)
                            for k in (8, 64)],
    "sampling/topk_approx": [_p(batch=8, vocab=v, k=64, temperature=0.7, recall_target=0.95)
                             for v in (4096, 8192, 16384, 65536)],
    "sampling/topp_sampling": [_p(algorithm="bisect", batch=8, vocab=v, top_p=0.9, temperature=0.7)
                               for v in (4096, 8192, 16384, 65536)],
}
# How leave_one_out predicts: as `kernelwatch predict` does, or one of its two ways alone.
Way = Literal["chosen", "interpolated", "fitted"]
FAMILIES = ("matmul", "norms", "softmax", "quantized", "sampling")
QUICK_KEEP = 6  # --quick: this many points per benchmark (spread over its sweep)


@dataclasses.dataclass(frozen=True)
class Point:
    family: str  # the suite
    variant: str  # suite/name plus its non-numeric params
    params: Params
    flops: float
    bytes_accessed: float
    seconds: float  # the median sample, what the store keeps per result
    best: float  # the fastest sample


def _variant(label: str, spec: Any, params: Params) -> str:
    """A point's variant as `kernelwatch predict` groups them (runners.suite.variant_of)."""
    from runners.suite import variant_of

    flags = variant_of(spec, params)
    return label + ("[" + ",".join(f"{k}={v}" for k, v in sorted(flags.items())) + "]" if flags else "")


@functools.cache
def _specs() -> dict[str, Any]:
    from runners.suite import discover

    return {f"{s.suite}/{s.name}": s for s in discover(ROOT)}


def _variant_now(saved: str, params: Params) -> str:
    """A saved point's variant as the suite groups it now (a --save file keeps the grouping it was measured with)."""
    label = saved.split("[")[0]
    return _variant(label, _specs()[label], params) if label in _specs() else saved


def _planned(quick: bool) -> list[tuple[str, Params]]:
    """Every (benchmark, shape) of the sweeps, each benchmark's suite grid first."""
    specs = _specs()
    planned: list[tuple[str, Params]] = []
    for label, sweep in SWEEPS.items():
        shapes: list[Params] = []
        for p in [*specs[label].grid, *sweep]:
            if dict(p) not in shapes:
                shapes.append(dict(p))
        if quick:
            shapes = shapes[::max(1, len(shapes) // QUICK_KEEP)]
        planned += [(label, params) for params in shapes]
    return planned


def measure_round(planned: Sequence[tuple[str, Params]], samples: int) -> list[tuple[float, float] | None]:
    """Every planned shape timed once in this process: (median sample, fastest sample), None where it failed."""
    from runners.harness import TimingPlan, measure
    from runners.suite import BenchmarkInstance

    plan = TimingPlan(samples=samples, warmup=2, max_seconds=5.0, trace=False)
    found: list[tuple[float, float] | None] = []
    for label, params in planned:
        [timed, *_] = measure(BenchmarkInstance(spec=_specs()[label], params=dict(params)), plan)
        if timed.status != "ok":
            print(f"  FAILED {label} {params}: {timed.message}", file=sys.stderr)
            found.append(None)
            continue
        found.append((statistics.median(timed.samples), min(timed.samples)))
    return found


def _round_apart(planned: Sequence[tuple[str, Params]], samples: int,
                 keep_pages: bool) -> list[tuple[float, float] | None]:
    """:func:`measure_round` in a process of its own (this script with ``--one-round``), glibc keeping its pages
    there where ``keep_pages``."""
    import subprocess
    import tempfile

    from runners.local import KEEP_PAGES_ENV

    with tempfile.TemporaryDirectory() as scratch:
        request, answer = Path(scratch) / "planned.json", Path(scratch) / "measured.json"
        request.write_text(json.dumps({"planned": planned, "samples": samples}))
        # --threads 0: the child keeps the thread limit this process put in the environment it inherits.
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--threads", "0", "--one-round",
                        str(request), str(answer)], check=True,
                       env={**os.environ, **(KEEP_PAGES_ENV if keep_pages else {})})
        return [None if m is None else (m[0], m[1]) for m in json.loads(answer.read_text())]


def measure_points(samples: int, quick: bool, rounds: int, separate: bool = False,
                   keep_pages: bool = False, shuffle: bool = False) -> list[Point]:
    """Every shape measured once per round, rounds one after the other.

    In this process (the default), a shape keeps the lowest of its rounds' medians (and of their fastest samples):
    a load that comes and goes over the minutes of a sweep slows some rounds of a shape, rarely all of them.
    ``shuffle``: each round in an order of its own (seeded by the round's number), so that no shape is always
    measured after the same ones: in one process a shape meets the allocator in the state the shapes before it left
    (bench/README.md, "2026-12-06, fifth": unfused LayerNorm at 1024x4096 took 9.8 ms in the fixed order and
    28.2 ms shuffled, its byte twin 26.6 and 28.3 ms). ``separate``: each round in a process of its own, a
    shape's time the median over the rounds, as `kernelwatch predict` reads a series' median over its runs (each
    run a process). ``keep_pages``: those processes with glibc told to keep the pages it frees (runners/local.py
    KEEP_PAGES_ENV, `kernelwatch run --keep-pages`). How far the three disagree: bench/README.md, "2026-12-06,
    third"."""
    from runners.suite import analytic_cost

    planned = _planned(quick)
    per_round: list[list[tuple[float, float] | None]] = []
    for round_number in range(rounds):
        started = time.perf_counter()
        order = list(range(len(planned)))
        if shuffle:
            random.Random(round_number).shuffle(order)
        ordered = [planned[i] for i in order]
        measured = _round_apart(ordered, samples, keep_pages) if separate else measure_round(ordered, samples)
        in_plan: list[tuple[float, float] | None] = [None] * len(planned)
        for i, m in zip(order, measured, strict=True):
            in_plan[i] = m
        per_round.append(in_plan)
        print(f"  round {round_number + 1}/{rounds}: {len(planned)} shapes in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    points = []
    for i, (label, params) in enumerate(planned):
        found = [m for r in per_round if (m := r[i]) is not None]
        if not found:
            continue
        spec = _specs()[label]
        counts = analytic_cost(spec, params)
        assert counts is not None
        seconds = statistics.median(m for m, _ in found) if separate else min(m for m, _ in found)
        points.append(Point(spec.suite, _variant(label, spec, params), params, counts[0], counts[1], seconds,
                            min(b for _, b in found)))
    return points


def leave_one_out(points: Sequence[Point], host: object, verbose: bool = False, hierarchy: bool = False,
                  cliffs: bool = False, mmap_threshold: int | None = None, across: bool = False,
                  way: Way = "chosen") -> dict[str, tuple[list[float], list[float]]]:
    """Per family: (model errors, peer errors), each |predicted - measured| / measured, over every point whose
    variant has at least one other measured point. Each variant against the roofs `kernelwatch predict` would
    give it on ``host`` (its dtype's compute roof, the memory roof of each shape's working set). ``cliffs``: a
    shape at a cache level none of its variant's other shapes are at is stepped across the cliff by the steps the
    *other* variants take there, its own family's where they were measured across it (service/model/predict.py,
    ``family_cliff_steps``). ``mmap_threshold``: glibc's in the processes that measured (``--keep-pages``), where
    the fresh-pages regime starts (predict.fresh_pages_bytes). ``across``: only the shapes the peer scales across a
    cache cliff (its anchor, the nearest measured shape in FLOPs, at another level of the host's hierarchy), where
    the issue says a model must beat scaling from a neighbour. ``way``: "chosen", what `kernelwatch predict` does
    (predict.estimate_efficiency: the interpolation or the fitted cost, whichever predicts the variant's other shapes
    better, each left out in turn); "interpolated" or "fitted", one of the two alone."""
    from kernelwatch.hardware import Hardware
    from service.model.compute_roof import declared_dtype, params_dtype
    from service.model.predict import (
        Measured,
        Shape,
        estimate_efficiency,
        family_cliff_steps,
        fitted_seconds,
        fresh_pages_bytes,
        interpolate_efficiency,
        nearest_by_flops,
        scale_by_flops,
    )
    from service.pipeline.predictions import roofs_for

    assert isinstance(host, Hardware)
    errors: dict[str, tuple[list[float], list[float]]] = {}
    by_variant: dict[str, list[Point]] = {}
    for p in points:
        by_variant.setdefault(p.variant, []).append(p)
    roofs_of = {v: roofs_for(host, params_dtype(vp[0].params), declared_dtype(vp[0].params) is not None,
                             hierarchy, fresh_pages_bytes(mmap_threshold))[0] for v, vp in by_variant.items()}
    measured_of = {v: [Measured(Shape(o.params, o.flops, o.bytes_accessed), o.seconds) for o in vp]
                   for v, vp in by_variant.items()}
    for variant, variant_points in by_variant.items():
        roofs = roofs_of[variant]
        rest = [(measured_of[v], roofs_of[v], by_variant[v][0].family) for v in by_variant if v != variant]
        family = variant_points[0].family
        steps = family_cliff_steps([(m, r) for m, r, f in rest if f == family],
                                   [(m, r) for m, r, _ in rest]) if cliffs else None
        for left_out in variant_points:
            others = [m for m, o in zip(measured_of[variant], variant_points, strict=True) if o is not left_out]
            if not others:
                continue
            shape = Shape(left_out.params, left_out.flops, left_out.bytes_accessed)
            if across and roofs.level(nearest_by_flops(shape.flops, others).shape.bytes_accessed) == roofs.level(
                    shape.bytes_accessed):
                continue
            if way == "fitted":  # the fitted cost alone, over the shapes at the shape's cache level
                fitted = fitted_seconds(shape.flops, shape.bytes_accessed, others, roofs)
                if fitted is None:
                    continue
                model, basis = fitted, "fitted"
            else:
                estimator = estimate_efficiency if way == "chosen" else interpolate_efficiency
                eff = estimator(shape.flops, shape.bytes_accessed, others, roofs, steps=steps)
                model, basis = roofs.roofline_s(shape.flops, shape.bytes_accessed) / eff.value, eff.basis
            peer = scale_by_flops(shape, others)
            model_errors, peer_errors = errors.setdefault(left_out.family, ([], []))
            model_errors.append(abs(model - left_out.seconds) / left_out.seconds)
            if verbose:
                print(f"  {left_out.variant} {left_out.params}: measured {left_out.seconds * 1e3:.3f} ms, model "
                      f"{model * 1e3:.3f} ms ({basis}, {roofs.bound(shape.flops, shape.bytes_accessed)}), "
                      f"peer {peer * 1e3:.3f} ms")
            peer_errors.append(abs(peer - left_out.seconds) / left_out.seconds)
    return errors


def repeatability(points: Sequence[Point], again: Sequence[Point]) -> dict[str, list[float]]:
    """Per family, |t / t' - 1| both ways for every shape measured in both sets: how far two measurements of the
    same shape on this host disagree. That carries both measurements' noise, about sqrt(2) times one's (where the
    two are independent), so the error a perfect prediction would show against one measurement is about that over
    sqrt(2): what ``main`` prints as the floor."""
    first = {(p.variant, json.dumps(p.params, sort_keys=True)): p.seconds for p in points}
    found: dict[str, list[float]] = {}
    for p in again:
        key = (p.variant, json.dumps(p.params, sort_keys=True))
        if key in first:
            found.setdefault(p.family, []).extend([abs(p.seconds / first[key] - 1), abs(first[key] / p.seconds - 1)])
    return found


def p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _print_table(title: str, errors: dict[str, tuple[list[float], list[float]]]) -> None:
    print("\n" + title)
    print(f"{'family':<9} {'points':>6}  {'model median':>12} {'model p90':>9}  {'peer median':>11} "
          f"{'peer p90':>8}  {'peer/model median':>17} {'p90':>5}  target (p90 <= peer's / 2, median <= peer's)")
    for family in FAMILIES:
        if family not in errors:
            continue
        model, peer = errors[family]
        m_med, m_p90, p_med, p_p90 = statistics.median(model), p90(model), statistics.median(peer), p90(peer)
        verdict = "met" if m_p90 <= p_p90 / 2 and m_med <= p_med else "MISSED"
        print(f"{family:<9} {len(model):>6}  {m_med:>12.1%} {m_p90:>9.1%}  {p_med:>11.1%} {p_p90:>8.1%}  "
              f"{p_med / m_med if m_med else float('inf'):>17.2f} "
              f"{p_p90 / m_p90 if m_p90 else float('inf'):>5.2f}  {verdict}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=3, help="sweeps, one after the other (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="XLA CPU threads (0: XLA's default, all cores)")
    parser.add_argument("--quick", action="store_true", help=f"about {QUICK_KEEP} points per benchmark")
    parser.add_argument("--save", type=Path, default=None, help="write the calibration and measured points here")
    parser.add_argument("--load", type=Path, default=None,
                        help="reuse a --save file instead of measuring (re-evaluates the model only)")
    parser.add_argument("--repeat", type=Path, default=None,
                        help="another --save file of the same sweeps: also print how far the two measurements of "
                             "each shape disagree (the error floor of any prediction)")
    parser.add_argument("--statistic", choices=["median", "best"], default="median",
                        help="each shape's time: its median sample (what the store keeps) or its fastest (steadier "
                             "on a loaded machine)")
    parser.add_argument("--verbose", action="store_true", help="every prediction, not only the summary")
    parser.add_argument("--hierarchy", action="store_true",
                        help="--verbose's predictions against the cache-aware roofs (both are summarised always)")
    parser.add_argument("--separate", action="store_true",
                        help="each round in a process of its own, a shape's time the median over them (measure_points)")
    parser.add_argument("--keep-pages", action="store_true",
                        help="with --separate: glibc keeps the pages it frees in those processes (kernelwatch run "
                             "--keep-pages)")
    parser.add_argument("--shuffle", action="store_true", help="each round in an order of its own (seeded)")
    parser.add_argument("--one-round", nargs=2, type=Path, default=None, help=argparse.SUPPRESS)  # a round's child
    args = parser.parse_args(argv)
    if args.keep_pages and not args.separate:
        parser.error("--keep-pages needs --separate: glibc reads its settings when a process starts")
    if args.threads > 0:
        # PJRT_NPROC sizes XLA:CPU's pool on the jaxlib this project pins (runners/local.py says why the
        # flags alone no longer do); the flags stay for older jaxlibs.
        os.environ["PJRT_NPROC"] = str(args.threads)
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false "
                                   f"intra_op_parallelism_threads={args.threads}").strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if args.one_round is not None:  # a round of measure_points, in a process of its own
        request = json.loads(args.one_round[0].read_text())
        measured = measure_round([(label, params) for label, params in request["planned"]], request["samples"])
        args.one_round[1].write_text(json.dumps(measured))
        return 0

    from kernelwatch.hardware import calibration_from_manifest, host_hardware
    from kernelwatch.memory_hierarchy import format_bytes
    from runners.calibrate import calibrate
    from runners.local import KEEP_PAGES_ENV

    started = time.perf_counter()
    if args.load is not None:
        saved = json.loads(args.load.read_text())
        loaded = calibration_from_manifest(saved["calibration"])
        assert loaded is not None, "the --load file holds no calibration"
        calibration = loaded
        points = [Point(**p) for p in saved["points"]]
        mmap_threshold = saved.get("malloc_mmap_threshold")  # absent from files saved before --keep-pages
        # Grouped again as the suite declares its variants now (a saved file keeps the grouping it was measured with).
        points = [dataclasses.replace(p, variant=_variant_now(p.variant, p.params)) for p in points]
    else:
        calibration = calibrate()  # the runner's calibration, in this process: the same thread limit as the sweep
        mmap_threshold = int(KEEP_PAGES_ENV["MALLOC_MMAP_THRESHOLD_"]) if args.keep_pages else None
    host = host_hardware(calibration)
    rates = ", ".join(f"{k} {v / 1e9:.0f}" for k, v in calibration.flops_by_dtype) or \
        f"{calibration.dtype} {calibration.flops_per_s / 1e9:.0f}"
    levels = " · ".join(f"{lv.name}{f' {format_bytes(lv.capacity_bytes)}' if lv.capacity_bytes else ''} "
                        f"{lv.bytes_per_s / 1e9:.0f}" for lv in host.memory_levels())
    print(f"calibration: matmul GFLOP/s {rates}; memory GB/s {levels}; XLA threads: {args.threads or 'default'}")
    if args.load is None:
        points = measure_points(args.samples, args.quick, args.rounds, args.separate, args.keep_pages,
                                args.shuffle)
    if args.save is not None:
        args.save.write_text(json.dumps({"calibration": calibration.as_manifest(),
                                         "malloc_mmap_threshold": mmap_threshold,
                                         "points": [dataclasses.asdict(p) for p in points]}, indent=1))
    chosen = points if args.statistic == "median" else [dataclasses.replace(p, seconds=p.best) for p in points]
    models: tuple[tuple[bool, bool, Way, str], ...] = (
        (False, True, "chosen", "what `kernelwatch predict` uses: per variant, the interpolation below or the fitted "
                                "cost (a + b x bytes + c x FLOPs), whichever predicts the variant's other shapes "
                                "better"),
        (False, True, "interpolated", "the interpolation alone: one memory roof (DRAM), a shape alone past a cliff "
                                      "stepped across it as the other variants step"),
        (False, True, "fitted", "the fitted cost alone (service/model/cost_fit.py), over the shapes at the shape's "
                                "cache level (a shape with fewer than three there is not counted)"),
        (False, False, "interpolated", "the interpolation, no steps across cliffs (a shape alone past one: the "
                                       "nearest end)"),
        (True, False, "interpolated", "the interpolation against the cache-aware roofs (a memory roof per working "
                                      "set's level)"))
    for hierarchy, cliffs, way, title in models:
        listed = args.verbose and (hierarchy if args.hierarchy else way == "chosen")
        errors = leave_one_out(chosen, host, verbose=listed, hierarchy=hierarchy, cliffs=cliffs,
                               mmap_threshold=mmap_threshold, way=way)
        _print_table("model: " + title, errors)
    _print_table("the model `kernelwatch predict` uses, on the shapes the peer scales across a cache cliff (its "
                 "nearest shape in FLOPs at another level)",
                 leave_one_out(chosen, host, cliffs=True, mmap_threshold=mmap_threshold, across=True))
    if args.repeat is not None:
        again = [Point(**p) for p in json.loads(args.repeat.read_text())["points"]]
        print(f"\nthe same shapes measured again ({args.repeat}): |t / t' - 1|, each way")
        floors = repeatability(points, [dataclasses.replace(p, variant=_variant_now(p.variant, p.params))
                                        for p in again])
        for family in FAMILIES:
            if family in floors:
                median, high = statistics.median(floors[family]), p90(floors[family])
                print(f"{family:<9} {len(floors[family]) // 2:>6}  median {median:.1%}  p90 {high:.1%}  "
                      f"(a perfect prediction against one measurement: about {median / math.sqrt(2):.1%} / "
                      f"{high / math.sqrt(2):.1%})")
    print(f"\ntime of a shape: its {args.statistic} sample; peer: flops-scaling (nearest measured shape in FLOPs, "
          f"time x FLOP ratio); {len(points)} shapes "
          + (f"loaded from {args.load}" if args.load else f"measured, {time.perf_counter() - started:.0f} s in all"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
