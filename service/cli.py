"""The `kernelwatch` command. Argument parsing is kept apart from the functions that do the work, and user
errors become exit codes in one place (`main`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelwatch.errors import ConfigurationError, InvalidInput, KernelWatchError
from runners.uploader import UploadError
from service import cli_deliveries
from service.cli_compare import CiRun, Comparison, Rendered, add_report_options
from service.report.compare_table import terminal_safe, terminal_text
from service.settings import Settings, load_settings

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2
# Even, so that each commit measures first in as many rounds as the other (ABBA balance: whatever going first
# costs falls on both alike). Four rounds pair into a t-test with 3 degrees of freedom, which a change a few times
# the round-to-round noise passes at alpha 0.05 (bench/verdict_calibration.py: +20 % found in 88 % of draws of
# three rounds, 100 % of five).
CI_ROUNDS = 4


def _environment_options(parser: argparse.ArgumentParser) -> None:
    """What interpreter runs the benchmarks (README: Your repository); either overrides the project file's."""
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--environment", choices=("runner", "commit"), default=None,
                        help="commit: each commit's benchmarks run in an environment built from that commit's own "
                             "uv.lock, requirements.txt or [project] dependencies (with uv, cached by what it was "
                             "built from); runner: KernelWatch's own interpreter (default, unless the project file "
                             "says otherwise)")
    chosen.add_argument("--python", type=Path, default=None, metavar="PATH",
                        help="run the benchmarks in this interpreter (the project's dependencies installed in it)")


