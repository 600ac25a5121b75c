"""The `kernelwatch` command as a package (issue 19): every command line that parses ends at a handler (dispatch
is a lookup, no chain of ifs to forget a verb in), the commands take typed options (only the adapters see an
argparse.Namespace), and a user's error becomes its exit status in one place."""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator

import pytest

from kernelwatch.errors import ConfigurationError, InvalidInput
from service.cli import build_parser
from service.cli.common import EXIT_USAGE
from service.cli.errors import EXIT_INTERRUPTED, exit_status
from tests.conftest import REPO_ROOT

# Functions that read a parsed command line on purpose: the adapters (private, one per command), what main does
# before a handler runs, and the converters of the options two verbs share.
READS_THE_NAMESPACE = {"dispatch", "_settings_env", "measuring", "report_options"}


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                          argparse.ArgumentParser]]:
    """Every parser that ends a command line, with the verbs that lead to it."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, parser
        return
    for action in subparsers:
        for name, child in action.choices.items():
            yield from leaves(child, (*path, name))


def test_every_command_has_a_handler() -> None:
    found = dict(leaves(build_parser()))
    assert len(found) == 26 and ("alerts", "triage") in found and ("calibrate",) in found
    assert ("db", "backfill-roofline") in found and ("db", "reattribute") in found
    assert [path for path, parser in found.items() if not callable(parser.get_default("handler"))] == []


def test_the_handler_a_command_line_reaches_is_its_own() -> None:
    parser = build_parser()
    assert parser.parse_args(["token", "revoke", "ci"]).handler.__module__ == "service.cli.tokens"
    assert parser.parse_args(["ci", "--base", "main"]).handler.__module__ == "service.cli.ci"
    assert parser.parse_args(["db", "upgrade"]).handler is not parser.parse_args(["db", "backfill-roofline"]).handler


def test_only_the_adapters_take_a_namespace() -> None:
    taking = []
    for path in sorted((REPO_ROOT / "service/cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef) or node.name in READS_THE_NAMESPACE:
                continue
            annotations = [ast.unparse(a.annotation) for a in node.args.args if a.annotation is not None]
            if "argparse.Namespace" in annotations and not node.name.startswith("_"):
                taking.append(f"{path.name}:{node.name}")
    assert taking == []


def test_errors_map_to_exit_statuses_in_one_place(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_status(InvalidInput("bad \x1b[31minput"), None) == EXIT_USAGE
    assert capsys.readouterr().err.startswith("kernelwatch: error: bad ")  # never a raw escape
    assert exit_status(ConfigurationError("no"), None) == EXIT_USAGE
    assert exit_status(FileExistsError("there"), None) == EXIT_USAGE
    assert exit_status(KeyboardInterrupt(), None) == EXIT_INTERRUPTED == 130
    assert exit_status(ValueError("a bug"), None) is None  # re-raised by main: a traceback, not a line


def test_an_isa_is_spelled_as_xla_spells_it() -> None:
    """`--cpu-isa avx2` and `--cpu-isa AVX2` pin the same code, so they are one environment (its XLA_FLAGS), not
    two series."""
    parser = build_parser()
    for command in (["run", "--repo", "."], ["ci", "--base", "HEAD"]):
        assert parser.parse_args([*command, "--cpu-isa", "avx512_vnni"]).cpu_isa == "AVX512_VNNI"
        assert parser.parse_args([*command, "--cpu-isa", "AVX2"]).cpu_isa == "AVX2"
        assert parser.parse_args(command).cpu_isa is None
