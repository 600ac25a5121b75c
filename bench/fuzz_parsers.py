"""Do the artifact parsers keep their contract on hostile input? Mutated real captures and random bytes.

FORMATS.md promises that every parser meets hostile input with a typed parse error naming the file, "never a crash,
a hang, or unbounded memory". This feeds each parser N inputs, through ``by_kind.parse`` (bytes in, the entry the
CLI and the service use) and, for xprof's bundle_util JSON, through ``parse_bundle_util_file``, and sorts every
outcome against that contract:

  * typed error: the parser's own error class, or a ParseFailure that wraps it (or refuses non-UTF-8 bytes);
  * accepted: a summary comes back (and ``json.dumps`` takes it);
  * FINDING: any other exception, including a ParseFailure wrapping an untyped ValueError; an input taking over
    ``--time-bound`` seconds (confirmed by a second try); peak RSS growing by over ``--memory-bound`` MiB on one
    input; a worker process that dies, stops answering for 10x the time bound (killed) or passes ``--rss-limit``.

Inputs: 10 % purely random bytes, 5 % soup of tokens taken from the seeds, the rest seeds mutated by one to five
stacked operators: bit flips, byte insertions and deletions, chunk duplication, truncation at a random point, line
drops/repeats/swaps, splicing two seeds, interesting integers written over binary fields, and inserted huge numbers,
long tokens (past the 1 MiB line limits), deep or unbalanced brackets and NULs. Seeds are real captures made at
the start by a small JAX run in a subprocess (``XLA_FLAGS=--xla_dump_to=... --xla_dump_hlo_as_text`` for HLO text
and the x86 objects of XLA-generated fusions; ``jax.profiler.trace`` around a few calls for an xplane), and the
synthetic SASS and LLO fixtures of tests/fixtures. Input i of parser P is drawn from ``Random(f"{seed}/{P}/{i}")``
over the seeds, so a run repeats given the same seeds: HLO text and objects are deterministic for a fixed jax, the
xplane holds timestamps, so its mutants vary between runs; a finding's input is saved under /tmp and its path
printed. Each parser runs in a worker process of its own, one at a time. Exit status 1 when any parser has a finding.

    python bench/fuzz_parsers.py [--inputs 10000] [--seed 0] [--time-bound 2] [--parsers hlo,llo]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from runners.parsers.by_kind import ParseFailure, parse
from runners.parsers.hlo_text_to_module import HloParseError
from runners.parsers.llo_to_bundles import LloParseError, parse_bundle_util_file
from runners.parsers.sass_to_kernels import SassParseError
from runners.parsers.x86_obj_to_kernels import X86ObjectError
from runners.parsers.xplane_to_op_stats import TraceParseError

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
MAX_INPUT_BYTES = 8 << 20

# kind → (the parser's own error class, binary format)
TARGETS: dict[str, tuple[type[Exception], bool]] = {
    "hlo": (HloParseError, False),
    "x86-obj": (X86ObjectError, True),
    "xplane": (TraceParseError, True),
    "sass": (SassParseError, False),
    "llo": (LloParseError, False),
    "bundle_util": (LloParseError, False),  # the second reader of llo_to_bundles: xprof's bundle_util JSON
}

SEED_PROGRAM = """
import sys
import jax, jax.numpy as jnp, numpy as np
def chain(x): return jnp.tanh(jnp.exp(x) * 2.0 + 1.0)
def softmax(x): return jax.nn.softmax(x, axis=-1)
def rowsum(x): return jnp.sum(x * x, axis=1)
def loop(x): return jax.lax.fori_loop(0, 3, lambda i, v: jnp.tanh(v) * 1.5 + jnp.sin(v).sum(), x)
def matmul(a, b): return jnp.maximum(a @ b, 0.0)
x = np.ones((64, 256), np.float32)
fs = [jax.jit(f) for f in (chain, softmax, rowsum, loop)]
mm = jax.jit(matmul)
for f in fs:
    f(x).block_until_ready()
mm(x, x.T).block_until_ready()
with jax.profiler.trace(sys.argv[1]):
    for _ in range(3):
        for f in fs:
            f(x).block_until_ready()
        mm(x, x.T).block_until_ready()
