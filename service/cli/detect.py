"""`kernelwatch detect`: change points in a CSV of samples, by the detector the service runs on stored series
(service/detect/changepoints.py), with no database."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from typing import Any

from kernelwatch.errors import InvalidInput
from service.cli.common import EXIT_OK, Subparsers
from service.settings import Settings

MAX_DETECT_INPUT = 256 * 1024 * 1024  # a CSV of samples: ~10 million rows


def register(sub: Subparsers) -> None:
    detect = sub.add_parser("detect", help="change points in a CSV of samples (series,position,value)")
    detect.add_argument("--input", required=True, help="CSV file, or - for standard input")
    detect.add_argument("--format", choices=["json", "text"], default="json")
    detect.add_argument("--alpha", type=float, default=None, help="largest corrected p-value of a change")
    detect.add_argument("--min-effect", type=float, default=None, help="smallest relative change (0.01 = 1%%)")
    detect.add_argument("--k-noise", type=float, default=None, help="smallest change in sigmas of the noise")
    detect.add_argument("--min-side", type=int, default=None, help="commits needed on each side of a change")
    detect.set_defaults(handler=_detect)


@dataclass(frozen=True)
class DetectOptions:
    input: str  # a path, or - for standard input
    format: str  # json | text
    # The detector's parameters the command line overrides; None: ChangePointParams' default.
    alpha: float | None = None
    min_effect: float | None = None
    k_noise: float | None = None
    min_side: int | None = None


def _detect(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_detect(DetectOptions(args.input, args.format, args.alpha, args.min_effect, args.k_noise,
                                    args.min_side))


def _finite(value: Any) -> Any:
    """The report with every non-finite number (a magnitude over a zero level) as None, JSON's null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def cmd_detect(options: DetectOptions) -> int:
    from dataclasses import replace

    from service.detect.changepoints import ChangePointParams
    from service.detect.samples_csv import change_points_report, read_samples_csv

    try:
        if options.input == "-":
            data = sys.stdin.buffer.read(MAX_DETECT_INPUT + 1)
        else:
            with open(options.input, "rb") as handle:
                data = handle.read(MAX_DETECT_INPUT + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {options.input}: {exc.strerror}") from None
    if len(data) > MAX_DETECT_INPUT:
        raise InvalidInput(f"{options.input} is larger than {MAX_DETECT_INPUT} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{options.input}: not UTF-8 text (byte {exc.start})") from None
    given = (("alpha", options.alpha), ("min_effect", options.min_effect), ("k_noise", options.k_noise),
             ("min_side", options.min_side))
    overrides: dict[str, Any] = {name: value for name, value in given if value is not None}  # float or int
    bad_alpha = options.alpha is not None and not 0 < options.alpha < 1  # NaN fails every comparison: bad too
    if bad_alpha or (options.min_side is not None and options.min_side < 1):
        raise InvalidInput("--alpha must be in (0, 1) and --min-side at least 1")
    for flag, value in (("--min-effect", options.min_effect), ("--k-noise", options.k_noise)):
        if value is not None and not 0 <= value < math.inf:  # NaN read "no change points" for a +30 % step
            raise InvalidInput(f"{flag} must be a finite number of 0 or more, not {value}")
    params = replace(ChangePointParams(), **overrides)
    report = change_points_report(read_samples_csv(text, options.input), params)
    if options.format == "json":
        # A change from ~0 to a value has no finite relative size: JSON has no Infinity, so null says "unbounded".
        print(json.dumps(_finite(report), indent=2, allow_nan=False))
    else:
        for c in report["change_points"]:
            print(f"{c['series']}  at {c['position']}  {c['magnitude']:+.2%}  ({c['before']:.4g} -> "
                  f"{c['after']:.4g}, p={c['p_value']:.2g})")
        if not report["change_points"]:
            print("no change points")
    return EXIT_OK
