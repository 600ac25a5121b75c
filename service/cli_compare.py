"""What `kernelwatch compare` and `kernelwatch ci` do once their arguments are parsed: find the comparison (the
configured database, or a service's API), narrow and order it as asked, print it in the format asked, and say
what the exit status is. The formatting itself is pure (service/report/); this module only wires it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwatch.errors import InvalidInput, NotFound
from service.report.compare_view import FAIL_ON, SORT_ORDERS, FailOn, SortOrder
from service.settings import Settings

if TYPE_CHECKING:  # numpy and scipy behind them: not for every `kernelwatch` start
    from service.detect.compare import BenchmarkKey, ComparisonReport
    from service.report.compare_table import SideLabel

FORMATS = ("text", "markdown", "json", "csv")
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
TOKEN_ENV = "KERNELWATCH_TOKEN"


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
    parser.add_argument("--alpha", type=float, default=0.05, help="largest Benjamini-Hochberg q of a change")
    effect = parser.add_mutually_exclusive_group()
    effect.add_argument("--threshold", type=_threshold, default=None, metavar="PCT",
                        help="smallest change that counts, as 5%% or 0.05 (default 1%%)")
    effect.add_argument("--min-effect", dest="threshold", type=float, default=None, metavar="FRACTION",
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


def render(found: Comparison, fmt: str, only_changed: bool, sort: SortOrder, pattern: re.Pattern[str] | None,
           fail_on: FailOn) -> Rendered:
    from service.report.compare_formats import format_csv, format_markdown
    from service.report.compare_table import format_text, to_json
    from service.report.compare_view import listing, restrict, should_fail

    report = restrict(found.report, pattern)
    rows = listing(report, only_changed, sort)
    markdown = format_markdown(report, found.base, found.head, found.notes, rows)
    if fmt == "json":
        text = json.dumps(to_json(report, found.base, found.head, found.notes, rows=rows), indent=2) + "\n"
    elif fmt == "csv":
        text = format_csv(report, rows)
    elif fmt == "markdown":
        text = markdown
    else:
        text = format_text(report, found.base, found.head, found.notes, rows)
    return Rendered(text, markdown, should_fail(report, fail_on))


def compare_stored(settings: Settings, context: Callable[[Settings], Any], base: str, head: str,
                   repository: str | None, alpha: float, min_effect: float) -> Comparison:
    """From the configured database; branch and tag names resolved with git in ``repository``."""
    from service.pipeline.compare import compare_refs
    from service.pipeline.git_refs import GitRefResolver

    ctx = context(settings)
    try:
        with ctx.sessions() as session:
            outcome = compare_refs(session, base, head, repository=repository, alpha=alpha,
                                   min_effect=min_effect, refs=GitRefResolver(settings.repos_dir))
    finally:
        ctx.close()
    return Comparison(outcome.report, outcome.base, outcome.head, outcome.notes)


def compare_runs(settings: Settings, context: Callable[[Settings], Any], base_runs: Sequence[str],
                 head_runs: Sequence[str], alpha: float, min_effect: float) -> Comparison:
    """Exactly these runs on each side (what `ci` just made), from the configured database."""
    from service.pipeline.compare import compare_params, compare_resolved, runs_side

    ctx = context(settings)
    try:
        with ctx.sessions() as session:
            outcome = compare_resolved(session, runs_side(session, base_runs), runs_side(session, head_runs),
                                       compare_params(alpha, min_effect))
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


def token_for(args: argparse.Namespace) -> str | None:
    return args.token or os.environ.get(TOKEN_ENV, "").strip() or None


def append_step_summary(markdown: str) -> Path | None:
    """Append to the GitHub Actions job summary when the job has one (other CI systems: nothing happens)."""
    target = os.environ.get(STEP_SUMMARY_ENV, "").strip()
    if not target:
        return None
    path = Path(target)
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(markdown + "\n")
    except OSError as exc:
        # The report was printed already; a summary that cannot be written is worth a warning, not a failure.
        print(f"kernelwatch: warning: cannot write ${STEP_SUMMARY_ENV} ({path}): {exc.strerror}", file=sys.stderr)
        return None
    return path


@dataclass(frozen=True)
class CiRun:
    """The runs `ci` made of one commit: one per environment the suite needed and round."""

    sha: str
    run_ids: tuple[str, ...]


def check_hardware(hardware: str, manifests: Sequence[dict[str, Any]]) -> None:
    """``cpu`` must have run on JAX's CPU backend; anything else (h200, v5e...) on an accelerator. JAX falls back
    to the CPU without a word when a GPU plugin is missing, and CPU numbers compared as a GPU job's would pass
    every gate."""
    for manifest in manifests:
        environment = manifest.get("environment", {})
        backend = str(environment.get("backend", "?"))
        if (hardware == "cpu") != (backend == "cpu"):
            raise InvalidInput(f"--hardware {hardware}, but the suite ran on the {backend} backend "
                               f"({environment.get('device_kind', '?')}): is this the right runner, and can JAX "
                               "see its devices?")


@dataclass(frozen=True)
class Measured:
    """Where the benchmarks are and what interpreter runs them: the options, else the project file."""

    benchmarks: Path | None  # None: the commit's own kernels_under_test/
    environment: str = "runner"  # runner | commit (runners/envs.py)
    python: Path | None = None  # a user-named interpreter
    build: tuple[str, ...] | None = None  # the project file's build, run in each checkout (runners/build_step.py)


def measured_for(repo: Path, args: argparse.Namespace, settings: Settings) -> Measured:
    """``--benchmarks``, ``--environment`` and ``--python`` where given, else what the repository's project file
    says (runners/project_file.py), else the defaults (the commit's own kernels_under_test/, this interpreter).
    ``--benchmarks REV:DIR`` is the directory as of a commit of the repository (checked out by KernelWatch)."""
    from runners.gitrepo import GitError
    from runners.local import suite_at
    from runners.project_file import ProjectFileError, check_interpreter, read_project_settings

    given, environment, python = (getattr(args, name, None) for name in ("benchmarks", "environment", "python"))
    if given is not None and not Path(given).is_dir():
        rev, sep, directory = str(given).partition(":")
        if not sep or not rev or not directory:
            raise InvalidInput(f"--benchmarks {given}: not a directory (nor REV:DIR, a directory as of a commit)")
        try:
            given = suite_at(repo, rev, directory, settings.worktree_dir, settings.repos_dir)
        except GitError as exc:
            raise InvalidInput(f"--benchmarks {given}: {exc}") from None
    try:
        if python is not None:
            python = check_interpreter(python, f"--python {python}")
        project = read_project_settings(repo)
    except ProjectFileError as exc:
        raise InvalidInput(str(exc)) from None
    if environment is None and python is None:  # neither option given: the project file's choice
        environment, python = project.environment, project.python
    return Measured(given if given is not None else project.benchmarks, environment or "runner", python,
                    project.build)


def run_both(settings: Settings, repo: Path, base: str, head: str, args: argparse.Namespace,
             progress: Callable[[int, int, str], None] | None = None, *, rounds: int, run_ids: Sequence[str],
             first_round: int = 0, only: frozenset[str] | None = None) -> list[list[dict[str, Any]]]:
    """Both commits' suites (``only`` these benchmarks of them, when given), benchmark by benchmark interleaved
    (ABBA...), ``rounds`` times from round ``first_round`` of the session ``run_ids`` names, through
    `kernelwatch run`'s path; each commit's manifests."""
    from runners.build_step import BuildFailed
    from runners.envs import EnvironmentBuildError
    from runners.gitrepo import GitError
    from runners.local import RunRequest, run_commits

    capture_dir = None if args.no_capture else settings.artifacts_dir  # (round 0's only: run_commits)
    measured = measured_for(repo, args, settings)
    requests = [RunRequest(repo=repo, rev=rev, samples=args.samples, warmup=args.warmup, suite=args.suite,
                           benchmarks=measured.benchmarks, environment=measured.environment,
                           python=measured.python, build=measured.build, params=args.params, quick=args.quick,
                           trigger=args.trigger,
                           capture_dir=capture_dir,
                           cpu_isa=args.cpu_isa, cpu_affinity=args.cpu_affinity,
                           xla_single_thread=args.xla_single_thread, only=only) for rev in (base, head)]
    settings.ensure_dirs()
    try:
        per_commit = run_commits(requests, settings.worktree_dir, progress, run_ids=run_ids, rounds=rounds,
                                 first_round=first_round)
    except (GitError, EnvironmentBuildError, BuildFailed) as exc:  # an unknown ref, an unbuildable commit
        raise InvalidInput(str(exc)) from None
    for (name, rev), manifests in zip((("base", base), ("head", head)), per_commit, strict=True):
        if not manifests:
            raise InvalidInput(f"{name} {rev}: the suite selected no benchmark (check --suite and --params)")
    return per_commit


def ci_runs(per_commit: Sequence[Sequence[dict[str, Any]]]) -> list[CiRun]:
    """Each commit's runs, from its manifests (every round made so far)."""
    return [CiRun(str(manifests[0]["commit"]["sha"]), tuple(str(m["run_id"]) for m in manifests))
            for manifests in per_commit]


def suite_key(key: BenchmarkKey) -> str:
    """The key the suite runs a benchmark by (``suite/name[k=v,...]``, runners/suite.py) of a compared one."""
    return f"{key.suite}/{key.name}[{','.join(f'{k}={v}' for k, v in key.params)}]"
