"""`kernelwatch predict`: a kernel's time at a new shape, from the roofline and the efficiency measured at its
nearest stored shapes (service/pipeline/predictions.py)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelwatch.errors import InvalidInput, NotFound
from service.cli.common import EXIT_OK, Subparsers, open_context
from service.report.compare_table import terminal_text
from service.settings import Settings


def register(sub: Subparsers) -> None:
    predict = sub.add_parser("predict", help="a kernel's time at a new shape: roofline x the efficiency measured "
                                             "at its nearest stored shapes",
                             description="Prints both shapes' FLOPs, bytes, intensity, bound, roofline and "
                                         "predicted time, and whether the change crosses the ridge. Exit status: 0, "
                                         "or 2 for an unknown kernel, parameter or hardware.")
    predict.add_argument("--kernel", required=True,
                         help="a suite (attention) or one benchmark (attention/attention_xla)")
    predict.add_argument("--from", dest="source", required=True, metavar="SHAPE", help="NAME=VALUE[,NAME=VALUE]")
    predict.add_argument("--to", dest="target", required=True, metavar="SHAPE", help="NAME=VALUE[,NAME=VALUE]")
    predict.add_argument("--hardware", default=None, help="tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e, h100, h200 or cpu "
                                                          "(default: where the kernel has the most measured shapes)")
    predict.add_argument("--repo", default=None, help="only this repository's measurements (by name)")
    predict.add_argument("--suite-root", type=Path, default=None,
                         help="a project's checkout: its project file's benchmarks directory (kernelwatch.toml "
                              "or [tool.kernelwatch]), else its kernels_under_test/ (default: the suite beside "
                              "this service)")
    predict.set_defaults(handler=_predict)


@dataclass(frozen=True)
class PredictOptions:
    kernel: str  # a suite, or suite/name
    source: str  # --from SHAPE
    target: str  # --to SHAPE
    hardware: str | None  # None: where the kernel has the most measured shapes
    repo: str | None  # only this repository's measurements
    suite_root: Path | None  # None: the suite beside this service


def _predict(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_predict(settings, PredictOptions(args.kernel, args.source, args.target, args.hardware, args.repo,
                                                args.suite_root))


def cmd_predict(settings: Settings, options: PredictOptions) -> int:
    from runners.project_file import ProjectFileError, read_project_settings
    from runners.suite import SuiteNotFound, discover
    from service.pipeline.predictions import default_suite_root, predict_reports
    from service.report.predict_text import predictions_to_text
    from service.store.commits import repository_named
    from service.store.family_points import stored_points

    root = options.suite_root or default_suite_root()
    try:
        # A project's checkout declares where its suite lives as `kernelwatch run` reads it; a new user's
        # `--suite-root` at their library read "no kernels_under_test/__init__.py under" it.
        suite_dir = read_project_settings(root).benchmarks if options.suite_root is not None else None
        specs = discover(root, suite_dir)
    except ProjectFileError as exc:
        raise InvalidInput(str(exc)) from None
    except SuiteNotFound as exc:
        raise InvalidInput(str(exc)) from None
    except Exception as exc:  # noqa: BLE001  (the suite's own import-time code: whatever it raises is its answer)
        # predict imports the suite in this process (its cost functions count the shapes), so what the suite
        # imports must be importable here: a project's own package under src/ is not, unless PYTHONPATH says so.
        raise InvalidInput(f"cannot import the suite at {root}: {type(exc).__name__}: {str(exc)[:300]} (predict "
                           f"imports it in this process: its own packages must be importable here, e.g. "
                           f"PYTHONPATH=src)") from None
    ctx = open_context(settings, reads=True)
    try:
        with ctx.sessions() as session:
            if options.repo is not None and repository_named(session, options.repo) is None:
                # Said as compare says it: it read "has no stored measurements: name a chip with --hardware".
                raise NotFound(f"no repository named {options.repo!r}")
            reports = predict_reports(specs, options.kernel, options.source, options.target,
                                      lambda suite, name: stored_points(session, suite, name, options.repo),
                                      options.hardware)
    finally:
        ctx.close()
    sys.stdout.write(terminal_text(predictions_to_text(reports)))
    return EXIT_OK
