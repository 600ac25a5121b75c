"""How trustworthy are the harness's samples? Against the naive way, in the same run.

For five kernels of the default suite (their quick points), take N samples with the KernelWatch harness
(inputs on the device, compile timed apart, warm-up, every call ended by block_until_ready) and N samples
with the naive loop people write first (`timeit` around the same jitted call: the first sample includes the
compile, nothing waits for the device). Prints per kernel: median time each way, the coefficient of variation
each way and their ratio, and the minimum detectable effect of a comparison with 10 samples per side
(two-sided alpha 0.05, power 0.8, normal approximation: 2.80 * sqrt(2/10) * robust CV).

    python bench/harness_noise.py [--samples 30]
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from pathlib import Path

import jax
import numpy as np

from runners.harness import TimingPlan, time_case
from runners.suite import BenchmarkInstance, discover, select

ROOT = Path(__file__).resolve().parents[1]
# One quick point of five families; the first match of each pattern is used.
PICKS = ["matmul/matmul_dense", "softmax/softmax_rows", "norms/*", "quantized/*", "sampling/*"]
MDE_FACTOR = 2.80 * (2 / 10) ** 0.5  # (z_0.975 + z_0.8) * sqrt(1/10 + 1/10)


def cv(samples: list[float]) -> float:
    return statistics.pstdev(samples) / statistics.mean(samples)


def robust_cv(samples: list[float]) -> float:
    """1.4826 x MAD / median: the spread of the bulk, not of the odd slow sample."""
    med = statistics.median(samples)
    return 1.4826 * statistics.median(abs(s - med) for s in samples) / med


def naive(instance: BenchmarkInstance, samples: int) -> list[float]:
    case = instance.make_case()
    fn = jax.jit(case.fn)
    return timeit.repeat(lambda: fn(*case.args), number=1, repeat=samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    specs = discover(ROOT)
    chosen: list[BenchmarkInstance] = []
    for pattern in PICKS:
        found = next(iter(select(specs, pattern, quick=True)), None)
        if found is not None:
            chosen.append(found)
    print(f"{args.samples} samples each way, jax {jax.__version__} on {jax.default_backend()}\n")
    header = (f"{'kernel':<46} {'harness med':>11} {'naive med':>10} | {'CV harness':>10} {'CV naive':>9} "
              f"{'naive/harness':>13} | {'MDE@10 harness':>14} {'MDE@10 naive':>12}")
    print(header)
    print("-" * len(header))
    for instance in chosen:
        harness = time_case(instance.make_case(), TimingPlan(samples=args.samples, warmup=3)).samples
        plain = naive(instance, args.samples)
        ratio = cv(plain) / cv(harness)
        print(f"{instance.key[:46]:<46} {np.median(harness) * 1e3:>9.3f}ms {np.median(plain) * 1e3:>8.3f}ms | "
              f"{cv(harness):>10.1%} {cv(plain):>9.1%} {ratio:>12.1f}x | "
              f"{MDE_FACTOR * robust_cv(harness):>14.1%} {MDE_FACTOR * robust_cv(plain):>12.1%}")
    print("\nThe naive loop's first sample holds the compile and the others only the dispatch (nothing waits"
          "\nfor the device), so its median is not the kernel's time at all, and its spread is the compile's.")


if __name__ == "__main__":
    main()