def _noise_options(parser: argparse.ArgumentParser) -> None:
    """CPU noise reduction a user can turn on (README: what each costs); both are part of the environment, so
    runs with them compare only with runs with them."""
    from runners.pinning import parse_cpu_list

    parser.add_argument("--cpu-affinity", type=parse_cpu_list, default=None, metavar="CPUS",
                        help="pin each benchmark process to these CPUs (2-3, 0,2) before JAX starts")
    parser.add_argument("--xla-single-thread", action="store_true",
                        help="hold XLA's CPU thread pool to one thread (PJRT_NPROC=1)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelwatch", description="Kernel performance regressions, per commit.")
    sub = parser.add_subparsers(dest="command", required=True)

    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    up = db_sub.add_parser("upgrade", help="apply migrations")
    up.add_argument("--revision", default="head")
    db_sub.add_parser("backfill-roofline", help="compute the roofline figures of stored results that lack them "
                      "(stored before migration 0011, or before their hardware had figures); `db upgrade` does it too")

    run = sub.add_parser("run", help="run the suite of a repository at a commit and store the results")
    run.add_argument("--repo", type=Path, required=True,
                     help="path of a git repository (holding kernels_under_test/, unless --benchmarks)")
    run.add_argument("--commit", action="append", default=None, metavar="REV",
                     help="revision to run (sha, branch, tag...); give it twice to interleave two commits "
                          "benchmark by benchmark (ABBA...). Default HEAD")
    run.add_argument("--working-tree", action="store_true",
                     help="measure the working copy as it is (uncommitted edits and untracked files git does not "
                          "ignore), under HEAD's sha: stored as a dirty run, an environment of its own, never a "
                          "point of the commit's history; nothing is written to the repository")
    run.add_argument("--commits", default=None, metavar="A..B",
                     help="every first-parent commit after A up to B, oldest first, one at a time")
    run.add_argument("--commits-file", type=Path, default=None, metavar="FILE",
                     help="the commits to run, one revision a line (# comments; - for stdin)")
    run.add_argument("--every", type=int, default=1, metavar="N",
                     help="with --commits/--commits-file: every Nth commit, counted back from the last (default 1)")
    run.add_argument("--skip-existing", action="store_true",
                     help="skip commits the local store already holds a run of")
    run.add_argument("--benchmarks", type=Path, default=None, metavar="DIR|REV:DIR",
                     help="the benchmarks, kept apart from the measured code: a directory of benchmark modules "
                          "(or REV:DIR, that directory as of a commit of the repository, e.g. main:benchmarks) "
                          "applied to every commit, results stored under each commit's own sha")
    run.add_argument("--samples", type=int, default=20, help="timed samples per benchmark and round (default 20)")
    run.add_argument("--rounds", type=int, default=1, metavar="R",
                     help="runs per commit, each a fresh benchmark process, interleaved across commits (ABBA): the "
                          "runs are the replicates a comparison counts (default 1)")
    run.add_argument("--warmup", type=int, default=3, help="untimed calls before sampling (default 3)")
    run.add_argument("--suite", default="*", help="glob over suite/name, e.g. 'attention/*' (comma: several)")
    run.add_argument("--params", default="", help="only parameter points matching NAME=VALUE[,NAME=VALUE]")
    run.add_argument("--quick", action="store_true", help="only each benchmark's quick points")
    run.add_argument("--no-capture", action="store_true",
                     help="keep only times: no HLO, analyses, compiler dumps or profiler traces")
    run.add_argument("--cpu-isa", default=None, metavar="ISA",
                     help="pin the widest x86 ISA XLA may use (AVX2, AVX512...) so that hosts compare")
    _noise_options(run)
    _environment_options(run)
    run.add_argument("--branch", default=None, help="branch the commit belongs to (default: detected)")
    run.add_argument("--trigger", default="manual", choices=["push", "pr", "manual", "bisect", "confirm"])
    run.add_argument("--output", type=Path, default=None, help="also write each manifest into this directory")
    run.add_argument("--no-ingest", action="store_true",
                     help="do not store (nor upload, with KERNELWATCH_URL and KERNELWATCH_TOKEN); use with --output")

    ingest = sub.add_parser("ingest", help="store a manifest file produced by a runner")
    ingest.add_argument("manifest", type=Path)

    serve = sub.add_parser("serve", help="serve the dashboard")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)

    demo = sub.add_parser("demo", help="build a scratch repository with a planted regression, run and detect it")
    demo.add_argument("--workdir", type=Path, default=None, help="scratch directory (default: $KERNELWATCH_HOME/demo)")
    demo.add_argument("--samples", type=int, default=15, help="timed samples per benchmark and run")
    demo.add_argument("--rounds", type=int, default=3, help="runs per commit, interleaved across commits")
    demo.add_argument("--no-serve", action="store_true", help="exit after the summary instead of serving")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8000)

    submit = sub.add_parser("submit", help="enqueue a suite run at a commit on a hardware queue")
    submit.add_argument("--repo", required=True, help="repository URL or local path")
    submit.add_argument("--commit", required=True, help="revision (a local path's is pinned to its sha now)")
    submit.add_argument("--hardware", default="cpu", help="runner queue: runner.<hardware> (default cpu)")
    submit.add_argument("--suite", default="*")
    submit.add_argument("--params", default="")
    submit.add_argument("--quick", action="store_true")
    submit.add_argument("--no-capture", action="store_true")
    submit.add_argument("--samples", type=int, default=20)
    submit.add_argument("--rounds", type=int, default=1, help="runs of the commit, each a fresh process")
    submit.add_argument("--trigger", default="push", choices=["push", "pr", "manual", "bisect", "confirm"])
    submit.add_argument("--branch", default=None)

    parse = sub.add_parser("parse", help="run one parser on a file and print its records")
    parse.add_argument("kind", choices=["xplane", "hlo", "x86-obj", "sass", "llo"])
    parse.add_argument("path", type=Path)
    parse.add_argument("--format", choices=["json"], default="json")
    parse.add_argument("--no-disassembly", action="store_true", help="leave the instruction listings out")

    sub.add_parser("reparse", help="parse again the artifacts whose parser is newer than what read them")

    prune = sub.add_parser("prune", help="retention: delete the raw artifacts of runs older than a duration; "
                           "results, summaries, parsed records, findings and what open alerts need stay")
    prune.add_argument("--older-than", metavar="DURATION",
                       help="e.g. 90d, 12h, 30m, 2w (or parts together: 1w3d); with --checkouts: unused for that "
                       "long (default 1h)")
    prune.add_argument("--checkouts", action="store_true",
                       help="delete KernelWatch's checkouts of measured commits (KERNELWATCH_HOME/worktrees) and "
                       "the commits' environments (KERNELWATCH_HOME/envs) instead; a run makes them again when it "
                       "needs them")
    prune.add_argument("--dry-run", action="store_true", help="print what would go and change nothing")

    compare = sub.add_parser("compare", help="compare two runs or commits benchmark by benchmark (benchstat style)",
                             description="Exit status: 0 nothing to report under --fail-on, 1 a regression (any "
                                         "change with --fail-on any), 2 a usage or input error.")
    compare.add_argument("base", help="run id, commit sha, unique sha prefix (4 hex digits or more), or with --repo "
                                      "a branch or tag name")
    compare.add_argument("head", help="as BASE")
    compare.add_argument("--repo", default=None, help="look commits up in this repository (by name); branch and tag "
                                                      "names are resolved with git at its stored URL")
    compare.add_argument("--url", default=None, help="read from this KernelWatch service (http://host:8000) instead "
                                                     "of the configured database")
    compare.add_argument("--token", default=None, help="API token for --url when its reads need one (default: "
                                                       "$KERNELWATCH_TOKEN)")
    add_report_options(compare, fail_on_default="none")
    compare.add_argument("--fail-on-regression", dest="fail_on", action="store_const", const="regression",
                         help="the same as --fail-on regression")

    ci = sub.add_parser("ci", help="inside a CI job: run the suite at two commits (interleaved), store, compare, "
                                   "write the step summary, exit as compare does",
                        description="Runs BASE and HEAD benchmark by benchmark interleaved, stores the runs in the "
                                    "configured database (or uploads them with KERNELWATCH_URL and "
                                    "KERNELWATCH_TOKEN), compares exactly those runs, prints the report, appends "
                                    "it as markdown to $GITHUB_STEP_SUMMARY when set. Exit status: 0 nothing to "
                                    "report, 1 a regression (see --fail-on), 2 a usage or input error.")
    ci.add_argument("--base", required=True, metavar="REV", help="the commit to compare against (sha, branch, tag)")
    ci.add_argument("--head", default="HEAD", metavar="REV", help="the commit under test (default HEAD)")
    ci.add_argument("--repo", type=Path, default=Path("."), help="the git repository (default: the current "
                                                                  "directory)")
    ci.add_argument("--benchmarks", type=Path, default=None, metavar="DIR|REV:DIR",
                    help="the benchmarks, kept apart from the measured code (as run --benchmarks)")
    ci.add_argument("--suite", default="*", help="glob over suite/name, e.g. 'attention/*' (comma: several)")
    ci.add_argument("--params", default="", help="only parameter points matching NAME=VALUE[,NAME=VALUE]")
    ci.add_argument("--quick", action="store_true", help="only each benchmark's quick points")
    ci.add_argument("--samples", type=int, default=10, help="timed samples per benchmark, commit and round "
                                                            "(default 10: samples in one process agree; the rounds "
                                                            "are what a verdict counts)")
    ci.add_argument("--rounds", type=int, default=CI_ROUNDS, metavar="R",
                    help=f"runs per commit, each a fresh benchmark process, interleaved ABBA (default {CI_ROUNDS}; "
                         "give an even number, so that each commit goes first as often; one round a side can only "
                         "decide against a spread between runs already stored for the series)")
    ci.add_argument("--max-rounds", type=int, default=None, metavar="M",
                    help="adaptive: while a benchmark is undecided (inconclusive, and more runs would decide), two "
                         "more rounds of just those benchmarks, up to M rounds a commit; --alpha is then split "
                         "evenly over the looks at the data this allows (Bonferroni), so that testing again "
                         "never raises the false-verdict rate past it (default: --rounds, not adaptive)")
    ci.add_argument("--warmup", type=int, default=3, help="untimed calls before sampling (default 3)")
    ci.add_argument("--hardware", default="cpu", help="cpu: the suite must run on JAX's CPU backend; any other "
                                                      "name (h200...): on an accelerator, else exit 2")
    ci.add_argument("--no-capture", action="store_true", help="keep only times (faster): no HLO, dumps or traces")
    ci.add_argument("--cpu-isa", default=None, metavar="ISA", help="pin the widest x86 ISA XLA may use")
    _noise_options(ci)
    _environment_options(ci)
    ci.add_argument("--trigger", default="pr", choices=["push", "pr", "manual"])
    add_report_options(ci, fail_on_default="regression")

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
                         help="checkout holding kernels_under_test/ (default: the suite beside this service)")

    detect = sub.add_parser("detect", help="change points in a CSV of samples (series,position,value)")
    detect.add_argument("--input", required=True, help="CSV file, or - for standard input")
    detect.add_argument("--format", choices=["json", "text"], default="json")
    detect.add_argument("--alpha", type=float, default=None, help="largest corrected p-value of a change")
    detect.add_argument("--min-effect", type=float, default=None, help="smallest relative change (0.01 = 1%%)")
    detect.add_argument("--k-noise", type=float, default=None, help="smallest change in sigmas of the noise")
    detect.add_argument("--min-side", type=int, default=None, help="commits needed on each side of a change")

    alerts = sub.add_parser("alerts", help="findings grouped by commit range, and their triage")
    alerts_sub = alerts.add_subparsers(dest="alerts_command", required=True)
    alerts_list = alerts_sub.add_parser("list", help="list alerts, newest first")
    alerts_list.add_argument("--repo", default=None, help="only this repository's (by name)")
    alerts_list.add_argument("--state", default=None, help="only alerts in this state (untriaged, fixed...)")
    alerts_list.add_argument("--format", choices=["text", "json"], default="text")
    alerts_triage = alerts_sub.add_parser("triage", help="change an alert's state, or note on it")
    alerts_triage.add_argument("id", type=int)
    alerts_triage.add_argument("state", help="untriaged, acknowledged, investigating, invalid, wontfix, fixed, "
                                             "improvement (its current state with --note: a note only)")
    alerts_triage.add_argument("--note", default="")
    alerts_triage.add_argument("--author", default=None, help="default: $USER")
    alerts_notify = alerts_sub.add_parser("notify", help="send the Slack messages that are due (retries after an "
                                                         "outage) and say what is still pending or failed")
    alerts_notify.add_argument("--retry-failed", action="store_true",
                               help="also retry the ones given up on (after fixing the token or channel)")

    worker = sub.add_parser("worker", help="start a Celery worker (needs KERNELWATCH_REDIS_URL)")
    worker.add_argument("--queues", default="ingest,detect,notify",
                        help="comma-separated: ingest, detect, notify (the default), runner.cpu, runner.h200...")
    worker.add_argument("--concurrency", type=int, default=1)
    worker.add_argument("--pool", default=None, choices=["prefork", "solo", "threads"],
                        help="default: solo for runner queues (one suite at a time, in child processes of its "
                             "own), prefork otherwise")
    worker.add_argument("--hostname", default=None, help="Celery node name (default: celery@HOST)")

    sub.add_parser("beat", help="queue runs of the tracked branches' tips every period (KERNELWATCH_TRACK; "
                                "needs KERNELWATCH_REDIS_URL)")
    token = sub.add_parser("token", help="API tokens: create (shown once), list, revoke")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    token_create = token_sub.add_parser("create", help="create a token and print it (the only time it is shown)")
    token_create.add_argument("name")
    token_create.add_argument("--scope", action="append", required=True, choices=["submit", "triage", "admin"],
                              help="what it may do; repeat for several (admin grants every scope)")
    token_list = token_sub.add_parser("list", help="tokens by id: name, prefix, scopes, last use; never secrets")
    token_list.add_argument("--format", choices=["text", "json"], default="text")
    token_revoke = token_sub.add_parser("revoke", help="revoke a token by id or by name")
    token_revoke.add_argument("ref", metavar="NAME|ID")
    cli_deliveries.register(sub)
    return parser


