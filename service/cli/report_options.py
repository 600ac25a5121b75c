"""What `compare` and `ci` share once a comparison is made: the options that say what bar a change must pass, what
to show and when to fail, and the rendering of the comparison in the format asked. The formatting itself is pure
(service/report/); this module only wires it."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.cli.common import probability
from service.report.compare_view import FAIL_ON, SORT_ORDERS, FailOn, SortOrder

if TYPE_CHECKING:  # numpy and scipy behind them: not for every `kernelwatch` start
    from service.detect.compare import ComparisonReport
    from service.report.compare_table import SideLabel

FORMATS = ("text", "markdown", "json", "csv")
DEFAULT_MIN_EFFECT = 0.01  # neither --threshold nor --min-effect: a change of 1 % counts


def _threshold(text: str) -> float:
    from service.report.compare_view import parse_threshold

    try:
        return parse_threshold(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _pattern(text: str) -> re.Pattern[str]:
    from service.report.compare_view import compile_filter

    try:
        return compile_filter(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_report_options(parser: argparse.ArgumentParser, fail_on_default: FailOn) -> None:
    """The options `compare` and `ci` share: what to compare with which bar, what to show, when to fail."""
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (benchstat style), markdown (GitHub tables), json (compare.schema.json), csv")
    parser.add_argument("--alpha", type=probability, default=0.05, help="largest Benjamini-Hochberg q of a change")
    effect = parser.add_mutually_exclusive_group()
    effect.add_argument("--threshold", type=_threshold, default=None, metavar="PCT",
                        help="smallest change that counts, as 5%% or 0.05 (default 1%%)")
    effect.add_argument("--min-effect", dest="threshold", type=_threshold, default=None, metavar="FRACTION",
                        help="the same as --threshold, as a fraction (0.01 = 1%%)")
    parser.add_argument("--only-changed", action="store_true",
                        help="list only regressions and improvements, plus failed, new and missing benchmarks")
    parser.add_argument("--sort", choices=SORT_ORDERS, default="name",
                        help="name, or delta: the largest change either way first")
    parser.add_argument("--filter", type=_pattern, default=None, metavar="REGEX",
                        help="only benchmarks whose label (suite/name k=v ...) matches; the summary, geomeans and "
                             "exit status are of those")
    parser.add_argument("--fail-on", choices=FAIL_ON, default=fail_on_default,
                        help="exit 1 on: regression (a regression, or a benchmark that broke in head), any (any "
                             f"change, new, missing or failed benchmark), none (default: {fail_on_default})")


@dataclass(frozen=True)
class ReportOptions:
    """The options add_report_options adds, parsed."""

    format: str
    alpha: float
    min_effect: float
    only_changed: bool
    sort: SortOrder
    pattern: re.Pattern[str] | None  # --filter
    fail_on: FailOn


def report_options(args: argparse.Namespace) -> ReportOptions:
    """The options add_report_options added, out of a parsed `compare` or `ci` command line (for their adapters)."""
    min_effect = DEFAULT_MIN_EFFECT if args.threshold is None else float(args.threshold)
    return ReportOptions(args.format, args.alpha, min_effect, args.only_changed, args.sort, args.filter,
                         args.fail_on)


@dataclass(frozen=True)
class Comparison:
    report: ComparisonReport
    base: SideLabel
    head: SideLabel
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Rendered:
    text: str  # in the format asked for
    markdown: str  # always made: `ci` writes it to the step summary
    fail: bool
    why: str | None = None  # what fails it, in a few words (compare_view.fail_reason)


def render(found: Comparison, fmt: str, only_changed: bool, sort: SortOrder, pattern: re.Pattern[str] | None,
           fail_on: FailOn) -> Rendered:
    from service.report.compare_formats import format_csv, format_markdown
    from service.report.compare_table import format_text, to_json
    from service.report.compare_view import fail_reason, listing, restrict, should_fail

    report = restrict(found.report, pattern)
    rows = listing(report, only_changed, sort)
    notes = found.notes
    if len(report.rows) < len(found.report.rows):
        # The notes were made over every benchmark compared ("for 3 of 4 benchmarks ..."), which --filter narrowed.
        notes = tuple(f"(of all {len(found.report.rows)} results compared, before --filter) {n}" for n in notes)
    markdown = format_markdown(report, found.base, found.head, notes, rows)
    if fmt == "json":
        text = json.dumps(to_json(report, found.base, found.head, notes, rows=rows), indent=2) + "\n"
    elif fmt == "csv":
        text = format_csv(report, rows)
    elif fmt == "markdown":
        text = markdown
    else:
        text = format_text(report, found.base, found.head, notes, rows)
    return Rendered(text, markdown, should_fail(report, fail_on), fail_reason(report, fail_on))


def print_report(found: Comparison, options: ReportOptions) -> Rendered:
    """The comparison on standard output, in the format asked; what was printed, and whether to fail."""
    rendered = render(found, options.format, options.only_changed, options.sort, options.pattern, options.fail_on)
    sys.stdout.write(rendered.text)
    sys.stdout.flush()
    if rendered.why is not None:  # the exit status 1 that follows, said where a CI log shows it
        print(f"kernelwatch: failing: {rendered.why}", file=sys.stderr)
    return rendered
