"""How fast do the two bulk parsers read large artifacts? Against the floor of merely reading the same data.

Issue 4 asks that parsing stay "within 3x of the floor". Two inputs, made here:

  * an xplane of at least ``--events`` events, from ``jax.profiler.trace`` around a loop of many small jitted calls
    on this machine's CPU. Parse: ``xplane_to_op_stats.parse_xplane_bytes``. Floor: the protobuf decode,
    ``jax.profiler.ProfileData.from_serialized_xspace`` plus one walk over every event's name, start and duration;
  * a form-A LLO listing (FORMATS.md "TPU LLO": one bundle a line, ops separated by ';') of ``--bundles`` bundles,
    generated with a VLIW slot mix (scalar, vector ALU, vector load/store, MXU push/matmul/pop on four units, XLU,
    EUP, DMA, a few spills) in loops whose last bundle branches back. Parse: ``llo_to_bundles.parse_llo`` on the
    text. Floor: ``text.splitlines()``; the time to read the file (from the page cache: it was just written) is
    printed too.

Prints sizes (bytes, events, bundles), seconds (best of ``--repeat``; the LLO parse once at full size), the ratio
parse/floor, records per second, the parse's peak RSS growth, and whether the 3x target is met. A parse that misses
it is profiled briefly (cProfile, top 10 functions by own time, on a small input) so that the time has a place;
for the xplane, a walk that also reads every event's stats (which the parser must, to find ``hlo_op``) is shown.
Should the LLO parse of ``--bundles`` be predicted (from a 20,000-bundle run) to take over 5 minutes, the listing
is cut to the size predicted to take about 2 minutes, and the output says so. cProfile runs with the garbage collector
paused (its pauses would be charged to whichever call allocates); the collector's share is printed apart.

    python bench/parse_throughput.py [--events 100000] [--bundles 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import glob
import io
import math
import pstats
import random
import resource
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.profiler import ProfileData

from runners.parsers.llo_to_bundles import DEFAULT_MAX_BYTES, parse_llo
from runners.parsers.xplane_to_op_stats import parse_xplane_bytes

TARGET = 3.0
LLO_CALIBRATION = 20_000
LLO_MAX_SECONDS, LLO_CUT_SECONDS = 300.0, 120.0
PROFILE_TOP = 10


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Fastest of ``repeat`` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    return min(times), result


def _peak_rss_kb() -> int:
    """Peak RSS since the last reset (VmHWM), or of the process life where the peak cannot be reset."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _current_rss_kb() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_growth_mb(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(seconds, MiB the peak RSS rose above the RSS at the start, result) of one run of ``fn``."""
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS (Linux >= 4.0)
    except OSError:
        pass
    before = _current_rss_kb()
    began = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - began
    return seconds, max(0, _peak_rss_kb() - before) / 1024, result


def top_functions(fn: Callable[[], Any]) -> list[str]:
    """cProfile's top functions by own time, with the garbage collector paused: with it on, each of its pauses is
    charged to whichever call happened to allocate, which names the wrong place."""
    profiler = cProfile.Profile()
    gc.disable()
    try:
        profiler.runcall(fn)
    finally:
        gc.enable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(PROFILE_TOP)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
    return [line.replace(str(Path.cwd()) + "/", "") for line in lines[start : start + PROFILE_TOP + 1]]


def verdict(ratio: float) -> str:
    return f"met ({ratio:.1f}x <= {TARGET:.0f}x)" if ratio <= TARGET else f"NOT met ({ratio:.1f}x > {TARGET:.0f}x)"


# --- xplane ---------------------------------------------------------------------------------------------------------


def chain(x: Any) -> Any:
    return jnp.tanh(jnp.exp(x) * 2.0 + 1.0)


def softmax(x: Any) -> Any:
    return jax.nn.softmax(x, axis=-1)


def loop(x: Any) -> Any:
    return jax.lax.fori_loop(0, 3, lambda i, v: jnp.tanh(v) * 1.5 + jnp.sin(v).sum(), x)


def capture(directory: Path, calls: int) -> bytes:
    x = np.ones((8, 128), np.float32)
    functions = [jax.jit(f) for f in (chain, softmax, loop)]
    for f in functions:  # compile outside the trace
        f(x).block_until_ready()
    with jax.profiler.trace(str(directory)):
        for _ in range(calls):
            for f in functions:
                f(x).block_until_ready()
    (path,) = glob.glob(str(directory / "plugins" / "profile" / "*" / "*.xplane.pb"))
    return Path(path).read_bytes()


def walk(data: bytes, with_stats: bool = False) -> int:
    """The floor: decode, then touch every event's name, start and duration once (and its stats, if asked)."""
    events = 0
    for plane in ProfileData.from_serialized_xspace(data).planes:
        for line in plane.lines:
            for event in line.events:
                event.name, event.start_ns, event.duration_ns  # noqa: B018 (reading is the point)
                if with_stats:
                    dict(event.stats)
                events += 1
    return events