def _context(settings: Settings):  # type: ignore[no-untyped-def]
    from service.context import Context
    from service.store.db import current_revision, upgrade

    ctx = Context.create(settings)
    if settings.database_url is None:
        # The embedded SQLite file is ours alone: bring it to the current schema without asking.
        upgrade(settings.effective_database_url)
    else:
        from alembic.script import ScriptDirectory

        from service.store.db import alembic_config

        head = ScriptDirectory.from_config(alembic_config(settings.effective_database_url)).get_current_head()
        if current_revision(ctx.engine) != head:
            raise ConfigurationError("the database schema is not current: run `kernelwatch db upgrade` first")
    return ctx


def cmd_db_upgrade(settings: Settings, revision: str) -> int:
    from service.store.db import upgrade

    settings.ensure_dirs()
    upgrade(settings.effective_database_url, revision)
    print(f"database at revision {revision}")
    if revision == "head":
        # Results stored before the roofline columns existed get their figures now, so that every stored
        # result a roof applies to has them (a no-op once done).
        return cmd_db_backfill_roofline(settings)
    return EXIT_OK


def cmd_db_backfill_roofline(settings: Settings) -> int:
    from service.pipeline.roofline_backfill import backfill_roofline
    from service.store.db import unit_of_work

    ctx = _context(settings)
    try:
        with unit_of_work(ctx.sessions) as session:
            counts = backfill_roofline(session)
    finally:
        ctx.close()
    print(f"roofline figures: {counts.filled} results filled, {counts.without_roof} without a roof "
          f"(no published figures and no calibration), {counts.without_counts} without FLOP/byte counts")
    return EXIT_OK