with jax.profiler.trace(sys.argv[2]):  # a second, smaller trace: one function
    for _ in range(2):
        fs[3](x).block_until_ready()
"""
# XLA-generated fusions (no XNNPACK/YNNPACK) so that there are object files to read
XLA_FLAGS = "--xla_dump_hlo_as_text --xla_cpu_use_xnnpack=false --xla_cpu_experimental_ynn_fusion_type="


def make_seeds(work: Path) -> dict[str, list[Path]]:
    """Real captures from a small JAX run (in a subprocess: XLA_FLAGS must be set before jax starts), plus the
    synthetic SASS and LLO fixtures."""
    dump, trace = work / "dump", work / "trace"
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_dump_to={dump} {XLA_FLAGS}")
    subprocess.run([sys.executable, "-c", SEED_PROGRAM, str(trace / "a"), str(trace / "b")], env=env, check=True,
                   timeout=600, capture_output=True)
    seeds = {
        "hlo": sorted(dump.glob("*_optimizations.txt")),  # before_optimizations and cpu_after_optimizations
        "x86-obj": sorted(dump.glob("*.o")),
        "xplane": sorted(trace.glob("*/plugins/profile/*/*.xplane.pb")),
        "sass": sorted((FIXTURES / "sass").glob("*.sass")),
        "llo": sorted((FIXTURES / "llo").glob("*.txt")),
        "bundle_util": sorted((FIXTURES / "llo").glob("*.json")),
    }
    for kind, paths in seeds.items():
        if not paths:
            raise SystemExit(f"no {kind} seeds were produced (look in {work})")
    return seeds


# --- mutations ------------------------------------------------------------------------------------------------------

INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
               1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]
TEXT_CHARS = b"0123456789abcdefxsvp%$#@:;,.=+-*/()[]{}<>\"' \t\n"


def _position(rng: random.Random, data: bytes, binary: bool) -> int:
    """Where to mutate: uniform, but binary formats get their header and (ELF) section table end more often."""
    n = len(data)
    if n == 0:
        return 0
    roll = rng.random()
    if binary and roll < 0.3:
        return rng.randrange(min(n, 64))
    if binary and roll < 0.5:
        return rng.randrange(3 * n // 4, n)
    if not binary and roll < 0.3:  # a line start
        starts = [m.end() for m in re.finditer(rb"\n", data[: 1 << 16])]
        return rng.choice(starts) if starts else 0
    return rng.randrange(n + 1)


def bit_flips(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4, 8, 32])):
        at = min(_position(rng, data, binary), len(out) - 1)
        # text: mostly flip one of the low 7 bits of an ASCII byte, so the input stays UTF-8 and goes deeper
        bit = rng.randrange(7) if not binary and out[at] < 0x80 and rng.random() < 0.8 else rng.randrange(8)
        out[at] ^= 1 << bit
    return bytes(out)


def insert_bytes(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    at = _position(rng, data, binary)
    size = rng.choice([1, 1, 2, 4, 16, 256])
    alphabet = None if binary or rng.random() < 0.3 else TEXT_CHARS
    chunk = rng.randbytes(size) if alphabet is None else bytes(rng.choice(alphabet) for _ in range(size))
    return data[:at] + chunk + data[at:]


def delete_bytes(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    at = _position(rng, data, binary)
    return data[:at] + data[at + rng.choice([1, 1, 2, 8, 64, 1024]) :]


def duplicate_chunk(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    if not data:
        return data
    start = rng.randrange(len(data))
    chunk = data[start : start + rng.choice([1, 8, 64, 512, 4096])]
    times = rng.choice([1, 1, 2, 16, 256, 4096])
    times = max(1, min(times, MAX_INPUT_BYTES // 2 // max(1, len(chunk))))
    at = _position(rng, data, binary)
    return data[:at] + chunk * times + data[at:]


def truncate(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def lines(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    """Drop, repeat or swap whole lines (records, for the binary formats: whatever lies between newlines)."""
    parts = data.split(b"\n")
    if len(parts) < 2:
        return data
    i, j = rng.randrange(len(parts)), rng.randrange(len(parts))
    how = rng.randrange(3)
    if how == 0:
        del parts[i]
    elif how == 1:
        parts[i:i] = [parts[i]] * min(rng.choice([1, 2, 100, 10_000]), MAX_INPUT_BYTES // 2 // (len(parts[i]) + 1))
    else:
        parts[i], parts[j] = parts[j], parts[i]
    return b"\n".join(parts)


def splice(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    other = rng.choice(pool)
    return data[: rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1) :]


def interesting_integer(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    """Overwrite a field with a boundary value (1, 2, 4 or 8 bytes little-endian), or insert an over-long varint."""
    if not data:
        return data
    at = min(_position(rng, data, binary), len(data) - 1)
    if rng.random() < 0.2:
        return data[:at] + b"\xff" * rng.choice([9, 10, 11, 64]) + b"\x01" + data[at:]
    width = rng.choice([1, 2, 4, 8])
    value = rng.choice(INTERESTING) & ((1 << (8 * width)) - 1)
    return data[:at] + value.to_bytes(width, "little") + data[at + width :]


def _huge_number(rng: random.Random) -> bytes:
    digits = rng.choice([19, 20, 40, 310, 4301, 100_000])
    return rng.choice([
        b"9" * digits, b"-" + b"9" * digits, b"0x" + b"f" * digits, b"1" + b"0" * digits, b"1e999999",
        str(1 << 64).encode(), str(1 << 63).encode(), b"-1", b"4294967296", b"nan", b"inf", b"-0",
    ])


def huge_number(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    """Replace a number of the text (or insert one) with a huge, negative or odd one."""
    numbers = list(re.finditer(rb"0x[0-9a-fA-F]+|[0-9]+", data[: 1 << 18])) if not binary else []  # linear
    number = _huge_number(rng)
    if numbers and rng.random() < 0.8:
        found = rng.choice(numbers)
        return data[: found.start()] + number + data[found.end() :]
    at = _position(rng, data, binary)
    return data[:at] + number + data[at:]


def long_token(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    unit = rng.choice([b"a", b"%v1", b"/", b" ", b";", b'"', b"=", b",", b"\\", b"x.", b"$", b"%v1, ", b"*/"])
    size = rng.choice([100, 4096, 70_000, (1 << 20) + 1, 1_500_000])
    at = _position(rng, data, binary)
    return data[:at] + unit * (size // len(unit) + 1) + data[at:]


def deep_brackets(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    depth = rng.choice([33, 65, 100, 1000, 10_001, 100_000])
    opener, closer = rng.choice([(b"(", b")"), (b"[", b"]"), (b"{", b"}"), (b"/*", b"*/"), (b"([{", b"}])"),
                                 (b"{[", b"]}"), (b"<", b">")])
    how = rng.randrange(3)
    chunk = opener * depth + (closer * depth if how == 0 else b"" if how == 1 else closer * (depth // 2))
    at = _position(rng, data, binary)
    return data[:at] + chunk + data[at:]


def nuls(rng: random.Random, data: bytes, pool: list[bytes], binary: bool) -> bytes:
    at = _position(rng, data, binary)
    if rng.random() < 0.5 and at < len(data):
        return data[:at] + b"\x00" + data[at + 1 :]
    return data[:at] + b"\x00" * rng.choice([1, 2, 64, 4096]) + data[at:]


MUTATORS: list[Callable[[random.Random, bytes, list[bytes], bool], bytes]] = [
    bit_flips, bit_flips, insert_bytes, delete_bytes, duplicate_chunk, truncate, truncate, lines, splice,
    interesting_integer, huge_number, long_token, deep_brackets, nuls,
]


def _tokens(pool: list[bytes]) -> list[bytes]:
    found: set[bytes] = set()
    for seed in pool:
        found.update(re.findall(rb"[\w.%$#@-]+|[^\w\s]", seed[:20_000]))
    return sorted(found)


def make_input(kind: str, index: int, seed: int, pool: list[bytes], tokens: list[bytes]) -> tuple[bytes, str]:
    """Input ``index`` of ``kind``, a pure function of its arguments (a finding can be regenerated)."""
    rng = random.Random(f"{seed}/{kind}/{index}")
    binary = TARGETS[kind][1]
    roll = rng.random()
    if roll < 0.10:
        size = int(2 ** rng.uniform(0, 16))
        return rng.randbytes(size), f"random bytes ({size})"
    if roll < 0.15:
        separators = [b"", b" ", b"\n", b", "]
        words = [rng.choice(tokens) + rng.choice(separators) for _ in range(int(2 ** rng.uniform(0, 12)))]
        return b"".join(words), f"token soup ({len(words)})"
    which = rng.randrange(len(pool))
    data = pool[which]
    names = []
    for _ in range(min(5, 1 + int(rng.expovariate(1.0)))):
        mutate = rng.choice(MUTATORS)
        data = mutate(rng, data, pool, binary)[:MAX_INPUT_BYTES]
        names.append(mutate.__name__)
    return data, f"seed {which} + {' + '.join(names)}"


# --- one parser in a worker process ---------------------------------------------------------------------------------

# slots of the worker's shared array (doubles)
INDEX, STARTED, TRIED, TYPED, ACCEPTED, FINDINGS, MAX_SECONDS, SLOWEST, TOTAL_SECONDS, RSS_START, RSS_PEAK, \
    MAX_STEP, DONE, MAKE_SECONDS, MAKE_MAX = range(15)


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    return f" at {Path(frame.filename).name}:{frame.lineno} in {frame.name}"


def attempt(kind: str, data: bytes, scratch: Path) -> tuple[str, str]:
    """("accepted" | "typed" | "finding", what happened)."""
    typed = TARGETS[kind][0]
    try:
        if kind == "bundle_util":
            scratch.write_bytes(data)
            programs = parse_bundle_util_file(scratch)
            return "accepted", f"{len(programs)} programs"
        summary = parse(kind, data, f"fuzz.{kind}")
        json.dumps(summary)
        return "accepted", ""
    except ParseFailure as exc:
        cause = exc.__cause__
        if cause is None or isinstance(cause, typed):
            return "typed", str(exc)[:200]
        return "finding", f"untyped {type(cause).__name__} wrapped in ParseFailure: {str(cause)[:200]}{_where(cause)}"
    except typed as exc:
        return "typed", str(exc)[:200]
    except Exception as exc:
        return "finding", f"{type(exc).__name__}: {str(exc)[:200]}{_where(exc)}"


def save_input(kind: str, seed: int, index: int, data: bytes) -> str:
    path = Path(tempfile.gettempdir()) / f"kernelwatch-fuzz-{kind}-seed{seed}-input{index}.bin"
    path.write_bytes(data)
    return str(path)


def worker(kind: str, seed_paths: list[str], seed: int, start: int, stop: int, time_bound: float,
           memory_bound_kb: int, shared: mp.Array, findings: Connection, log: str) -> None:
    # native libraries log to fd 2 (protobuf warns of every invalid UTF-8 string): keep it for a crash report
    os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND), 2)
    pool = [Path(p).read_bytes() for p in seed_paths]
    tokens = _tokens(pool)
    # inside the parent's directory, which goes even when this worker is killed
    with tempfile.TemporaryDirectory(prefix="worker-", dir=Path(log).parent) as scratch_dir:
        scratch = Path(scratch_dir) / f"input.{kind}"
        for data in pool:  # warm-up: imports, capstone and the protobuf runtime
            attempt(kind, data, scratch)
        shared[RSS_START] = shared[RSS_PEAK] = last_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for index in range(start, stop):
            began = time.perf_counter()
            data, label = make_input(kind, index, seed, pool, tokens)
            made = time.perf_counter() - began
            shared[MAKE_SECONDS] += made
            shared[MAKE_MAX] = max(shared[MAKE_MAX], made)
            shared[INDEX], shared[STARTED] = index, time.monotonic()
            began = time.perf_counter()
            outcome, detail = attempt(kind, data, scratch)
            seconds = time.perf_counter() - began
            problems = [detail] if outcome == "finding" else []
            if seconds > time_bound:  # a loaded machine can stall once: time it again before calling it slow
                again = time.perf_counter()
                attempt(kind, data, scratch)
                seconds = min(seconds, time.perf_counter() - again)
                if seconds > time_bound:
                    problems.append(f"slow: {seconds:.2f} s (bound {time_bound} s), outcome {outcome}")
            shared[STARTED] = 0.0  # the watchdog times the parser only, not the making of the next input
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            if peak - last_peak > memory_bound_kb:
                problems.append(f"memory: peak RSS grew {(peak - last_peak) / 1024:.0f} MiB on this input")
            shared[MAX_STEP] = max(shared[MAX_STEP], peak - last_peak)
            last_peak = shared[RSS_PEAK] = peak
            shared[TRIED] += 1
            shared[TOTAL_SECONDS] += seconds
            if seconds > shared[MAX_SECONDS]:
                shared[MAX_SECONDS], shared[SLOWEST] = seconds, index
            if problems:
                shared[FINDINGS] += 1
                path = save_input(kind, seed, index, data)
                findings.send((index, label, len(data), "; ".join(problems), path))  # at once: no feeder thread
            else:
                shared[TYPED if outcome == "typed" else ACCEPTED] += 1
        shared[STARTED] = 0.0
        shared[DONE] = 1.0


@dataclass
class Row:
    kind: str
    seeds: int
    seeds_accepted: int
    tried: int = 0
    typed: int = 0
    accepted: int = 0
    findings: list[tuple[int, str, int, str, str]] = field(default_factory=list)
    max_seconds: float = 0.0
    slowest: str = ""
    mean_ms: float = 0.0
    rss_growth_mb: float = 0.0
    max_step_mb: float = 0.0
    make_seconds: float = 0.0
    make_max: float = 0.0


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _drain(findings: Connection, row: Row) -> None:
    try:
        while findings.poll():
            row.findings.append(findings.recv())
    except (EOFError, OSError):  # a worker killed in the middle of a message
        pass


def fuzz(kind: str, seed_paths: list[Path], args: argparse.Namespace) -> Row:
    pool = [p.read_bytes() for p in seed_paths]
    with tempfile.TemporaryDirectory(prefix=f"kw-fuzz-{kind}-") as scratch_dir:
        accepted = sum(attempt(kind, data, Path(scratch_dir) / "seed")[0] == "accepted" for data in pool)
        return _fuzz(kind, seed_paths, pool, accepted, Path(scratch_dir) / "worker.log", args)


def _fuzz(kind: str, seed_paths: list[Path], pool: list[bytes], accepted: int, log: Path,
          args: argparse.Namespace) -> Row:
    row = Row(kind, len(pool), accepted)
    context = mp.get_context("spawn")  # no fork of a process that may hold jax's threads
    shared = context.Array("d", 15, lock=False)
    hang_after = 10 * args.time_bound
    start = 0
    while start < args.inputs:
        shared[INDEX], shared[STARTED], shared[DONE], shared[MAX_STEP] = start - 1, 0.0, 0.0, 0.0
        findings, to_parent = context.Pipe(duplex=False)
        process = context.Process(target=worker, daemon=True, args=(
            kind, [str(p) for p in seed_paths], args.seed, start, args.inputs, args.time_bound,
            int(args.memory_bound * 1024), shared, to_parent, str(log)))
        process.start()
        killed = ""
        while process.is_alive():
            process.join(0.2)
            _drain(findings, row)
            started = shared[STARTED]
            if started and time.monotonic() - started > hang_after:
                killed = f"hang: no answer after {hang_after:.0f} s, worker killed"
            elif (rss := _rss_mb(process.pid)) > args.rss_limit:
                killed = f"memory blow-up: worker RSS {rss:.0f} MiB > {args.rss_limit} MiB, worker killed"
            if killed:
                process.kill()
                process.join()
        _drain(findings, row)
        findings.close()
        to_parent.close()
        row.rss_growth_mb = max(row.rss_growth_mb, (shared[RSS_PEAK] - shared[RSS_START]) / 1024)
        row.max_step_mb = max(row.max_step_mb, shared[MAX_STEP] / 1024)
        if shared[DONE]:
            break
        index = int(shared[INDEX])
        tail = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
        if not shared[STARTED]:  # not inside a parser: the harness itself failed
            raise SystemExit(f"{kind}: the worker failed outside a parse after input {index} ({killed or 'exit code '}"
                             f"{'' if killed else process.exitcode}); its last log lines: {tail}")
        data, label = make_input(kind, index, args.seed, pool, _tokens(pool))
        why = killed or f"crash: worker died with exit code {process.exitcode}; its last log lines: {tail}"
        row.findings.append((index, label, len(data), why, save_input(kind, args.seed, index, data)))
        shared[TRIED] += 1
        start = index + 1
    row.tried, row.typed, row.accepted = int(shared[TRIED]), int(shared[TYPED]), int(shared[ACCEPTED])
    row.max_seconds, row.mean_ms = shared[MAX_SECONDS], shared[TOTAL_SECONDS] / max(1, row.tried) * 1e3
    row.make_seconds, row.make_max = shared[MAKE_SECONDS], shared[MAKE_MAX]
    row.slowest = make_input(kind, int(shared[SLOWEST]), args.seed, pool, _tokens(pool))[1]
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=int, default=10_000, help="inputs per parser")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-bound", type=float, default=2.0, help="seconds one input may take")
    parser.add_argument("--memory-bound", type=float, default=512, help="MiB of peak RSS growth one input may cause")
    parser.add_argument("--rss-limit", type=float, default=4096, help="MiB of worker RSS at which it is killed")
    parser.add_argument("--parsers", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.parsers.split(",") if k.strip()]
    unknown = set(kinds) - set(TARGETS)
    if unknown:
        parser.error(f"unknown parsers {sorted(unknown)}; known: {', '.join(TARGETS)}")
    with tempfile.TemporaryDirectory(prefix="kw-fuzz-seeds-") as work:
        began = time.perf_counter()
        seeds = make_seeds(Path(work))
        print(f"{args.inputs} inputs per parser, seed {args.seed}, time bound {args.time_bound} s, memory bound "
              f"{args.memory_bound:.0f} MiB per input; seeds made in {time.perf_counter() - began:.1f} s: "
              + ", ".join(f"{k} {len(seeds[k])} ({sum(p.stat().st_size for p in seeds[k]) // 1024} KiB)"
                          for k in kinds) + "\n")
        rows = []
        for kind in kinds:
            began = time.perf_counter()
            rows.append(fuzz(kind, seeds[kind], args))
            print(f"  {kind}: {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
    header = (f"{'parser':<12} {'seeds ok':>8} {'inputs':>7} {'typed errors':>12} {'accepted':>8} {'FINDINGS':>8} | "
              f"{'mean':>7} {'slowest':>8} | {'peak RSS growth':>15} {'max on one input':>16}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r.kind:<12} {f'{r.seeds_accepted}/{r.seeds}':>8} {r.tried:>7} {r.typed:>12} {r.accepted:>8} "
              f"{len(r.findings):>8} | {r.mean_ms:>5.1f}ms {r.max_seconds:>7.2f}s | {r.rss_growth_mb:>11.0f} MiB "
              f"{r.max_step_mb:>12.0f} MiB")
    print("\nper parser: the harness's own time making the inputs (in all, at most; not counted above), and the "
          "slowest input:")
    for r in rows:
        print(f"  {r.kind:<12} making {r.make_seconds:>4.0f} s, {r.make_max:.2f} s | slowest {r.max_seconds:.3f} s: "
              f"{r.slowest}")
    found = [(r.kind, f) for r in rows for f in r.findings]
    if found:
        print(f"\n{len(found)} FINDINGS (input saved at the path given):")
        for kind, (index, label, size, what, path) in found:
            print(f"  {kind} input {index} ({size} bytes; {label}): {what}\n      {path}")
    else:
        print("\nno findings: every input ended in the parser's typed error or a summary, within the bounds.")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
