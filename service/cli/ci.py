"""`kernelwatch ci`: inside a CI job, the suite at two commits benchmark by benchmark interleaved, stored (or
uploaded), exactly those runs compared, the report printed and appended to the job's step summary; with
--max-rounds, more rounds of the benchmarks still undecided. The exit status is compare's."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwatch.errors import InvalidInput, NotComparable
from service.cli.common import (
    EXIT_FOUND,
    EXIT_OK,
    Subparsers,
    at_least,
    cpu_isa,
    open_context,
    param_filter,
    run_progress,
)
from service.cli.compare import compare_remote
from service.cli.measure import (
    Measuring,
    environment_options,
    measured_for,
    measuring,
    naming_options,
    noise_options,
    repository_top,
)
from service.cli.report_options import Comparison, ReportOptions, add_report_options, print_report, report_options
from service.cli.same_project import check_same_project
from service.report.compare_table import terminal_text
from service.report.compare_view import suite_key
from service.settings import Settings

if TYPE_CHECKING:
    from service.detect.compare import Comparison as Row

# Even, so that each commit measures first in as many rounds as the other (ABBA balance: whatever going first
# costs falls on both alike). Four rounds pair into a t-test with 3 degrees of freedom, which a change a few times
# the round-to-round noise passes at alpha 0.05 (bench/verdict_calibration.py: +20 % found in 88 % of draws of
# three rounds, 100 % of five).
CI_ROUNDS = 4
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def register(sub: Subparsers) -> None:
    ci = sub.add_parser("ci", help="inside a CI job: run the suite at two commits (interleaved), store, compare, "
                                   "write the step summary, exit as compare does",
                        description="Runs BASE and HEAD benchmark by benchmark interleaved, stores the runs in the "
                                    "configured database (or uploads them with KERNELWATCH_URL and "
                                    "KERNELWATCH_TOKEN), compares exactly those runs, prints the report, appends "
                                    "it as markdown to $GITHUB_STEP_SUMMARY when set. Exit status: 0 nothing to "
                                    "report, 1 a regression (see --fail-on), 2 a usage or input error.")
    ci.add_argument("--base", required=True, metavar="REV", help="the commit to compare against (sha, branch, tag)")
    ci.add_argument("--head", default="HEAD", metavar="REV", help="the commit under test (default HEAD)")
    ci.add_argument("--working-tree", action="store_true",
                    help="the head is the working copy as it is (uncommitted edits, and untracked files git does not "
                         "ignore), measured interleaved with --base (e.g. --base HEAD: the edit against its commit); "
                         "its runs are stored under HEAD's sha as a working copy's, never a point of its history")
    ci.add_argument("--repo", type=Path, default=Path("."), help="the git repository (default: the current "
                                                                  "directory)")
    ci.add_argument("--benchmarks", type=Path, default=None, metavar="DIR|REV:DIR",
                    help="the benchmarks, kept apart from the measured code (as run --benchmarks)")
    ci.add_argument("--suite", default="*",
                     help="glob over suite/name, e.g. 'attention/*' (comma: several; without '/': a suite or a "
                          "benchmark's name)")
    ci.add_argument("--params", default="", type=param_filter,
                    help="only parameter points matching NAME=VALUE[,NAME=VALUE]")
    ci.add_argument("--quick", action="store_true", help="only each benchmark's quick points")
    ci.add_argument("--samples", type=at_least(1), default=10, help="timed samples per benchmark, commit and round "
                                                            "(default 10: samples in one process agree; the rounds "
                                                            "are what a verdict counts)")
    ci.add_argument("--rounds", type=at_least(1), default=CI_ROUNDS, metavar="R",
                    help=f"runs per commit, each a fresh benchmark process, interleaved ABBA (default {CI_ROUNDS}; "
                         "give an even number, so that each commit goes first as often; one round a side can only "
                         "decide against a spread between runs already stored for the series)")
    ci.add_argument("--max-rounds", type=at_least(1), default=None, metavar="M",
                    help="adaptive: while a benchmark is undecided (inconclusive, and more runs would decide), two "
                         "more rounds of just those benchmarks, up to M rounds a commit; --alpha is then split "
                         "evenly over the looks at the data this allows (Bonferroni), so that testing again "
                         "never raises the false-verdict rate past it (default: --rounds, not adaptive)")
    ci.add_argument("--warmup", type=at_least(0), default=3, help="untimed calls before sampling (default 3)")
    ci.add_argument("--hardware", default="cpu", type=str.lower,  # CPU is cpu: it read as an accelerator's name
                    help="cpu: the suite must run on JAX's CPU backend; any other name (h200...): on an accelerator, "
                         "else exit 2")
    ci.add_argument("--no-capture", action="store_true", help="keep only times (faster): no HLO, dumps or traces")
    ci.add_argument("--cpu-isa", type=cpu_isa, default=None, metavar="ISA", help="pin the widest x86 ISA XLA may use")
    noise_options(ci)
    environment_options(ci)
    naming_options(ci)
    ci.add_argument("--trigger", default="pr", choices=["push", "pr", "manual"])
    add_report_options(ci, fail_on_default="regression")
    ci.set_defaults(handler=_ci)


@dataclass(frozen=True)
class CiOptions:
    base: str
    head: str
    repo: Path
    measuring: Measuring
    rounds: int
    max_rounds: int | None  # None: --rounds, not adaptive
    hardware: str  # cpu, or the accelerator the suite must have run on
    report: ReportOptions
    working_tree: bool = False  # the head is the working copy (``head`` is then HEAD)


@dataclass(frozen=True)
class CiRun:
    """The runs `ci` made of one commit: one per environment the suite needed and round."""

    sha: str
    run_ids: tuple[str, ...]


def _ci(args: argparse.Namespace, settings: Settings) -> int:
    if args.working_tree and args.head != "HEAD":
        raise InvalidInput("--working-tree is the head (the working copy, on top of HEAD): no --head with it")
    return cmd_ci(settings, CiOptions(args.base, args.head, repository_top(args.repo), measuring(args), args.rounds,
                                      args.max_rounds, args.hardware, report_options(args), args.working_tree))


def _warn_if_one_commit(options: CiOptions) -> None:
    """Base and head naming one commit (``--base HEAD`` on a branch with nothing committed yet) measure the code
    against itself: said, so that the table is read as the A/A check it is. (Whether the working copy holds edits
    is not asked: `git status` in the user's repository could run its filters; `ci` measures commits either way.)
    The working copy as the head (``--working-tree``) is another code, whatever ``--base`` names."""
    from runners.gitrepo import GitError, resolve

    if options.working_tree:
        return
    try:
        base, head = resolve(options.repo, options.base), resolve(options.repo, options.head)
    except GitError:
        return  # an unknown revision: run_commits says so, in its own words
    if base == head:
        print(f"kernelwatch: warning: --base {options.base} and --head {options.head} are one commit "
              f"({base[:12]}): this compares its code with itself (its uncommitted edits are not measured; "
              "`--working-tree` measures them against --base)", file=sys.stderr)


def cmd_ci(settings: Settings, options: CiOptions) -> int:
    from service.detect.compare import (
        ROUNDS_PER_LOOK,
        RUNS_NEEDED_MARGIN,
        adaptive_looks,
        looks_alpha,
        worth_more_rounds,
    )

    rounds = options.rounds  # at least 1, as are the samples: argparse's types (service/cli/common.py at_least)
    max_rounds = rounds if options.max_rounds is None else options.max_rounds
    if max_rounds < rounds:
        raise InvalidInput(f"--max-rounds {max_rounds} is fewer than --rounds {rounds}")
    if rounds == 1:
        print("kernelwatch: warning: one round a side: a benchmark is decided only against the spread between runs "
              "stored for its series, and is inconclusive without one (give --rounds 4)", file=sys.stderr)
    looks = adaptive_looks(rounds, max_rounds)
    alpha = looks_alpha(options.report.alpha, looks)

    if settings.uploads_over_http:  # a token that cannot submit: said before measuring, not after
        from service.context import http_uploader

        http_uploader(settings).check_credentials()
    check_same_project(settings, options.repo, measured_for(options.repo, options.measuring, settings).name,
                       options.base)
    _warn_if_one_commit(options)
    ids = [uuid.uuid4().hex, uuid.uuid4().hex]
    made = run_both(settings, options, run_progress, rounds=rounds, run_ids=ids)
    per_commit, done = made, rounds
    notes: list[str] = []
    beyond: frozenset[str] = frozenset()  # undecided benchmarks no more rounds could settle (worth_more_rounds)
    while True:
        try:
            found = _store_and_compare(settings, options, [m for manifests in made for m in manifests],
                                       ci_runs(per_commit), alpha)
        except NotComparable as exc:
            return _not_compared(str(exc), options.report.fail_on)
        undecided = frozenset(suite_key(row.key) for row in found.report.rows if worth_more_rounds(row, max_rounds))
        if done < max_rounds:
            beyond |= _out_of_reach(found.report.rows, max_rounds, beyond | undecided)
        if not undecided or done >= max_rounds:
            break
        more = min(ROUNDS_PER_LOOK, max_rounds - done)
        print(f"{len(undecided)} benchmark(s) undecided after {done} rounds: {more} more round(s) of them",
              file=sys.stderr)
        made = run_both(settings, options, run_progress, rounds=more, run_ids=ids, first_round=done, only=undecided)
        per_commit = [old + new for old, new in zip(per_commit, made, strict=True)]
        done += more
        notes = [f"adaptive rounds: {rounds} to {max_rounds} a commit while a benchmark was undecided, "
                 f"{done} made; each of the {looks} looks at the data tested at alpha {alpha:.3g} "
                 f"(--alpha {options.report.alpha:g} split over them)"]
    if beyond:
        notes.append(f"{len(beyond)} benchmark(s) left undecided before --max-rounds {max_rounds}: their spread "
                     f"between runs put a decision past {RUNS_NEEDED_MARGIN * max_rounds} runs a side (each row's "
                     "runs needed says how far)")
    if notes:
        found = dataclasses.replace(found, notes=found.notes + tuple(notes))
    rendered = print_report(found, options.report)
    verdict = (f"**KernelWatch: failing** ({rendered.why})" if rendered.why is not None else
               f"**KernelWatch: passing** (--fail-on {options.report.fail_on})")
    heading, _, rest = rendered.markdown.partition("\n")  # the verdict right under the report's heading
    written = append_step_summary(f"{heading}\n\n{verdict}\n{rest}")
    if written is not None:
        print(f"report appended to {written}", file=sys.stderr)
    return EXIT_FOUND if rendered.fail else EXIT_OK


def _not_compared(reason: str, fail_on: str) -> int:
    """Base and head ran on different hardware or settings (runs read from a service whose runners differ; a
    toolchain change alone is compared, service/pipeline/compare.py hardware_fingerprint): nothing to compare, which
    is no usage error (exit 2 failed such a pull request's job). Said in the log and the job summary; a failure only
    under --fail-on any, which any change fails."""
    failing = fail_on == "any"
    verdict = "failing" if failing else "not compared"
    print(f"kernelwatch: {verdict}: {reason}", file=sys.stderr)
    written = append_step_summary(f"### KernelWatch comparison\n\n**KernelWatch: {verdict}** (--fail-on {fail_on}): "
                                  f"{terminal_text(reason)}\n")
    if written is not None:
        print(f"report appended to {written}", file=sys.stderr)
    return EXIT_FOUND if failing else EXIT_OK


def _out_of_reach(rows: Sequence[Row], max_rounds: int, told: frozenset[str]) -> frozenset[str]:
    """The undecided benchmarks more rounds are not given (compare.worth_more_rounds), said once each (``told``:
    said before, or measured again for another of their metrics), so that a job stopping short of --max-rounds
    says why."""
    from service.detect.compare import RUNS_NEEDED_MARGIN, more_runs_would_decide, worth_more_rounds

    beyond = frozenset(suite_key(row.key) for row in rows
                       if more_runs_would_decide(row) and not worth_more_rounds(row, max_rounds)) - told
    if beyond:
        print(f"{len(beyond)} benchmark(s) undecided but not measured again: their spread between runs puts a "
              f"decision past {RUNS_NEEDED_MARGIN * max_rounds} runs a side ({RUNS_NEEDED_MARGIN} x --max-rounds; "
              "see each row's runs needed); a quieter host or --xla-single-thread is the remedy", file=sys.stderr)
    return beyond


def _store_and_compare(settings: Settings, options: CiOptions, documents: list[dict[str, Any]],
                       runs: list[CiRun], alpha: float) -> Comparison:
    """Store (or upload) the runs just made, then compare exactly the runs `ci` made so far at ``alpha``."""
    from service.contract import parse_manifest

    # Never store, nor compare, a run the service would refuse (the backend was checked after each run_both's
    # first round).
    for m in map(parse_manifest, documents):
        failed = [r for r in m.results if r.metric == "wall_time" and r.status != "ok"]
        for r in failed:
            print(terminal_text(f"FAILED {m.commit.sha[:10]} {r.suite}/{r.name} {r.params_key()}: {r.message}"),
                  file=sys.stderr)
    min_effect = options.report.min_effect
    if settings.uploads_over_http:
        from service.context import http_uploader

        send = http_uploader(settings)
        for doc in documents:
            send(doc)
        assert settings.service_url is not None
        # Exactly this job's runs (a commit's other stored runs stay out): their ids, joined by commas.
        refs = [",".join(run.run_ids) for run in runs]
        print(f"uploaded {len(documents)} run(s) to {send.api}", file=sys.stderr)
        return compare_remote(settings.service_url, settings.service_token, settings.repos_dir, refs[0], refs[1],
                              None, alpha, min_effect)
    ctx = open_context(settings)
    try:
        for m in map(parse_manifest, documents):
            ctx.submit(m)
    finally:
        ctx.close()
    print(f"stored {len(documents)} run(s) in {settings.effective_database_url.split('://', 1)[0]}; compared again "
          f"by `kernelwatch compare {','.join(runs[0].run_ids)} {','.join(runs[1].run_ids)}`", file=sys.stderr)
    return compare_runs(settings, runs[0].run_ids, runs[1].run_ids, alpha, min_effect)


def compare_runs(settings: Settings, base_runs: Sequence[str], head_runs: Sequence[str], alpha: float,
                 min_effect: float) -> Comparison:
    """Exactly these runs on each side (what `ci` just made), from the configured database."""
    from service.pipeline.compare import compare_params, compare_resolved, runs_side

    ctx = open_context(settings)
    try:
        with ctx.sessions() as session:
            outcome = compare_resolved(session, runs_side(session, base_runs), runs_side(session, head_runs),
                                       compare_params(alpha, min_effect))
    finally:
        ctx.close()
    return Comparison(outcome.report, outcome.base, outcome.head, outcome.notes)


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


def run_both(settings: Settings, options: CiOptions, progress: Callable[[int, int, str], None] | None = None, *,
             rounds: int, run_ids: Sequence[str], first_round: int = 0,
             only: frozenset[str] | None = None) -> list[list[dict[str, Any]]]:
    """Both commits' suites (``only`` these benchmarks of them, when given), benchmark by benchmark interleaved
    (ABBA...), ``rounds`` times from round ``first_round`` of the session ``run_ids`` names, through
    `kernelwatch run`'s path; each commit's manifests."""
    from runners.build_step import BuildFailed
    from runners.envs import EnvironmentBuildError
    from runners.gitrepo import GitError
    from runners.local import NothingSelected, RunRequest, run_commits
    from runners.session import ProcessFailed

    m, repo, base, head = options.measuring, options.repo, options.base, options.head
    capture_dir = settings.artifacts_dir if m.capture else None  # (round 0's only: run_commits)
    measured = measured_for(repo, m, settings)
    requests = [RunRequest(repo=repo, rev=rev, samples=m.samples, warmup=m.warmup, suite=m.suite,
                           benchmarks=measured.benchmarks, environment=measured.environment,
                           python=measured.python, build=measured.build, params=m.params, quick=m.quick,
                           trigger=m.trigger, capture_dir=capture_dir, cpu_isa=m.cpu_isa,
                           cpu_affinity=m.cpu_affinity, xla_single_thread=m.xla_single_thread,
                           keep_pages=m.keep_pages, only=only, repository_name=measured.name,
                           working_tree=options.working_tree and side == "head")
                for side, rev in (("base", base), ("head", head))]

    def first_round_made(per_commit: list[list[dict[str, Any]]]) -> None:
        # An empty selection, or a suite on the wrong backend, is the same in every round: a job misconfigured
        # so fails after two benchmark processes, not after all of its rounds.
        for (name, rev), manifests in zip((("base", base), ("head", head)), per_commit, strict=True):
            if not manifests:
                raise InvalidInput(f"{name} {rev}: the suite selected no benchmark (check --suite and --params)")
        check_hardware(options.hardware, [m for manifests in per_commit for m in manifests])

    settings.ensure_dirs()
    try:
        return run_commits(requests, settings.worktree_dir, progress, run_ids=run_ids, rounds=rounds,
                           first_round=first_round, after_first_round=first_round_made)
    except (GitError, EnvironmentBuildError, BuildFailed, NothingSelected) as exc:  # an unknown ref, an unbuildable
        raise InvalidInput(str(exc)) from None  # commit, a --suite that names nothing the suite declares
    except ProcessFailed as exc:
        # The suite could not start at all (none found, its package failed to import): one line and exit 2, never a
        # traceback and exit 1, which a CI job reads as a regression found.
        last = str(exc).strip().splitlines()[-1] if str(exc).strip() else "no message"
        raise InvalidInput(f"the benchmark process failed ({base} or {head}): {last}") from None


def ci_runs(per_commit: Sequence[Sequence[dict[str, Any]]]) -> list[CiRun]:
    """Each commit's runs, from its manifests (every round made so far)."""
    return [CiRun(str(manifests[0]["commit"]["sha"]), tuple(str(m["run_id"]) for m in manifests))
            for manifests in per_commit]
