"""Where the CPU's per-byte "cliff" comes from: glibc's fresh pages for outputs of 32 MiB or more.

glibc's malloc serves a request of DEFAULT_MMAP_THRESHOLD_MAX (32 MiB on 64-bit) or more from freshly mapped pages
and unmaps them on free; XLA:CPU allocates each call's output through it, so such an output pays a page fault and
the kernel's zeroing for every 4 KiB of it on every call. This times softmax over 4096 float32 columns (the demo's
and the suite's kernel) at row counts around that size, each in a fresh process, twice: with the default
allocator, and with the peer, the same process told to keep its pages (MALLOC_MMAP_THRESHOLD_ and
MALLOC_TRIM_THRESHOLD_ raised past every output here). Where the two agree the allocator costs nothing; where
they part, from a 32 MiB output on, what `kernelwatch predict` treats as a level of its own
(service/model/predict.py, FRESH_PAGES_BYTES) is the allocator's, not a cache's. From 64 MiB the peer pays it
too: a thread's malloc arena is at most 64 MiB (HEAP_MAX_SIZE), so a request that large is mapped afresh
whatever the thresholds say.

The second table is the same cliff met by a kernel's temporaries rather than its output: the unfused LayerNorm of
kernels_under_test/norms.py writes every step to memory, in one buffer of temporaries XLA:CPU allocates per call
(its memory analysis's temp_size, twice the input here). At 4096 x 1024 that buffer is 32 MiB while the output is
16 MiB: an output-only rule (predict's ``Roofs.level``) puts the shape below the cliff, and it runs as if above it.

    python bench/fresh_pages.py            # about 40 s
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence

ROWS = (512, 1024, 1536, 2048, 3072, 4096)
COLUMNS = 4096
KEEP_PAGES = {"MALLOC_MMAP_THRESHOLD_": str(2**30), "MALLOC_TRIM_THRESHOLD_": str(2**32)}

# Run in each child: the median of ``calls`` timed calls per row count, one XLA thread (as the sweeps measure).
CHILD = """
import json, statistics, sys, time
import jax, jax.numpy as jnp
rows, columns, calls = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
softmax = jax.jit(lambda x: jax.nn.softmax(x, axis=-1))
out = {}
for r in rows:
    x = jnp.ones((r, columns), jnp.float32)
    softmax(x).block_until_ready()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        softmax(x).block_until_ready()
        times.append(time.perf_counter() - start)
    out[r] = statistics.median(times)
print(json.dumps(out))
"""


# The unfused LayerNorm over NORM_HIDDEN columns: per row count, (median time, output bytes, temporaries' bytes).
NORM_ROWS = (2048, 3072, 4096, 6144)
NORM_HIDDEN = 1024
CHILD_NORM = """
import json, statistics, sys, time
sys.path.insert(0, sys.argv[4])
import jax
from kernels_under_test import norms
rows, hidden, calls = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
out = {}
for r in rows:
    x, w, b = norms._inputs(r, hidden, seed=1)
    args = [jax.device_put(a) for a in (x, w, b, norms._KEEP)]
    fn = jax.jit(norms.layer_norm)
    memory = fn.lower(*args).compile().memory_analysis()
    fn(*args).block_until_ready()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    out[r] = [statistics.median(times), memory.output_size_in_bytes, memory.temp_size_in_bytes]
print(json.dumps(out))
"""
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child(code: str, rows: Sequence[int], columns: int, calls: int, extra: dict[str, str]) -> dict[str, object]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PJRT_NPROC": "1", **extra}
    done = subprocess.run([sys.executable, "-c", code, json.dumps(list(rows)), str(columns), str(calls), ROOT],
                          env=env, capture_output=True, text=True, check=True, timeout=600)
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def timed(rows: Sequence[int], calls: int, extra: dict[str, str]) -> dict[int, float]:
    return {int(k): float(v) for k, v in _child(CHILD, rows, COLUMNS, calls, extra).items()}  # type: ignore[arg-type]


def timed_norm(calls: int, extra: dict[str, str]) -> dict[int, tuple[float, int, int]]:
    found = _child(CHILD_NORM, NORM_ROWS, NORM_HIDDEN, calls, extra)
    return {int(k): (float(v[0]), int(v[1]), int(v[2])) for k, v in found.items()}  # type: ignore[index]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=15, help="timed calls per shape (default 15)")
    args = parser.parse_args(argv)
    default = timed(ROWS, args.calls, {})
    kept = timed(ROWS, args.calls, KEEP_PAGES)
    print(f"softmax over {COLUMNS} float32 columns, one XLA thread, median of {args.calls} calls, a fresh process "
          "each way")
    print(f"{'rows':>6} {'output':>8}  {'default allocator':>17}  {'pages kept (peer)':>17}  {'default / kept':>14}"
          f"  {'GB/s default':>12}  {'GB/s kept':>9}")
    for r in ROWS:
        out_bytes = r * COLUMNS * 4
        moved = 2 * out_bytes  # read the input once, write the output once
        print(f"{r:>6} {out_bytes / 2**20:>5.0f} MiB  {default[r] * 1e3:>14.2f} ms  {kept[r] * 1e3:>14.2f} ms  "
              f"{default[r] / kept[r]:>14.2f}  {moved / default[r] / 1e9:>12.1f}  {moved / kept[r] / 1e9:>9.1f}")
    norm_default, norm_kept = timed_norm(args.calls, {}), timed_norm(args.calls, KEEP_PAGES)
    print(f"\nunfused LayerNorm over {NORM_HIDDEN} float32 columns (kernels_under_test/norms.py), the same way; "
          "output and temporaries as XLA's memory analysis sizes them")
    print(f"{'rows':>6} {'output':>8} {'temporaries':>11}  {'default allocator':>17}  {'pages kept (peer)':>17}  "
          f"{'default / kept':>14}  {'ms per 1k rows, default':>23}")
    for r in NORM_ROWS:
        seconds, out_bytes, temp_bytes = norm_default[r]
        print(f"{r:>6} {out_bytes / 2**20:>5.0f} MiB {temp_bytes / 2**20:>8.0f} MiB  {seconds * 1e3:>14.2f} ms  "
              f"{norm_kept[r][0] * 1e3:>14.2f} ms  {seconds / norm_kept[r][0]:>14.2f}  "
              f"{seconds * 1e3 / (r / 1000):>23.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
