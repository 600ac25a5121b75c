"""Short histories on a noisy shared host: what the change-point engine can decide, and with how few commits.

The host issue 16 measured: the same code's median moves 20-100 % from one benchmark process to the next while
the samples inside one process agree, and a commit has 1-3 runs (processes) of 10-20 samples. The model here:
per series a run noise sigma drawn uniformly from 0.20-0.30 (log scale, one draw per run; ``--sigma`` sets it to
a host's own, as verdict_calibration.py measures it), per run 10-20 samples with 2 % noise around the run's
level, per commit 1, 2 or 3 runs (equally likely; ``--runs 3`` for three each). Series of ``s`` commits before a
step and ``s`` after, for s in ``--sides``; steps (+x %) in ``--steps``; and flat series of the same lengths. A
step counts as found when a change point is reported within +-1 commit of its first commit; on flat series every
series with any point is a false alarm.

Three readings of the same series, in one run:

- ``runs``: KernelWatch as the service runs it now (each commit the geometric mean of its runs' medians, the test
  counting runs where the runs of a commit look like independent replicates; ``service/detect/edivisive.py``).
- ``pooled``: KernelWatch on each commit's median of every sample pooled across its runs, what the detector read
  before (issue 16): the engine's answer for those values is the one it gave then, exactly.
- ``Otava``: apache-otava's ``compute_change_points`` with its defaults on the same pooled medians (its own venv,
  as in detect_quality.py; ``--no-otava`` to skip it).

Then, per step size, the smallest history (commits a side) at which ``runs`` finds >= 90 % of steps, and a bound
no detector at the engine's alpha can beat: the z-test on the run medians at the true split with the noise
known, Bonferroni-corrected for the splits the engine looks at (the engine must also estimate the noise and find
the split).

    python bench/detect_short.py [--series 400] [--flat 4000] [--sides 3,4,5,6,8,10,12,16]
                                 [--steps 0.2,0.3,0.4,0.6,1.0] [--runs 1-3] [--sigma 0.20-0.30] [--seed 0]
                                 [--no-otava]
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
from replay import engine_fingerprint, run_otava
from scipy import stats

from service.detect.changepoints import ChangePointParams, detect_many

MAX_SAMPLES = 20
WITHIN = 0.02


@dataclass(frozen=True)
class Batch:
    """Series of one length: per commit the pooled median, the mean of log run medians, runs and their spread."""

    pooled: np.ndarray  # (B, C) median of every sample of the commit
    level: np.ndarray  # (B, C) geometric mean of run medians
    runs: np.ndarray  # (B, C)
    within: np.ndarray  # (B, C) squared deviations of log run medians around the commit's log level, summed
    logs: np.ndarray  # (B, C, 3) log run medians, nan where the commit has fewer runs
    sigma: np.ndarray  # (B,) the run noise drawn


def batch(rng: np.random.Generator, n: int, side: int, step: float, runs: tuple[int, int],
          noise: tuple[float, float] = (0.20, 0.30)) -> Batch:
    commits = 2 * side
    sigma = rng.uniform(noise[0], noise[1], n)
    count = rng.integers(runs[0], runs[1] + 1, (n, commits))
    level = np.where(np.arange(commits) >= side, math.log1p(step), 0.0)[None, :]
    run_level = level[:, :, None] + sigma[:, None, None] * rng.standard_normal((n, commits, 3))
    sizes = rng.integers(10, MAX_SAMPLES + 1, (n, commits, 3))
    samples = run_level[..., None] + WITHIN * rng.standard_normal((n, commits, 3, MAX_SAMPLES))
    present = (np.arange(3)[None, None, :, None] < count[..., None, None]) & \
        (np.arange(MAX_SAMPLES)[None, None, None, :] < sizes[..., None])
    values = np.where(present, np.exp(samples), np.nan)
    pooled = np.nanmedian(values.reshape(n, commits, -1), axis=2)
    with warnings.catch_warnings():  # absent runs are all-nan slices, and their median nan is what is wanted
        warnings.simplefilter("ignore", RuntimeWarning)
        logs = np.log(np.nanmedian(values, axis=3))
    mean = np.nanmean(logs, axis=2)
    within = np.nansum((logs - mean[..., None]) ** 2, axis=2)
    return Batch(pooled, np.exp(mean), count.astype(float), within, logs, sigma)


def found(changes: list[list], side: int) -> np.ndarray:
    return np.array([any(abs(c.index - side) <= 1 for c in row) for row in changes])


def any_point(changes: list[list]) -> np.ndarray:
    return np.array([bool(row) for row in changes])


def oracle(b: Batch, side: int, alpha: float, candidates: int) -> np.ndarray:
    """The z-test on run medians at the true split with sigma known: what no detector at this alpha can beat."""
    first = np.isfinite(b.logs) & (np.arange(b.logs.shape[1]) < side)[None, :, None]
    second = np.isfinite(b.logs) & ~first
    n1, n2 = first.sum(axis=(1, 2)), second.sum(axis=(1, 2))
    m1 = np.where(first, b.logs, 0).sum(axis=(1, 2)) / n1
    m2 = np.where(second, b.logs, 0).sum(axis=(1, 2)) / n2
    z = np.abs(m2 - m1) / (b.sigma * np.sqrt(1 / n1 + 1 / n2))
    return 2 * stats.norm.sf(z) * candidates <= alpha


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=400, help="series per step condition")
    parser.add_argument("--flat", type=int, default=4000, help="flat series per history length")
    parser.add_argument("--sides", default="3,4,5,6,8,10,12,16", help="commits before (and after) the step")
    parser.add_argument("--steps", default="0.2,0.3,0.4,0.6,1.0", help="step sizes (+x, relative)")
    parser.add_argument("--runs", default="1-3", help="runs per commit: 'a-b' drawn uniformly, or 'a'")
    parser.add_argument("--sigma", default="0.20-0.30",
                        help="run noise (log scale) 'a-b' drawn uniformly per series, or 'a': the spread between runs "
                             "of the same code that verdict_calibration.py prints for a host")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-otava", action="store_true")
    args = parser.parse_args()
    low, _, high = args.sigma.partition("-")
    noise = (float(low), float(high or low))
    sides = [int(s) for s in args.sides.split(",")]
    steps = [float(s) for s in args.steps.split(",")]
    lo, _, hi = args.runs.partition("-")
    runs = (int(lo), int(hi or lo))
    params = ChangePointParams()
    print(f"KernelWatch engine: {engine_fingerprint()}")
    print(f"Model: run noise sigma U({noise[0]:.2f}, {noise[1]:.2f}) (log), {runs[0]}-{runs[1]} runs a commit, "
          f"10-{MAX_SAMPLES} samples "
          f"a run at {WITHIN:.0%}; seed {args.seed}; {args.series} series per step condition, {args.flat} flat")

    rng = np.random.default_rng(args.seed)
    cells: dict[tuple[int, float], Batch] = {}
    for side in sides:
        for step in [0.0, *steps]:
            cells[(side, step)] = batch(rng, args.flat if step == 0 else args.series, side, step, runs, noise)

    started = time.perf_counter()
    rates: dict[tuple[str, int, float], float] = {}
    for (side, step), b in cells.items():
        score = (lambda ch, side=side: found(ch, side)) if step else any_point
        rates[("runs", side, step)] = float(score(detect_many(b.level, params, runs=b.runs, within=b.within)).mean())
        rates[("pooled", side, step)] = float(score(detect_many(b.pooled, params)).mean())
        candidates = max(1, 2 * side - 2 * params.min_side + 1)
        rates[("bound", side, step)] = float(oracle(b, side, params.alpha, candidates).mean())
    print(f"KernelWatch (both readings): {time.perf_counter() - started:.1f} s")
    readers = ["runs", "pooled", "bound"]
    if not args.no_otava:
        done = run_otava([(f"{side}:{step}", b.pooled) for (side, step), b in cells.items()])
        print(f"Otava {done['otava_version']} (numpy {done['numpy_version']}): "
              f"{sum(g['seconds'] for g in done['groups'].values()):.1f} s")
        for side, step in cells:
            points = done["groups"][f"{side}:{step}"]["change_points"]
            hit = [any(abs(i - side) <= 1 for i in row) if step else bool(row) for row in points]
            rates[("Otava", side, step)] = float(np.mean(hit))
        readers.insert(2, "Otava")

    print("\nFlat series: share with any change point (false alarms per series; the engine's alpha is "
          f"{params.alpha})")
    detectors = [r for r in readers if r != "bound"]  # the bound is about steps
    print("  commits     " + "".join(f"{r:>9}" for r in detectors))
    for side in sides:
        print(f"  {side:>3}+{side:<3}     " + "".join(f"{rates[(r, side, 0.0)]:>9.2%}" for r in detectors))
    for step in steps:
        print(f"\n+{step:.0%} steps: share found within +-1 commit")
        print("  commits     " + "".join(f"{r:>9}" for r in readers))
        for side in sides:
            print(f"  {side:>3}+{side:<3}     " + "".join(f"{rates[(r, side, step)]:>9.1%}" for r in readers))
    print("\nSmallest history (commits a side) with >= 90 % of steps found:")
    for step in steps:
        line = []
        for reader in readers:
            enough = [s for s in sides if rates[(reader, s, step)] >= 0.9]
            line.append(f"{reader} {enough[0] if enough else '>' + str(sides[-1])}")
        print(f"  +{step:.0%}: " + ", ".join(line))


if __name__ == "__main__":
    main()
