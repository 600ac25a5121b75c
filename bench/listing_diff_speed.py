"""Speed of the Diff page's listing alignment (service/report/listing_diff.py) on big synthetic listings, against
``difflib.unified_diff`` over the same lines (what attribution's text diff runs), measured in the same run.

Conditions, each --lines long per side (default 20,000, the page's cap), x86-like lines with addresses that
shift with every insertion and an unrolled-loop structure of few distinct keys (the hard case for anchors):
a local change (12 lines inserted, 15 deleted), scattered edits (every line replaced with probability --edit-rate),
two unrelated listings, and one listing against a shuffle of itself. The page's aim: under a second each.

    python bench/listing_diff_speed.py [--lines 20000] [--edit-rate 0.03] [--repeat 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import difflib
import random
import time
from collections.abc import Callable
from functools import partial

from service.report.listing_diff import diff_listings, location_split

PATTERN = ("vmovups ymm{r}, ymmword ptr [rdi + {o:#x}]", "vfmadd231ps ymm{r}, ymm{q}, ymm2",
           "vaddps ymm{r}, ymm1, ymm{q}", "add rax, {o:#x}")


def listing(n: int, start: int = 0) -> list[str]:
    return [PATTERN[k % 4].format(r=k % 7, q=(k * 3) % 16, o=(k * 32) % 4096) for k in range(start, start + n)]


def addressed(body: list[str]) -> list[str]:
    return [f"{4 * i:#06x}  {line}" for i, line in enumerate(body)]


def conditions(n: int, rate: float, rng: random.Random) -> dict[str, tuple[list[str], list[str]]]:
    body = listing(n)
    local = body[: n // 4] + ["vmulps ymm1, ymm2, ymm3"] * 12 + body[n // 4: n // 2] + body[n // 2 + 15:]
    scattered = [line if rng.random() > rate else "vsubps ymm1, ymm2, ymm3" for line in body]
    unrelated = [f"xor r{i % 13}, qword ptr [rsp + {i}]" for i in range(n)]
    shuffled = body[:]
    rng.shuffle(shuffled)
    return {name: (addressed(body), addressed(other)) for name, other in
            (("local change", local), ("scattered edits", scattered), ("unrelated", unrelated),
             ("shuffled", shuffled))}


def _unified(base: list[str], head: list[str]) -> list[str]:
    return list(difflib.unified_diff(base, head, n=2))


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--edit-rate", type=float, default=0.03)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"{'condition':<16} {'rows':>7} {'changed':>8} {'diff_listings':>14} {'unified_diff':>13} {'ratio':>6}")
    for name, (base, head) in conditions(args.lines, args.edit_rate, rng).items():
        result = diff_listings(base, head)
        ours = best_of(args.repeat, partial(diff_listings, base, head))
        stripped_b = [location_split(x)[1] for x in base]
        stripped_h = [location_split(x)[1] for x in head]
        peer = best_of(args.repeat, partial(_unified, stripped_b, stripped_h))
        changed = sum(1 for r in result.rows if r.kind != "same")
        print(f"{name:<16} {len(result.rows):>7} {changed:>8} {ours:>13.3f}s {peer:>12.3f}s {ours / peer:>6.2f}")


if __name__ == "__main__":
    main()
