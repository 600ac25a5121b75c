"""`kernelwatch compare`: two runs or commits benchmark by benchmark (benchstat style), read from the configured
database or from a service's API, printed in the format asked; the exit status says whether to fail."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelwatch.errors import InvalidInput, NotFound
from service.cli.common import EXIT_FOUND, EXIT_OK, Subparsers, open_context, service_url, uploads_elsewhere
from service.cli.report_options import Comparison, ReportOptions, add_report_options, print_report, report_options
from service.settings import Settings

TOKEN_ENV = "KERNELWATCH_TOKEN"


def register(sub: Subparsers) -> None:
    compare = sub.add_parser("compare", help="compare two runs or commits benchmark by benchmark (benchstat style)",
                             description="Exit status: 0 nothing to report under --fail-on, 1 a regression (any "
                                         "change with --fail-on any), 2 a usage or input error.")
    compare.add_argument("base", help="run id, commit sha, unique sha prefix (4 hex digits or more), or with --repo "
                                      "a branch or tag name")
    compare.add_argument("head", help="as BASE")
    compare.add_argument("--repo", default=None, help="look commits up in this repository (by name); branch and tag "
                                                      "names are resolved with git at its stored URL")
    compare.add_argument("--url", type=service_url, default=None,
                         help="read from this KernelWatch service (http://host:8000) instead of the configured "
                              "database (default: KERNELWATCH_URL where it and KERNELWATCH_TOKEN are set and no "
                              "database is)")
    compare.add_argument("--token", default=None, help="API token for --url when its reads need one (default: "
                                                       "$KERNELWATCH_TOKEN)")
    add_report_options(compare, fail_on_default="none")
    compare.add_argument("--fail-on-regression", dest="fail_on", action="store_const", const="regression",
                         help="the same as --fail-on regression")
    compare.set_defaults(handler=_compare)


@dataclass(frozen=True)
class CompareOptions:
    base: str  # a run id, sha, sha prefix, or (with repo) a branch or tag name
    head: str
    repo: str | None  # look commits up in this repository (by name)
    url: str | None  # read from this service instead of the configured database
    token: str | None  # for url's reads (None: $KERNELWATCH_TOKEN, if set)
    report: ReportOptions


def _compare(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_compare(settings, CompareOptions(args.base, args.head, args.repo, args.url, args.token,
                                                report_options(args)))


def cmd_compare(settings: Settings, options: CompareOptions) -> int:
    report = options.report
    if options.url:
        found = compare_remote(options.url, token_for(options.token), settings.repos_dir, options.base,
                               options.head, options.repo, report.alpha, report.min_effect)
    elif uploads_elsewhere(settings):
        # This host's runs went to the service (as `ci` compares there): its own store holds none of them.
        assert settings.service_url is not None
        print(f"reading from {settings.service_url} (KERNELWATCH_URL; --url names another)", file=sys.stderr)
        found = compare_remote(settings.service_url, options.token or settings.service_token, settings.repos_dir,
                               options.base, options.head, options.repo, report.alpha, report.min_effect)
    else:
        found = compare_stored(settings, options.base, options.head, options.repo, report.alpha, report.min_effect)
    return EXIT_FOUND if print_report(found, report).fail else EXIT_OK


def compare_stored(settings: Settings, base: str, head: str, repository: str | None, alpha: float,
                   min_effect: float) -> Comparison:
    """From the configured database; branch and tag names resolved with git in ``repository``."""
    from service.pipeline.compare import compare_refs
    from service.pipeline.git_refs import GitRefResolver

    ctx = open_context(settings)
    try:
        with ctx.sessions() as session:
            outcome = compare_refs(session, base, head, repository=repository, alpha=alpha,
                                   min_effect=min_effect, refs=GitRefResolver(settings.repos_dir))
    finally:
        ctx.close()
    return Comparison(outcome.report, outcome.base, outcome.head, outcome.notes)


def compare_remote(url: str, token: str | None, repos_dir: Path, base: str, head: str, repository: str | None,
                   alpha: float, min_effect: float) -> Comparison:
    """From a service: every page of GET /api/v1/compare, rebuilt into the report a database read gives. A
    branch or tag name the service does not know is resolved here with git, in the repository at the URL the
    service stores for ``repository``, and asked again as a sha."""
    from service.integrations.compare_api import CompareClient
    from service.pipeline.compare import compare_params
    from service.pipeline.git_refs import GitRefResolver
    from service.report.compare_table import from_json, labels_from_json

    compare_params(alpha, min_effect)  # refuse a bad --alpha here, as the database path does
    client = CompareClient(url, token)
    try:
        document = client.compare(base, head, repository, alpha, min_effect)
    except NotFound:
        location = client.repository_url(repository) if repository else None
        if location is None:
            raise
        resolver = GitRefResolver(repos_dir)
        shas = [resolver(location, ref) if not _stored_looking(ref) else None for ref in (base, head)]
        if shas == [None, None]:
            raise
        document = client.compare(shas[0] or base, shas[1] or head, repository, alpha, min_effect)
        for side, ref in (("base", base), ("head", head)):  # label each side with what the user typed
            document[side]["ref"] = ref
    try:
        report, notes = from_json(document)
        base_label, head_label = labels_from_json(document)
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(f"the service at {client.api} answered something that is not a comparison: "
                           f"{exc}") from None
    return Comparison(report, base_label, head_label, notes)


def _stored_looking(ref: str) -> bool:
    """A full sha is exactly what it names: no git ref to look for."""
    return len(ref) == 40 and all(c in "0123456789abcdefABCDEF" for c in ref)


def token_for(given: str | None) -> str | None:
    """``--token``, else $KERNELWATCH_TOKEN (which main leaves out of the settings for `compare --url`)."""
    return given or os.environ.get(TOKEN_ENV, "").strip() or None