def bench_xplane(args: argparse.Namespace, work: Path) -> bool:
    trial = walk(capture(work / "calibrate", 50)) / 50  # events per round of three calls, on this jax
    rounds = math.ceil(args.events / trial * 1.05)
    began = time.perf_counter()
    data = capture(work / "trace", rounds)
    made = time.perf_counter() - began
    floor, events = best(lambda: walk(data), args.repeat)
    decode, _ = best(lambda: ProfileData.from_serialized_xspace(data), args.repeat)
    with_stats, _ = best(lambda: walk(data, with_stats=True), args.repeat)
    parse, stats = best(lambda: parse_xplane_bytes(data, "bench.xplane.pb"), args.repeat)
    _, growth, _ = peak_growth_mb(lambda: parse_xplane_bytes(data, "bench.xplane.pb"))
    ops = sum(s.occurrences for s in stats)
    print(f"xplane: {rounds:,} rounds of 3 jitted calls traced in {made:.1f} s: {len(data) / 1e6:.1f} MB, "
          f"{events:,} events ({ops:,} op executions in {len(stats)} (module, op) records)")
    rows = [
        ("decode only (from_serialized_xspace)", decode, None),
        ("floor: decode + walk of name/start/duration", floor, None),
        ("(not the floor) walk reading every event's stats", with_stats, with_stats / floor),
        ("parse_xplane_bytes", parse, parse / floor),
    ]
    for name, seconds, ratio in rows:
        ratio_text = f"{ratio:>6.2f}x" if ratio is not None else f"{'':>7}"
        print(f"  {name:<50} {seconds:>8.3f} s {ratio_text}  {events / seconds / 1e6:>6.2f} M events/s")
    print(f"  parse peak RSS growth {growth:.0f} MiB; target within {TARGET:.0f}x of the floor: "
          f"{verdict(parse / floor)}")
    if parse / floor > TARGET:
        print(f"  cProfile of one parse, top {PROFILE_TOP} functions by own time:")
        for line in top_functions(lambda: parse_xplane_bytes(data, "bench.xplane.pb")):
            print(f"    {line}")
    return parse / floor <= TARGET


# --- LLO listing ----------------------------------------------------------------------------------------------------

# (family, templates); {r} {a} {b} registers, {u} unit, {p} predicate, {m} address, {i} immediate
SLOTS: list[tuple[str, float, int, list[str]]] = [  # family, chance a bundle has it, at most, op templates
    ("scalar", 0.70, 2, ["s{r} = sadd.s32 s{a}, {i}", "s{r} = smul.u32 s{a}, s{b}", "p{p} = scmp.lt.s32 s{a}, {i}",
                         "s{r} = smov {i}", "s{r} = sshll.u32 s{a}, 4", "s{r} = sld [smem:$0x{m:x}]"]),
    ("vector_load", 0.50, 2, ["v{r} = vld.8x128 [vmem:$0x{m:x}]", "v{r} = vld.8x128 [vmem:s{a}+$0x{m:x}] sm:$0xff"]),
    ("vector_alu", 0.60, 3, ["v{r} = vadd.8x128.f32 v{a}, v{b}", "v{r} = vmul.8x128.f32 v{a}, v{b}",
                             "v{r} = vmax.f32 v{a}, v{b}", "v{r} = vsel vm{p}, v{a}, v{b}",
                             "vm{p} = vcmp.gt.f32 v{a}, v{b}"]),
    ("mxu", 0.30, 2, ["(mxu{u}) = vmatpush.bf16 v{a}", "(mrf{u}) = vmatmul.8x128.bf16 v{a}",
                      "v{r} = vpop.8x128 (mrf{u})"]),
    ("vector_store", 0.30, 1, ["[vmem:$0x{m:x}] = vst.8x128 v{a}", "[vmem:s{a}+$0x{m:x}] = vst.msk.8x128 vm{p}, v{b}"]),
    ("xlu", 0.08, 1, ["v{r} = vxpose.8x128 v{a}", "v{r} = vrot.slane v{a}, 3", "v{r} = vpop (trf{u})"]),
    ("eup", 0.10, 1, ["v{r} = vexp.f32 v{a}", "v{r} = vrcp.f32 v{a}", "v{r} = vtanh.f32 v{a}", "v{r} = vpop (erf0)"]),
    ("dma", 0.01, 1, ["dma.hbm_to_vmem s{a}, 128, [vmem:$0x{m:x}]"]),
    ("spill", 0.01, 1, ["[vmem:$0x1f00] = vst.spill v{a}", "v{r} = vld.spill [vmem:$0x1f00]"]),
]


def listing_lines(bundles: int, seed: int) -> Iterator[str]:
    """Lines of one program: a header, then loops of 4-64 bundles (70 % end with a backward branch)."""
    rng = random.Random(seed)
    yield "$region0: #{fusion.bench}"
    yield "#allocation0 [shape = 'f32[8,128]{1,0}', space=vmem, size = 0x1000, scoped, tag = 'spill slot']"
    address = 0
    while address < bundles:
        body = min(rng.randint(4, 64), bundles - address)
        back = rng.random() < 0.7
        start = address
        for position in range(body):
            ops = []
            for _, chance, most, templates in SLOTS:
                for _ in range(most):
                    if rng.random() < chance:
                        ops.append(rng.choice(templates).format(
                            r=rng.randrange(32), a=rng.randrange(32), b=rng.randrange(32), u=rng.randrange(4),
                            p=rng.randrange(8), m=rng.randrange(0x10000) & ~0x7F, i=rng.randrange(256)))
            if position == body - 1 and back and body > 1:
                ops.append(f"(pc) = sbr.rel @p{rng.randrange(8)} $-{address - start}")
            elif rng.random() < 0.01:
                ops.append(f"(pc) = sbr.rel @p{rng.randrange(8)} $+{rng.randint(1, 4)}")
            yield f"{address} : {{{';  '.join(ops)}}}"
            address += 1


