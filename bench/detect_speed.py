"""Speed of a full change-point analysis: KernelWatch's vectorised engine against apache-otava on the same data.

The data (bench/replay.py, speed_matrix): 10,000 series x 200 commits by default, per-commit values at 1 % noise,
half of them stable, a quarter with one step, 15 % with 2 % slow outliers, 10 % with two or three steps.
KernelWatch analyses the whole matrix in one ``detect_many`` call (default parameters); Otava runs
``compute_change_points`` with its defaults on each series in turn, as it works, in its own virtual environment
(bench/.otava-venv), its time measured inside that process around the analysis calls alone.

If Otava at full size would take longer than --otava-budget seconds (estimated from a calibration run on
--calibrate series), it runs on a subset sized to fit the budget and its full-size time is extrapolated
(linearly in the number of series: each series is analysed on its own); the output says so. For reference,
KernelWatch's ``detect_levels`` one series at a time is timed on a subset too.

Issue 5's aim: KernelWatch at least 5x faster than Otava.

    python bench/detect_speed.py [--series 10000] [--commits 200] [--seed 0] [--otava-budget 600] [--calibrate 200]
"""

from __future__ import annotations

import argparse
import time

from replay import engine_fingerprint, run_otava, speed_matrix

from service.detect.changepoints import detect_levels, detect_many

TARGET_RATIO = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--otava-budget", type=float, default=600.0,
                        help="seconds Otava may take before it runs on a subset and is extrapolated")
    parser.add_argument("--calibrate", type=int, default=200, help="series in Otava's calibration run")
    args = parser.parse_args()
    n, commits = args.series, args.commits
    matrix = speed_matrix(args.seed, n, commits)
    print(f"Data: {n} series x {commits} commits (seed {args.seed}), 1 % noise, mixed stable / steps / outliers")

    print(f"KernelWatch engine: {engine_fingerprint()}")
    detect_many(matrix[: min(n, 50)])  # warm-up: imports, first-call allocations
    started = time.perf_counter()
    kw_changes = detect_many(matrix)
    kw_seconds = time.perf_counter() - started
    kw_points = sum(len(row) for row in kw_changes)
    print(f"KernelWatch detect_many (one call, all series): {kw_seconds:.2f} s, {n / kw_seconds:,.0f} series/s, "
          f"{kw_points} change points", flush=True)
    single = min(n, 500)
    started = time.perf_counter()
    for row in matrix[:single]:
        detect_levels(row)
    per_series = (time.perf_counter() - started) / single
    print(f"  for reference, detect_levels one series at a time: {per_series * 1e3:.2f} ms per series "
          f"({1 / per_series:,.0f} series/s, timed on {single} series)")

    calibrate = min(n, args.calibrate)
    print(f"Otava compute_change_points (defaults), one series at a time: calibrating on {calibrate} series ...",
          flush=True)
    calib = run_otava([("calibrate", matrix[:calibrate])])
    per_otava = calib["groups"]["calibrate"]["seconds"] / calibrate
    estimate = per_otava * n
    print(f"  Otava {calib['otava_version']} (numpy {calib['numpy_version']}): {per_otava * 1e3:.2f} ms per series; "
          f"full size estimated at {estimate:.0f} s")
    subset = n if estimate <= args.otava_budget else max(calibrate, int(args.otava_budget / per_otava))
    if subset < n:
        print(f"  over the {args.otava_budget:.0f} s budget: Otava runs on the first {subset} series and its time "
              f"is extrapolated to {n}", flush=True)
    else:
        print(f"  running Otava on all {n} series ...", flush=True)
    done = run_otava([("speed", matrix[:subset])])["groups"]["speed"]
    ot_points = sum(len(row) for row in done["change_points"])
    ot_seconds = done["seconds"] * n / subset
    kind = "measured" if subset == n else f"EXTRAPOLATED from {subset} series ({done['seconds']:.1f} s)"
    print(f"Otava: {ot_seconds:.1f} s ({kind}), {n / ot_seconds:,.0f} series/s, {ot_points} change points"
          + ("" if subset == n else f" on those {subset} series"))
    ratio = ot_seconds / kw_seconds
    verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
    print(f"\n{'':<14} {'seconds':>9} {'series/s':>10}")
    print(f"{'KernelWatch':<14} {kw_seconds:>9.2f} {n / kw_seconds:>10,.0f}")
    print(f"{'Otava':<14} {ot_seconds:>9.2f} {n / ot_seconds:>10,.0f}" + ("" if subset == n else "  (extrapolated)"))
    print(f"\nKernelWatch is {ratio:.1f}x faster than Otava on {n} x {commits}; target >= {TARGET_RATIO:.0f}x: "
          f"{verdict}")


if __name__ == "__main__":
    main()
