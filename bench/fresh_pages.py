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

    python bench/fresh_pages.py            # about 20 s
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


def timed(rows: Sequence[int], calls: int, extra: dict[str, str]) -> dict[int, float]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PJRT_NPROC": "1", **extra}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(list(rows)), str(COLUMNS), str(calls)],
                          env=env, capture_output=True, text=True, check=True, timeout=600)
    return {int(k): float(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