def _run_revisions(args: argparse.Namespace) -> list[list[str]]:
    """The commits to run, each inner list one run_commits call: ``--commit`` once or twice (two interleaved),
    or a ``--commits`` range / ``--commits-file`` list, one commit at a time (``--every N``: every Nth, the last
    always), oldest first."""
    from runners.gitrepo import GitError, check_rev, first_parent_range

    ranged = args.commits is not None or args.commits_file is not None
    if ranged and args.commit:
        raise InvalidInput("give --commit, or --commits / --commits-file, not both")
    if getattr(args, "working_tree", False):
        if ranged or args.commit or args.skip_existing:
            raise InvalidInput("--working-tree measures the working copy alone: no --commit, --commits, "
                               "--commits-file or --skip-existing with it")
        return [["HEAD"]]
    if not ranged:
        revs = args.commit or ["HEAD"]
        if len(revs) > 2:
            raise InvalidInput("give --commit at most twice (two commits are interleaved)")
        return [revs]
    try:
        if args.commits is not None:
            start, sep, end = args.commits.partition("..")
            if not sep or not start or not end or end.startswith("."):
                raise InvalidInput(f"--commits {args.commits!r}: give a range A..B (the commits after A up to B)")
            listed = first_parent_range(args.repo, start, end)
        else:
            text = args.commits_file.read_text() if str(args.commits_file) != "-" else sys.stdin.read()
            uncommented = (line.split("#", 1)[0].strip() for line in text.splitlines())
            listed = [check_rev(rev) for rev in uncommented if rev]
    except OSError as exc:
        raise InvalidInput(f"--commits-file: {exc}") from None
    except GitError as exc:
        raise InvalidInput(str(exc)) from None
    if args.every < 1:
        raise InvalidInput("--every must be at least 1")
    picked = listed[::-1][::args.every][::-1]  # counted back from the newest, so the last is always run
    if not picked:
        raise InvalidInput("the range holds no commit")
    return [[rev] for rev in picked]


def _already_stored(settings: Settings, repo: Path, rev: str) -> bool:
    """Whether the local store holds a run of this commit (``--skip-existing``)."""
    from sqlalchemy import select

    from runners.gitrepo import resolve
    from runners.local import repository_name
    from service.store.models import Commit, Repository, Run

    sha = resolve(repo, rev)
    with _context(settings).sessions() as session:
        return session.scalar(
            select(Run.id).join(Commit, Commit.id == Run.commit_id)
            .join(Repository, Repository.id == Commit.repository_id)
            .where(Repository.name == repository_name(repo), Commit.sha == sha).limit(1)) is not None


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    from runners.build_step import BuildFailed
    from runners.envs import EnvironmentBuildError
    from runners.gitrepo import GitError
    from runners.local import RunRequest, run_commits
    from runners.session import ProcessFailed
    from service.cli_compare import measured_for

    if args.rounds < 1:
        raise InvalidInput("--rounds must be at least 1")
    measured = measured_for(args.repo, args, settings)
    if args.skip_existing and settings.uploads_over_http:
        raise InvalidInput("--skip-existing reads the local store; it cannot ask a remote service")
    batches = _run_revisions(args)
    capture_dir = None if args.no_capture else settings.artifacts_dir
    settings.ensure_dirs()
    for revs in batches:
        try:
            if args.skip_existing and all(_already_stored(settings, args.repo, rev) for rev in revs):
                print(f"{revs[0][:10]}: already stored, skipped")
                continue
            requests = [RunRequest(repo=args.repo, rev=rev, samples=args.samples, warmup=args.warmup,
                                   suite=args.suite, benchmarks=measured.benchmarks,
                                   environment=measured.environment, python=measured.python, build=measured.build,
                                   working_tree=args.working_tree, params=args.params,
                                   quick=args.quick, branch=args.branch, trigger=args.trigger,
                                   capture_dir=capture_dir, cpu_isa=args.cpu_isa, cpu_affinity=args.cpu_affinity,
                                   xla_single_thread=args.xla_single_thread)
                        for rev in revs]
            per_commit = run_commits(requests, settings.worktree_dir, _run_progress, rounds=args.rounds)
        except (GitError, EnvironmentBuildError, BuildFailed) as exc:
            raise InvalidInput(str(exc)) from None
        except ProcessFailed as exc:
            # the suite could not even start (none found, or it failed to import): one line, not two tracebacks
            raise InvalidInput(f"the benchmark process failed at {revs[0]}: {str(exc).strip().splitlines()[-1]}"
                               if str(exc).strip() else f"the benchmark process failed at {revs[0]}") from None
        _store_runs(settings, args, [m for commit_manifests in per_commit for m in commit_manifests])
    return EXIT_OK


def _run_progress(done: int, planned: int, key: str) -> None:
    print(terminal_safe(f"  [{done}/{planned}] {key}"), file=sys.stderr)


def _store_runs(settings: Settings, args: argparse.Namespace, documents: list[dict[str, Any]]) -> None:
    from service.contract import parse_manifest

    # Validate here too: never write a file, or report a run, that the service would refuse.
    manifests = [parse_manifest(m) for m in documents]
    if args.output:
        args.output.mkdir(parents=True, exist_ok=True)
        for m in manifests:
            (args.output / f"{m.commit.sha[:12]}-{m.run_id}.json").write_text(m.model_dump_json(indent=2))
    for m in manifests:
        timed = [r for r in m.results if r.metric == "wall_time"]
        failed = [r for r in timed if r.status != "ok"]
        for r in failed:
            # The message is the benchmark's own exception text: the repository's words, escapes and all.
            print(terminal_text(f"FAILED {r.suite}/{r.name} {r.params_key()}: {r.message}"), file=sys.stderr)
        print(f"{m.commit.sha[:10]} on {m.environment.device_count}x {m.environment.device_kind}: "
              f"{len(timed) - len(failed)} ok, {len(failed)} failed ({m.status})")
    if not args.no_ingest and settings.uploads_over_http:
        from service.tasks import http_uploader

        send = http_uploader(settings)
        for doc in documents:
            sent = send(doc)
            print(f"uploaded as run {sent.run_id} to {send.api}"
                  f"{'' if sent.created else ' (already stored; nothing changed)'}")
    elif not args.no_ingest:
        ctx = _context(settings)
        for m in manifests:
            outcome = ctx.submit(m)
            print(f"stored as run {outcome.run_id}")


