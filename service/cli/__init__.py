"""The `kernelwatch` command, one module per verb group (the layout of asv's commands/ package). Each module's
``register`` adds its parsers and sets, on each, the handler that converts the parsed line into typed options
for its command; `main` reads the settings, calls the handler, and maps a user's error to its exit status in one
place (service/cli/errors.py)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import NoReturn

from service.cli import (
    alerts,
    calibrate,
    ci,
    compare,
    db,
    deliveries,
    detect,
    parse,
    predict,
    prune,
    run,
    serve,
    submit,
    tokens,
    trace,
    workers,
)
from service.cli.common import EXIT_USAGE, Handler, Subparsers
from service.cli.errors import exit_status
from service.settings import Settings, load_settings

# In the order `kernelwatch --help` lists the verbs.
REGISTER: tuple[Callable[[Subparsers], None], ...] = (
    db.register, run.register, serve.register, submit.register, parse.register, prune.register, compare.register,
    ci.register, predict.register, calibrate.register, detect.register, alerts.register, trace.register,
    workers.register, tokens.register, deliveries.register)


class OneLineErrors(argparse.ArgumentParser):
    """argparse's usage errors as every other error of the command line: one line on stderr and exit 2 (README,
    "Exit codes"); argparse printed its usage block first, eight lines for a bad --format."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = OneLineErrors(prog="kernelwatch",
                                                    description="Kernel performance regressions, per commit.")
    sub = parser.add_subparsers(dest="command", required=True)
    for register in REGISTER:
        register(sub)
    return parser


def dispatch(args: argparse.Namespace, settings: Settings) -> int:
    """The parsed command's handler (every parser that ends a command line sets one), called."""
    handler: Handler = args.handler
    return handler(args, settings)


def _settings_env(args: argparse.Namespace) -> dict[str, str]:
    """The environment settings are read from. `compare --url` reads from the URL it is given: KERNELWATCH_URL
    and KERNELWATCH_TOKEN, which configure where runners upload (and must come as a pair there), are no concern
    of it, and KERNELWATCH_TOKEN alone is its token for reads."""
    env = dict(os.environ)
    if args.command == "compare" and args.url:
        env.pop("KERNELWATCH_URL", None)
        env.pop("KERNELWATCH_TOKEN", None)
    return env


def _verb_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of a verb (``run``), whose --help lists what the verb takes."""
    for action in parser._subparsers._group_actions if parser._subparsers is not None else ():
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Said by the verb's parser, as its other errors are: `run --iterations 5` was sent to `kernelwatch --help`,
        # which lists verbs, not run's options.
        _verb_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    settings: Settings | None = None
    try:
        settings = load_settings(_settings_env(args))
        return dispatch(args, settings)
    except BaseException as exc:  # a user's error ends in one line and exit 2; anything else goes on up
        status = exit_status(exc, settings)
        if status is None:
            raise
        return status
