"""`kernelwatch calibrate`: the roofs a CPU runner holds this host's results to (runners/calibrate.py, kept per host
and environment in runners/calibration_cache.py), listed; ``--measure`` measures the host now, in a benchmark
process as a run's would be (this interpreter, the environment's XLA flags, no pinning), and keeps it, replacing
what was kept under its key."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from kernelwatch.hardware import calibration_from_manifest
from service.cli.common import EXIT_OK, Subparsers
from service.settings import Settings


def register(sub: Subparsers) -> None:
    calibrate = sub.add_parser("calibrate", help="list (or --measure) this host's calibrated CPU roofs")
    calibrate.add_argument("--measure", action="store_true",
                           help="measure the host now (about 5 s) and keep it, even where one is kept")
    calibrate.set_defaults(handler=_calibrate)


def _calibrate(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_calibrate(measure=args.measure)


def cmd_calibrate(measure: bool) -> int:
    from runners import calibration_cache
    from service.report.calibration_text import calibrations_text

    path = calibration_cache.cache_path()
    if measure:
        key = measure_here(path)
        print(f"measured and kept as {key}", file=sys.stderr)
    kept = []
    for key, entry in sorted(calibration_cache.load(path).items(), key=lambda e: -float(e[1].get("kept_at", 0))):
        calibration = calibration_from_manifest(entry)
        if calibration is not None:
            busy = entry.get(calibration_cache.PROVISIONAL) is True
            calibration = dataclasses.replace(calibration, measured_busy=busy)
            kept.append((key, calibration, float(entry["kept_at"]) if "kept_at" in entry else None))
    sys.stdout.write(calibrations_text(str(path), kept))
    return EXIT_OK


def measure_here(path: Path) -> str:
    """The host measured in a calibrate-only benchmark process (no suite, nothing of a checkout imported) and
    kept; its key."""
    from kernelwatch.errors import InvalidInput
    from runners import calibration_cache
    from runners.session import BenchmarkProcess, ChildConfig, ProcessFailed

    try:
        helper = BenchmarkProcess(ChildConfig(root=Path.cwd()), calibrate_only=True)
    except ProcessFailed as exc:
        raise InvalidInput(f"the calibration failed: {exc}") from None
    helper.close()
    measured = helper.calibrated
    key, figures = str(measured.get("key", "")), measured.get("figures")
    busy = measured.get("busy") is True
    if not isinstance(figures, dict) or not calibration_cache.store(path, key, figures, provisional=busy):
        raise InvalidInput(f"the calibration process sent no calibration: {str(measured)[:300]}")
    return key