def write_listing(path: Path, bundles: int, seed: int) -> None:
    with open(path, "w") as handle:
        chunk: list[str] = []
        for line in listing_lines(bundles, seed):
            chunk.append(line)
            if len(chunk) == 10_000:
                handle.write("\n".join(chunk) + "\n")
                chunk.clear()
        handle.write("\n".join(chunk) + "\n" if chunk else "")


def bench_llo(args: argparse.Namespace, work: Path) -> bool:
    small = work / "calibrate-final_bundles.txt"
    write_listing(small, LLO_CALIBRATION, args.seed)
    small_text = small.read_text()
    calibration, _ = best(lambda: parse_llo(small_text, str(small), "fusion.bench"), 1)
    per_bundle = calibration / LLO_CALIBRATION
    bundles = args.bundles
    note = ""
    if per_bundle * bundles > LLO_MAX_SECONDS:
        cut = int(LLO_CUT_SECONDS / per_bundle) // 1000 * 1000
        note = (f"  NOTE: {bundles:,} bundles were predicted to take {per_bundle * bundles:.0f} s (over "
                f"{LLO_MAX_SECONDS:.0f} s, from {LLO_CALIBRATION:,} bundles in {calibration:.2f} s); cut to "
                f"{cut:,}, predicted {per_bundle * cut:.0f} s")
        bundles = cut
    path = work / "bench-final_bundles.txt"
    began = time.perf_counter()
    write_listing(path, bundles, args.seed)
    made = time.perf_counter() - began
    read, text = best(path.read_text, args.repeat)
    floor, lines = best(text.splitlines, args.repeat)
    line_count = len(lines)
    del lines
    parse, growth, programs = peak_growth_mb(lambda: parse_llo(text, str(path), "fusion.bench"))
    (program,) = programs
    size = len(text.encode())
    del programs
    print(f"\nLLO form A: {program.bundle_count:,} bundles, {program.op_count:,} ops, {len(program.loops):,} loops, "
          f"{line_count:,} lines, {size / 1e6:.1f} MB, generated in {made:.1f} s")
    if note:
        print(note)
    if size > DEFAULT_MAX_BYTES:
        print(f"  (over parse_llo_file's default cap of {DEFAULT_MAX_BYTES >> 20} MiB: the text is given to parse_llo)")
    rows = [("read the file (read_text, page cache)", read, None), ("floor: text.splitlines()", floor, None),
            ("parse_llo", parse, parse / floor)]
    for name, seconds, ratio in rows:
        ratio_text = f"{ratio:>8.1f}x" if ratio is not None else f"{'':>9}"
        print(f"  {name:<50} {seconds:>8.3f} s {ratio_text}  {bundles / seconds / 1e6:>7.3f} M bundles/s")
    print(f"  parse peak RSS growth {growth:,.0f} MiB ({growth * 1024 / bundles:.2f} KiB per bundle); parse/(read + "
          f"floor) {parse / (read + floor):.1f}x")
    print(f"  target within {TARGET:.0f}x of the floor: {verdict(parse / floor)}")
    if parse / floor > TARGET:
        gc.disable()
        try:
            paused, _ = best(lambda: parse_llo(small_text, str(small), "fusion.bench"), 1)
        finally:
            gc.enable()
        print(f"  at {LLO_CALIBRATION:,} bundles: {calibration:.2f} s with the garbage collector on, {paused:.2f} s "
              f"with it paused (the collector takes {1 - paused / calibration:.0%})")
        print(f"  cProfile of parse_llo on {LLO_CALIBRATION:,} bundles (collector paused), top {PROFILE_TOP} "
              f"functions by own time:")
        for line in top_functions(lambda: parse_llo(small_text, str(small), "fusion.bench")):
            print(f"    {line}")
    return parse / floor <= TARGET


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000, help="xplane events, at least")
    parser.add_argument("--bundles", type=int, default=1_000_000, help="LLO bundles")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each timing but the full LLO parse")
    parser.add_argument("--seed", type=int, default=0, help="of the generated listing")
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.default_backend()}; times are the best of {args.repeat}\n")
    with tempfile.TemporaryDirectory(prefix="kw-throughput-") as work:
        xplane_met = bench_xplane(args, Path(work))
        llo_met = bench_llo(args, Path(work))
    print(f"\nwithin {TARGET:.0f}x of the floor: xplane {'yes' if xplane_met else 'NO'}, "
          f"LLO {'yes' if llo_met else 'NO'}")


if __name__ == "__main__":
    main()
