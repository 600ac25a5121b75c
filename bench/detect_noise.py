"""The first-cut step detector against a naive peer on the same synthetic series.

Peer: "flag a commit when its median is more than 10 % above the previous commit's", the rule many ad-hoc
dashboards start with. Both see the same series (fixed seeds): stable series, and series with one step of a
known size at a known position, at several levels of commit-to-commit noise (log-normal, as process-level noise
on a shared machine is), with every 20th commit an outlier 1.5-3x slow.

Prints, per noise level: false change points per 1,000 stable series, recall of steps (found within 1 commit of
the truth), and the ratio of the two detectors' false-alarm counts.

    python bench/detect_noise.py [--series 500] [--commits 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from service.detect.steps import StepDetector
from service.detect.types import SeriesPoint


def naive_detect(medians: np.ndarray, threshold: float = 0.10) -> list[int]:
    return [i for i in range(1, medians.size) if medians[i] > medians[i - 1] * (1 + threshold)]


def make_series(rng: np.random.Generator, commits: int, noise: float, step: float, at: int) -> np.ndarray:
    levels = np.exp(noise * rng.standard_normal(commits))
    levels[at:] *= 1 + step
    outliers = rng.random(commits) < 0.05
    levels[outliers] *= rng.uniform(1.5, 3.0, outliers.sum())
    return levels


def to_points(levels: np.ndarray, rng: np.random.Generator, samples: int = 10) -> list[SeriesPoint]:
    return [SeriesPoint(i, i, list(level * (1 + 0.01 * rng.standard_normal(samples))))
            for i, level in enumerate(levels)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--series", type=int, default=500)
    parser.add_argument("--commits", type=int, default=20)
    args = parser.parse_args()
    detector = StepDetector()
    print(f"{args.series} series x {args.commits} commits per cell; steps planted at the middle commit\n")
    print(f"{'noise':>6} {'step':>6} | {'kw false/1k':>11} {'kw recall':>9} | {'naive false/1k':>14} "
          f"{'naive recall':>12} | {'false ratio naive/kw':>20}")
    for noise in (0.01, 0.03, 0.10):
        for step in (0.25, 1.0):
            rng = np.random.default_rng(int(noise * 1000) + int(step * 10))
            at = args.commits // 2
            kw_false = naive_false = kw_hit = naive_hit = 0
            started = time.perf_counter()
            for _ in range(args.series):
                stable = make_series(rng, args.commits, noise, 0.0, at)
                kw_false += len(detector.detect(to_points(stable, rng), "lower_is_better"))
                naive_false += len(naive_detect(stable))
                stepped = make_series(rng, args.commits, noise, step, at)
                found = [c.index for c in detector.detect(to_points(stepped, rng), "lower_is_better")]
                kw_hit += any(abs(i - at) <= 1 for i in found)
                naive_hit += any(abs(i - at) <= 1 for i in naive_detect(stepped))
            ratio = naive_false / kw_false if kw_false else float("inf")
            print(f"{noise:>6.0%} {step:>+6.0%} | {1000 * kw_false / args.series:>11.1f} "
                  f"{kw_hit / args.series:>9.1%} | {1000 * naive_false / args.series:>14.1f} "
                  f"{naive_hit / args.series:>12.1%} | {ratio:>20.1f}   ({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
