"""`kernelwatch parse`: one artifact parser run on one file, its records printed (what a stored artifact would be
read into)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kernelwatch.errors import InvalidInput
from service.cli.common import EXIT_OK, Subparsers
from service.settings import Settings

MAX_PARSE_INPUT = 512 * 1024 * 1024


def register(sub: Subparsers) -> None:
    parse = sub.add_parser("parse", help="run one parser on a file and print its records")
    parse.add_argument("kind", choices=["xplane", "hlo", "x86-obj", "sass", "llo"])
    parse.add_argument("path", type=Path)
    parse.add_argument("--format", choices=["json"], default="json")
    parse.add_argument("--no-disassembly", action="store_true", help="leave the instruction listings out")
    parse.set_defaults(handler=_parse)


def _parse(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_parse(args.kind, args.path, disassembly=not args.no_disassembly)


def cmd_parse(kind: str, path: Path, *, disassembly: bool) -> int:
    from runners.parsers.by_kind import ParseFailure, parse

    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PARSE_INPUT + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_PARSE_INPUT:
        raise InvalidInput(f"{path} is larger than {MAX_PARSE_INPUT} bytes")
    try:
        summary = parse(kind, data, str(path))
    except ParseFailure as exc:
        raise InvalidInput(str(exc).splitlines()[0]) from None
    if not disassembly:
        for kernel in summary.get("kernels", []):
            kernel.pop("disassembly", None)
    print(json.dumps(summary, indent=2, sort_keys=True))
    return EXIT_OK