def cmd_ingest(settings: Settings, path: Path) -> int:
    from service.contract import MAX_MANIFEST_BYTES

    # The cap POST /runs has: /dev/zero or a runaway file is refused at it, not read into memory whole.
    try:
        with path.open("rb") as handle:
            payload = handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror}") from None
    if len(payload) > MAX_MANIFEST_BYTES:
        raise InvalidInput(f"{path} is larger than a manifest may be ({MAX_MANIFEST_BYTES} bytes)")
    ctx = _context(settings)
    outcome = ctx.submit(payload)
    print(f"run {outcome.run_id} {'stored' if outcome.created else 'already stored; nothing changed'}")
    return EXIT_OK


def _serve(settings: Settings, host: str, port: int, ctx=None) -> None:  # type: ignore[no-untyped-def]
    from werkzeug.serving import make_server

    from service.app import create_app

    # A request answers when its data is stored; what it sets off runs after (service/pipeline/background.py).
    served = (ctx or _context(settings)).with_background_queue()
    app = create_app(settings, context=served)
    # A threaded WSGI server is plenty for one machine's dashboard; the distributed form runs gunicorn.
    server = make_server(host, port, app, threaded=True)
    print(f"KernelWatch dashboard on http://{host}:{port}/  (Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        _finish_follow_up(served)


def _finish_follow_up(ctx: Any, timeout_s: float = 30.0) -> None:
    stats = ctx.follow_up_stats()
    if not stats or not stats["pending"]:
        return
    print(f"finishing {stats['pending']} follow-up task(s) (up to {timeout_s:.0f} s; Ctrl-C drops them)",
          file=sys.stderr, flush=True)
    try:
        left = ctx.finish_follow_up(timeout_s)
    except KeyboardInterrupt:
        left = stats["pending"]
    if left:
        print(f"{left} follow-up task(s) dropped: their runs are stored; detection reruns with the series' next "
              "run", file=sys.stderr)


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from service.demo import run_demo

    console = Console(stderr=True)
    # The demo measures every commit: nothing is left to bisect. Confirmation stays on: on a shared machine a
    # busy minute can look like a step, and re-running base and head side by side is what tells.
    ctx = _context(dataclasses.replace(settings, follow_up=("confirm",)))
    workdir = args.workdir or settings.home / "demo"
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as progress:
        outcome = run_demo(ctx, workdir, args.samples, args.rounds, progress)
    for line in outcome.summary_lines():
        print(line)
    if not args.no_serve:
        _serve(settings, args.host, args.port, ctx)
    return EXIT_OK


def cmd_submit(settings: Settings, args: argparse.Namespace) -> int:
    import uuid

    from runners.gitrepo import resolve
    from service.task_names import RUN_SUITE_TASK, runner_queue

    commit = args.commit
    if Path(args.repo).expanduser().is_dir():
        commit = resolve(Path(args.repo).expanduser(), args.commit)  # pin: a branch moves, the run must not
    task = {"repo": args.repo, "commit": commit, "suite": args.suite, "params": args.params, "quick": args.quick,
            "samples": args.samples, "trigger": args.trigger, "branch": args.branch, "capture": not args.no_capture,
            "rounds": args.rounds}
    if settings.redis_url:
        from service.celery_app import celery_app

        result = celery_app(settings).send_task(RUN_SUITE_TASK, kwargs=task, queue=runner_queue(args.hardware),
                                                ignore_result=True)
        print(f"queued {commit[:12]} on {runner_queue(args.hardware)} as task {result.id}")
        return EXIT_OK
    # Embedded default: no broker, so the run happens here and now, through the same code a worker runs.
    from runners.worker import SuiteTask, execute

    if settings.uploads_over_http:
        from service.tasks import http_uploader

        run_ids = execute(SuiteTask.from_kwargs(task), str(uuid.uuid4()), settings.home, http_uploader(settings))
        print(f"ran {commit[:12]} here, uploaded to {settings.service_url}: runs {', '.join(run_ids)}")
        return EXIT_OK
    ctx = _context(settings)

    def upload(manifest: dict[str, Any]) -> None:
        ctx.submit(manifest)

    run_ids = execute(SuiteTask.from_kwargs(task), str(uuid.uuid4()), settings.home, upload)
    print(f"ran {commit[:12]} in-process: runs {', '.join(run_ids)}")
    return EXIT_OK


def cmd_reparse(settings: Settings) -> int:
    from service.pipeline.parse_artifacts import parse_results, stale_results
    from service.store.db import unit_of_work

    ctx = _context(settings)
    with ctx.sessions() as session:
        stale = stale_results(session)
    # One transaction per result: a long reparse makes progress that a failure later does not undo.
    stored = 0
    for result_id in stale:
        with unit_of_work(ctx.sessions) as session:
            stored += parse_results(session, ctx.artifacts, [result_id])
    print(f"reparsed {len(stale)} result(s), {stored} record(s) stored")
    return EXIT_OK


def cmd_prune_checkouts(settings: Settings, unused_for: str, dry_run: bool) -> int:
    import time

    from runners.envs import prune_environments
    from runners.gitrepo import prune_checkouts
    from service.pipeline.prune import parse_duration

    try:
        age = parse_duration(unused_for).total_seconds()
    except ValueError as exc:
        raise InvalidInput(f"--older-than: {exc}") from None
    gone = prune_checkouts(settings.worktree_dir, age, time.time(), dry_run)
    envs_dir = settings.worktree_dir.parent / "envs"  # where run_commits builds them (runners/local.py)
    built = prune_environments(envs_dir, age, time.time(), dry_run)
    verb = "would delete" if dry_run else "deleted"
    print(f"{verb} {len(gone)} checkout(s) unused for {unused_for} under {settings.worktree_dir}")
    print(f"{verb} {len(built)} environment(s) unused for {unused_for} under {envs_dir}")
    return EXIT_OK


def cmd_prune(settings: Settings, older_than: str, dry_run: bool) -> int:
    from datetime import UTC, datetime

    from service.pipeline.prune import apply_prune, disk_usage, format_outcome, format_plan, parse_duration, plan_prune

    try:
        age = parse_duration(older_than)
    except ValueError as exc:
        raise InvalidInput(f"--older-than: {exc}") from None
    ctx = _context(settings)
    with ctx.sessions() as session:
        try:
            plan = plan_prune(session, age, datetime.now(UTC))
        except ValueError as exc:
            raise InvalidInput(f"--older-than: {exc}") from None
        if dry_run:
            print(format_plan(plan, *disk_usage(ctx.artifacts, plan)))
        else:
            print(format_outcome(plan, apply_prune(session, ctx.artifacts, plan)))
    return EXIT_OK


def _print_report(found: Comparison, args: argparse.Namespace) -> Rendered:
    from service.cli_compare import render

    rendered = render(found, args.format, args.only_changed, args.sort, args.filter, args.fail_on)
    sys.stdout.write(rendered.text)
    sys.stdout.flush()
    return rendered


def _min_effect(args: argparse.Namespace) -> float:
    return 0.01 if args.threshold is None else float(args.threshold)


def cmd_compare(settings: Settings, args: argparse.Namespace) -> int:
    from service.cli_compare import compare_remote, compare_stored, token_for

    if args.url:
        found = compare_remote(args.url, token_for(args), settings.repos_dir, args.base, args.head, args.repo,
                               args.alpha, _min_effect(args))
    else:
        found = compare_stored(settings, _context, args.base, args.head, args.repo, args.alpha, _min_effect(args))
    return EXIT_FOUND if _print_report(found, args).fail else EXIT_OK


def cmd_ci(settings: Settings, args: argparse.Namespace) -> int:
    from service.cli_compare import append_step_summary, ci_runs, run_both, suite_key
    from service.detect.compare import looks_alpha, more_runs_would_decide

    if args.samples < 1:
        raise InvalidInput("--samples must be at least 1")
    if args.rounds < 1:
        raise InvalidInput("--rounds must be at least 1")
    max_rounds = args.rounds if args.max_rounds is None else args.max_rounds
    if max_rounds < args.rounds:
        raise InvalidInput(f"--max-rounds {max_rounds} is fewer than --rounds {args.rounds}")
    if args.rounds == 1:
        print("kernelwatch: warning: one round a side: a benchmark is decided only against the spread between runs "
              "stored for its series, and is inconclusive without one (give --rounds 4)", file=sys.stderr)
    # Further rounds come two at a time (each commit goes first once more: ABBA balance), the last maybe one.
    looks = 1 + -(-(max_rounds - args.rounds) // 2)
    alpha = looks_alpha(args.alpha, looks)

    ids = [uuid.uuid4().hex, uuid.uuid4().hex]
    made = run_both(settings, args.repo, args.base, args.head, args, _run_progress, rounds=args.rounds, run_ids=ids)
    per_commit, done = made, args.rounds
    notes: list[str] = []
    while True:
        found = _store_and_compare(settings, args, [m for manifests in made for m in manifests], ci_runs(per_commit),
                                   alpha)
        undecided = frozenset(suite_key(row.key) for row in found.report.rows if more_runs_would_decide(row))
        if not undecided or done >= max_rounds:
            break
        more = min(2, max_rounds - done)
        print(f"{len(undecided)} benchmark(s) undecided after {done} rounds: {more} more round(s) of them",
              file=sys.stderr)
        made = run_both(settings, args.repo, args.base, args.head, args, _run_progress, rounds=more, run_ids=ids,
                        first_round=done, only=undecided)
        per_commit = [old + new for old, new in zip(per_commit, made, strict=True)]
        done += more
        notes = [f"adaptive rounds: {args.rounds} to {max_rounds} a commit while a benchmark was undecided, "
                 f"{done} made; each of the {looks} looks at the data tested at alpha {alpha:.3g} "
                 f"(--alpha {args.alpha:g} split over them)"]
    if notes:
        found = dataclasses.replace(found, notes=found.notes + tuple(notes))
    rendered = _print_report(found, args)
    written = append_step_summary(rendered.markdown)
    if written is not None:
        print(f"report appended to {written}", file=sys.stderr)
    return EXIT_FOUND if rendered.fail else EXIT_OK


def _store_and_compare(settings: Settings, args: argparse.Namespace, documents: list[dict[str, Any]],
                       runs: list[CiRun], alpha: float) -> Comparison:
    """Store (or upload) the runs just made, then compare exactly the runs `ci` made so far at ``alpha``."""
    from service.cli_compare import check_hardware, compare_remote, compare_runs
    from service.contract import parse_manifest

    check_hardware(args.hardware, documents)
    for m in map(parse_manifest, documents):  # never store, nor compare, a run the service would refuse
        failed = [r for r in m.results if r.metric == "wall_time" and r.status != "ok"]
        for r in failed:
            print(terminal_text(f"FAILED {m.commit.sha[:10]} {r.suite}/{r.name} {r.params_key()}: {r.message}"),
                  file=sys.stderr)
    if settings.uploads_over_http:
        from service.tasks import http_uploader

        send = http_uploader(settings)
        for doc in documents:
            send(doc)
        assert settings.service_url is not None
        # Exactly this job's runs (a commit's other stored runs stay out): their ids, joined by commas.
        refs = [",".join(run.run_ids) for run in runs]
        print(f"uploaded {len(documents)} run(s) to {send.api}", file=sys.stderr)
        return compare_remote(settings.service_url, settings.service_token, settings.repos_dir, refs[0], refs[1],
                              None, alpha, _min_effect(args))
    ctx = _context(settings)
    try:
        for m in map(parse_manifest, documents):
            ctx.submit(m)
    finally:
        ctx.close()
    print(f"stored {len(documents)} run(s) in {settings.effective_database_url.split('://', 1)[0]}",
          file=sys.stderr)
    return compare_runs(settings, _context, runs[0].run_ids, runs[1].run_ids, alpha, _min_effect(args))


MAX_PARSE_INPUT = 512 * 1024 * 1024
MAX_DETECT_INPUT = 256 * 1024 * 1024  # a CSV of samples: ~10 million rows


def cmd_parse(args: argparse.Namespace) -> int:
    from runners.parsers.by_kind import ParseFailure, parse

    try:
        with args.path.open("rb") as handle:
            data = handle.read(MAX_PARSE_INPUT + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {args.path}: {exc.strerror}") from None
    if len(data) > MAX_PARSE_INPUT:
        raise InvalidInput(f"{args.path} is larger than {MAX_PARSE_INPUT} bytes")
    try:
        summary = parse(args.kind, data, str(args.path))
    except ParseFailure as exc:
        raise InvalidInput(str(exc).splitlines()[0]) from None
    if args.no_disassembly:
        for kernel in summary.get("kernels", []):
            kernel.pop("disassembly", None)
    print(json.dumps(summary, indent=2, sort_keys=True))
    return EXIT_OK


def cmd_detect(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from service.detect.changepoints import ChangePointParams
    from service.detect.samples_csv import change_points_report, read_samples_csv

    try:
        if args.input == "-":
            data = sys.stdin.buffer.read(MAX_DETECT_INPUT + 1)
        else:
            with open(args.input, "rb") as handle:
                data = handle.read(MAX_DETECT_INPUT + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {args.input}: {exc.strerror}") from None
    if len(data) > MAX_DETECT_INPUT:
        raise InvalidInput(f"{args.input} is larger than {MAX_DETECT_INPUT} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{args.input}: not UTF-8 text (byte {exc.start})") from None
    overrides = {name: value for name, value in (("alpha", args.alpha), ("min_effect", args.min_effect),
                                                 ("k_noise", args.k_noise), ("min_side", args.min_side))
                 if value is not None}
    if (args.alpha is not None and not 0 < args.alpha < 1) or (args.min_side is not None and args.min_side < 1):
        raise InvalidInput("--alpha must be in (0, 1) and --min-side at least 1")
    params = replace(ChangePointParams(), **overrides)
    report = change_points_report(read_samples_csv(text, args.input), params)
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        for c in report["change_points"]:
            print(f"{c['series']}  at {c['position']}  {c['magnitude']:+.2%}  ({c['before']:.4g} -> "
                  f"{c['after']:.4g}, p={c['p_value']:.2g})")
        if not report["change_points"]:
            print("no change points")
    return EXIT_OK


def cmd_predict(settings: Settings, args: argparse.Namespace) -> int:
    from runners.suite import SuiteNotFound, discover
    from service.pipeline.predictions import default_suite_root, predict_reports
    from service.report.predict_text import predictions_to_text
    from service.store.family_points import stored_points

    try:
        specs = discover(args.suite_root or default_suite_root())
    except SuiteNotFound as exc:
        raise InvalidInput(str(exc)) from None
    ctx = _context(settings)
    try:
        with ctx.sessions() as session:
            reports = predict_reports(specs, args.kernel, args.source, args.target,
                                      lambda suite, name: stored_points(session, suite, name, args.repo),
                                      args.hardware)
    finally:
        ctx.close()
    sys.stdout.write(terminal_text(predictions_to_text(reports)))
    return EXIT_OK


def cmd_beat(settings: Settings) -> int:
    if not settings.redis_url:
        raise ConfigurationError("kernelwatch beat needs KERNELWATCH_REDIS_URL (e.g. redis://127.0.0.1:6379/0)")
    from service.tasks import make_celery

    if not settings.tracked:
        print("kernelwatch beat: KERNELWATCH_TRACK names no branch (REPO@BRANCH[@HARDWARE],...): nothing to "
              "schedule", file=sys.stderr)
    for branch in settings.tracked:
        print(f"tracking {branch.label} every {settings.track_period_s} s", file=sys.stderr)
    settings.ensure_dirs()
    # Beat keeps when each entry last ran in this file, so a restart does not fire every entry at once.
    schedule_file = settings.home / "celerybeat-schedule"
    make_celery(settings).start(["beat", "--schedule", str(schedule_file), "--loglevel", "INFO"])
    return EXIT_OK


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    if not settings.redis_url:
        raise ConfigurationError("kernelwatch worker needs KERNELWATCH_REDIS_URL (e.g. redis://127.0.0.1:6379/0)")
    from service.tasks import make_celery

    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    pool = args.pool or ("solo" if all(q.startswith("runner.") for q in queues) else "prefork")
    argv = ["worker", "--queues", ",".join(queues), "--pool", pool, "--loglevel", "INFO"]
    if pool != "solo":
        argv += ["--concurrency", str(args.concurrency)]
    if args.hostname:
        argv += ["--hostname", args.hostname]
    make_celery(settings).worker_main(argv)
    return EXIT_OK


def cmd_alerts_list(settings: Settings, repo: str | None, state: str | None, fmt: str) -> int:
    from service.pipeline.alerts import list_alerts
    from service.report.alerts_text import alerts_to_json, alerts_to_text

    ctx = _context(settings)
    with ctx.sessions() as session:
        alerts = list_alerts(session, repository=repo, state=state)
    if fmt == "json":
        print(json.dumps(alerts_to_json(alerts), indent=2))
    else:
        print(alerts_to_text(alerts), end="")
    return EXIT_OK


def cmd_alerts_triage(settings: Settings, alert_id: int, state: str, note: str, author: str | None) -> int:
    import getpass

    from service.pipeline.alerts import triage
    from service.store.db import unit_of_work

    ctx = _context(settings)
    if author is None:
        try:
            author = getpass.getuser()
        except (OSError, KeyError):  # no USER in the environment and no passwd entry (a bare container)
            raise InvalidInput("give --author: no user name is known here") from None
    marked: list[int] = []
    with unit_of_work(ctx.sessions) as session:
        alert = triage(session, alert_id, state, note, author)
        if ctx.notifier is not None:  # the alert's Slack thread owes a reply, sent after commit
            marked = ctx.notifier.mark_alerts(session, [alert_id])
    if ctx.notifier is not None:
        ctx.notifier.send(marked)
    print(f"alert {alert.id} is {alert.state}" + (" (note added)" if note.strip() else ""))
    return EXIT_OK


def cmd_alerts_notify(settings: Settings, retry_failed: bool) -> int:
    ctx = _context(settings)
    if ctx.notifier is None:
        raise ConfigurationError("Slack is off: set KERNELWATCH_SLACK_TOKEN and KERNELWATCH_SLACK_CHANNEL")
    started = ctx.notifier.retry_failed() if retry_failed else []
    started += ctx.notifier.sweep()
    counts = ctx.notifier.counts()
    print(f"Slack deliveries started: {len(set(started))}; pending: {counts.get('pending', 0)}; "
          f"failed: {counts.get('failed', 0)}")
    return EXIT_OK


def cmd_token(settings: Settings, args: argparse.Namespace) -> int:
    from service.pipeline.tokens import create_token, list_tokens, revoke_token
    from service.store.db import unit_of_work

    ctx = _context(settings)
    with unit_of_work(ctx.sessions) as session:
        if args.token_command == "create":
            view, token = create_token(session, args.name, args.scope)
        elif args.token_command == "revoke":
            view = revoke_token(session, args.ref)
        else:
            views = list_tokens(session)
    if args.token_command == "create":
        print(f"token {view.name} (id {view.id}, {', '.join(view.scopes)}): shown this once, keep it now",
              file=sys.stderr)
        print(token)
    elif args.token_command == "revoke":
        print(f"token {view.name} (id {view.id}) revoked")
    elif args.format == "json":
        print(json.dumps([{"id": v.id, "name": v.name, "prefix": v.prefix, "scopes": v.scopes,
                           "created_at": v.created_at.isoformat(),
                           "last_used_at": v.last_used_at.isoformat() if v.last_used_at else None,
                           "revoked_at": v.revoked_at.isoformat() if v.revoked_at else None} for v in views],
                         indent=2))
    else:
        for v in views:
            used = f"{v.last_used_at:%Y-%m-%d %H:%M}" if v.last_used_at else "never used"
            state = f"revoked {v.revoked_at:%Y-%m-%d %H:%M}" if v.revoked_at else "active"
            print(terminal_safe(f"{v.id:>4}  {v.name:<24} kw_{v.prefix}_…  {','.join(v.scopes):<20} {used:<16}  "
                                f"{state}"))
        if not views:
            print("no tokens: make one with `kernelwatch token create NAME --scope submit`")
    return EXIT_OK


def dispatch(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "db" and args.db_command == "backfill-roofline":
        return cmd_db_backfill_roofline(settings)
    if args.command == "db":
        return cmd_db_upgrade(settings, args.revision)
    if args.command == "run":
        return cmd_run(settings, args)
    if args.command == "ingest":
        return cmd_ingest(settings, args.manifest)
    if args.command == "serve":
        _serve(settings, args.host, args.port)
        return EXIT_OK
    if args.command == "demo":
        return cmd_demo(settings, args)
    if args.command == "parse":
        return cmd_parse(args)
    if args.command == "detect":
        return cmd_detect(args)
    if args.command == "predict":
        return cmd_predict(settings, args)
    if args.command == "reparse":
        return cmd_reparse(settings)
    if args.command == "prune":
        if args.checkouts:
            return cmd_prune_checkouts(settings, args.older_than or "1h", args.dry_run)
        if args.older_than is None:
            raise InvalidInput("prune needs --older-than DURATION (or --checkouts)")
        return cmd_prune(settings, args.older_than, args.dry_run)
    if args.command == "compare":
        return cmd_compare(settings, args)
    if args.command == "ci":
        return cmd_ci(settings, args)
    if args.command == "submit":
        return cmd_submit(settings, args)
    if args.command == "worker":
        return cmd_worker(settings, args)
    if args.command == "beat":
        return cmd_beat(settings)
    if args.command == "alerts" and args.alerts_command == "list":
        return cmd_alerts_list(settings, args.repo, args.state, args.format)
    if args.command == "alerts" and args.alerts_command == "notify":
        return cmd_alerts_notify(settings, args.retry_failed)
    if args.command == "alerts":
        return cmd_alerts_triage(settings, args.id, args.state, args.note, args.author)
    if args.command == "token":
        return cmd_token(settings, args)
    if args.command == "deliveries":
        return cli_deliveries.cmd_deliveries(settings, args, _context(settings))
    raise AssertionError(f"unhandled command {args.command}")


def _settings_env(args: argparse.Namespace) -> dict[str, str]:
    """The environment settings are read from. `compare --url` reads from the URL it is given: KERNELWATCH_URL
    and KERNELWATCH_TOKEN, which configure where runners upload (and must come as a pair there), are no concern
    of it, and KERNELWATCH_TOKEN alone is its token for reads."""
    import os

    env = dict(os.environ)
    if args.command == "compare" and args.url:
        env.pop("KERNELWATCH_URL", None)
        env.pop("KERNELWATCH_TOKEN", None)
    return env


def _database_unreachable(exc: BaseException) -> bool:
    """SQLAlchemy's OperationalError (no server, refused, wrong password), without importing SQLAlchemy for
    commands that never touch a database: if it raised, it was loaded."""
    errors = sys.modules.get("sqlalchemy.exc")
    return errors is not None and isinstance(exc, errors.OperationalError)


def main(argv: Sequence[str] | None = None) -> int:
    from service.settings import redact_url

    args = build_parser().parse_args(argv)
    settings: Settings | None = None
    try:
        settings = load_settings(_settings_env(args))
        return dispatch(args, settings)
    except (KernelWatchError, FileExistsError, UploadError) as exc:
        # An error may quote what it refused (a repository's exception, a manifest's field): never raw escapes.
        print(terminal_text(f"kernelwatch: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        if not _database_unreachable(exc):
            raise
        # The database cannot be reached (or refused us): the user's to fix, in one line, the password not in it.
        where = redact_url(settings.effective_database_url) if settings is not None else "the database"
        reason = next((line.strip() for line in str(getattr(exc, "orig", None) or exc).splitlines() if line.strip()),
                      "unreachable")
        print(f"kernelwatch: error: cannot use the database at {where}: {reason}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
