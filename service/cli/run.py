"""`kernelwatch run` (the suite of a repository at commits, stored) and `kernelwatch ingest` (a manifest file a
runner made, stored)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwatch.errors import ConfigurationError, InvalidInput
from kernelwatch.hardware import hardware_label
from service.cli.common import EXIT_OK, Subparsers, at_least, cpu_isa, open_context, param_filter, run_progress
from service.cli.measure import (
    Measuring,
    environment_options,
    measured_for,
    measuring,
    naming_options,
    noise_options,
    repository_top,
)
from service.cli.same_project import check_same_project, stored_name
from service.report.compare_table import format_value, terminal_text
from service.settings import Settings

if TYPE_CHECKING:
    from service.context import Context
    from service.contract.manifest import BenchmarkResult


def register(sub: Subparsers) -> None:
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
    run.add_argument("--every", type=at_least(1), default=1, metavar="N",
                     help="with --commits/--commits-file: every Nth commit, counted back from the last (default 1)")
    run.add_argument("--skip-existing", action="store_true",
                     help="skip commits the local store already holds a run of (of the commit itself, not of "
                          "a working copy; whatever its suite or environment: for resuming a range)")
    run.add_argument("--benchmarks", type=Path, default=None, metavar="DIR|REV:DIR",
                     help="the benchmarks, kept apart from the measured code: a directory of benchmark modules "
                          "(or REV:DIR, that directory as of a commit of the repository, e.g. main:benchmarks) "
                          "applied to every commit, results stored under each commit's own sha")
    run.add_argument("--samples", type=at_least(1), default=20,
                     help="timed samples per benchmark and round (default 20)")
    run.add_argument("--rounds", type=at_least(1), default=1, metavar="R",
                     help="runs per commit, each a fresh benchmark process, interleaved across commits (ABBA): the "
                          "runs are the replicates a comparison counts (default 1)")
    run.add_argument("--warmup", type=at_least(0), default=3, help="untimed calls before sampling (default 3)")
    run.add_argument("--suite", default="*",
                     help="glob over suite/name, e.g. 'attention/*' (comma: several; without '/': a suite or a "
                          "benchmark's name)")
    run.add_argument("--params", default="", type=param_filter,
                     help="only parameter points matching NAME=VALUE[,NAME=VALUE]")
    run.add_argument("--quick", action="store_true", help="only each benchmark's quick points")
    run.add_argument("--no-capture", action="store_true",
                     help="keep only times: no HLO, analyses, compiler dumps or profiler traces")
    run.add_argument("--cpu-isa", type=cpu_isa, default=None, metavar="ISA",
                     help="pin the widest x86 ISA XLA may use (AVX2, AVX512...) so that hosts compare")
    noise_options(run)
    environment_options(run)
    naming_options(run)
    run.add_argument("--branch", default=None, help="branch the commit belongs to (default: detected)")
    run.add_argument("--trigger", default="manual", choices=["push", "pr", "manual", "bisect", "confirm"])
    run.add_argument("--output", type=Path, default=None, help="also write each manifest into this directory")
    run.add_argument("--no-ingest", action="store_true",
                     help="do not store (nor upload, with KERNELWATCH_URL and KERNELWATCH_TOKEN); use with --output")
    run.set_defaults(handler=_run)

    ingest = sub.add_parser("ingest", help="store a manifest file produced by a runner")
    ingest.add_argument("manifest", type=Path)
    ingest.set_defaults(handler=_ingest)


@dataclass(frozen=True)
class Revisions:
    """Which commits `run` measures, as the command line named them."""

    repo: Path
    commit: Sequence[str] | None  # --commit, given once or twice
    commits: str | None  # --commits A..B
    commits_file: Path | None  # --commits-file (- for stdin)
    every: int = 1
    working_tree: bool = False
    skip_existing: bool = False


@dataclass(frozen=True)
class RunOptions:
    revisions: Revisions
    measuring: Measuring
    rounds: int
    branch: str | None
    output: Path | None  # also write each manifest here
    ingest: bool  # store (or upload) the runs: not --no-ingest


def _run(args: argparse.Namespace, settings: Settings) -> int:
    revisions = Revisions(repo=repository_top(args.repo), commit=args.commit, commits=args.commits,
                          commits_file=args.commits_file, every=args.every, working_tree=args.working_tree,
                          skip_existing=args.skip_existing)
    return cmd_run(settings, RunOptions(revisions, measuring(args), args.rounds, args.branch, args.output,
                                        ingest=not args.no_ingest))


def _ingest(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_ingest(settings, args.manifest)


# A list of revisions, one a line: 100,000 commits of 40-character shas fit in 4.1 MB. A larger file (/dev/zero, a
# log written to by mistake) is refused at the cap rather than read into memory whole.
MAX_COMMITS_FILE_BYTES = 8 * 2**20


def _commits_file_text(path: Path) -> str:
    """``--commits-file``'s text (``-``: standard input), at most MAX_COMMITS_FILE_BYTES of UTF-8."""
    if str(path) == "-":
        data = sys.stdin.buffer.read(MAX_COMMITS_FILE_BYTES + 1)
    else:
        with path.open("rb") as handle:
            data = handle.read(MAX_COMMITS_FILE_BYTES + 1)
    if len(data) > MAX_COMMITS_FILE_BYTES:
        raise InvalidInput(f"--commits-file {path}: over {MAX_COMMITS_FILE_BYTES // 2**20} MiB; it lists revisions, "
                           f"one a line")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"--commits-file {path}: not UTF-8 text (byte {exc.start})") from None


def run_revisions(which: Revisions) -> list[list[str]]:
    """The commits to run, each inner list one run_commits call: ``--commit`` once or twice (two interleaved),
    or a ``--commits`` range / ``--commits-file`` list, one commit at a time (``--every N``: every Nth, the last
    always), oldest first."""
    from runners.gitrepo import GitError, check_rev, first_parent_range, resolve

    ranged = which.commits is not None or which.commits_file is not None
    if ranged and which.commit:
        raise InvalidInput("give --commit, or --commits / --commits-file, not both")
    if which.working_tree:
        if ranged or which.commit or which.skip_existing:
            raise InvalidInput("--working-tree measures the working copy alone: no --commit, --commits, "
                               "--commits-file or --skip-existing with it (`kernelwatch ci --base REV "
                               "--working-tree` measures it interleaved with a commit, and compares)")
        return [["HEAD"]]
    if not ranged:
        revs = list(which.commit or ["HEAD"])
        if len(revs) > 2:
            raise InvalidInput("give --commit at most twice (two commits are interleaved)")
        return [revs]
    try:
        if which.commits is not None:
            start, sep, end = which.commits.partition("..")
            if not sep or not start or not end or end.startswith("."):
                raise InvalidInput(f"--commits {which.commits!r}: give a range A..B (the commits after A up to B)")
            listed = first_parent_range(which.repo, start, end)
        else:
            assert which.commits_file is not None  # ranged, and not by --commits
            text = _commits_file_text(which.commits_file)
            uncommented = (line.split("#", 1)[0].strip() for line in text.splitlines())
            listed = [check_rev(rev) for rev in uncommented if rev]
            for rev in listed:  # every line known before the first is measured, not after it
                resolve(which.repo, rev)
    except OSError as exc:
        raise InvalidInput(f"--commits-file: {exc}") from None
    except GitError as exc:
        raise InvalidInput(str(exc)) from None
    if which.every < 1:
        raise InvalidInput("--every must be at least 1")
    picked = listed[::-1][::which.every][::-1]  # counted back from the newest, so the last is always run
    if not picked:
        raise InvalidInput("the range holds no commit")
    return [[rev] for rev in picked]


def _already_stored(settings: Settings, repo: Path, name: str | None, rev: str) -> bool:
    """Whether the local store holds a run of this commit itself, not of a working copy (``--skip-existing``)."""
    from runners.gitrepo import resolve
    from service.store.runs import commit_measured

    with open_context(settings).sessions() as session:
        return commit_measured(session, stored_name(repo, name), resolve(repo, rev))


def cmd_run(settings: Settings, options: RunOptions) -> int:
    from runners.build_step import BuildFailed
    from runners.envs import EnvironmentBuildError
    from runners.gitrepo import GitError
    from runners.local import NothingSelected, RunRequest, run_commits
    from runners.session import ProcessFailed

    repo, m = options.revisions.repo, options.measuring
    measured = measured_for(repo, m, settings)
    if options.revisions.skip_existing and settings.uploads_over_http:
        raise InvalidInput("--skip-existing reads the local store; it cannot ask a remote service")
    batches = run_revisions(options.revisions)
    if options.ingest and settings.uploads_over_http:  # a token that cannot submit: said before measuring
        from service.context import http_uploader

        http_uploader(settings).check_credentials()
    if options.ingest:  # another project stored under this name: said before measuring, not at ingest
        check_same_project(settings, repo, measured.name, batches[0][0])
    capture_dir = settings.artifacts_dir if m.capture else None
    settings.ensure_dirs()
    for revs in batches:
        try:
            if options.revisions.skip_existing and all(_already_stored(settings, repo, measured.name, rev)
                                                             for rev in revs):
                print(f"{revs[0][:10]}: already stored, skipped")
                continue
            requests = [RunRequest(repo=repo, rev=rev, samples=m.samples, warmup=m.warmup, suite=m.suite,
                                   benchmarks=measured.benchmarks, environment=measured.environment,
                                   python=measured.python, build=measured.build,
                                   working_tree=options.revisions.working_tree, params=m.params, quick=m.quick,
                                   branch=options.branch, trigger=m.trigger, capture_dir=capture_dir,
                                   cpu_isa=m.cpu_isa, cpu_affinity=m.cpu_affinity,
                                   xla_single_thread=m.xla_single_thread, keep_pages=m.keep_pages,
                                   repository_name=measured.name)
                        for rev in revs]
            per_commit = run_commits(requests, settings.worktree_dir, run_progress, rounds=options.rounds,
                                     after_first_round=_selected_something)
        except (GitError, EnvironmentBuildError, BuildFailed, NothingSelected) as exc:
            raise InvalidInput(str(exc)) from None
        except ProcessFailed as exc:
            # the suite could not even start (none found, or it failed to import): one line, not two tracebacks
            where = revs[0] if len(revs) == 1 else f"one of {', '.join(r[:12] for r in revs)}"
            raise InvalidInput(f"the benchmark process failed at {where}: {str(exc).strip().splitlines()[-1]}"
                               if str(exc).strip() else f"the benchmark process failed at {where}") from None
        _store_runs(settings, options, [doc for commit_manifests in per_commit for doc in commit_manifests])
    return EXIT_OK


def _selected_something(per_commit: list[list[dict[str, Any]]]) -> None:
    """After the first round: a --suite or --params that selects nothing is the same in every round and at every
    commit, and measured nothing; say so (exit 2) rather than end with nothing stored and nothing said."""
    if not any(per_commit):
        raise InvalidInput("the suite selected no benchmark (check --suite and --params)")


def _store_runs(settings: Settings, options: RunOptions, documents: list[dict[str, Any]]) -> None:
    from service.contract import parse_manifest

    # Validate here too: never write a file, or report a run, that the service would refuse.
    manifests = [parse_manifest(m) for m in documents]
    if options.output:
        options.output.mkdir(parents=True, exist_ok=True)
        for m in manifests:
            (options.output / f"{m.commit.sha[:12]}-{m.run_id}.json").write_text(m.model_dump_json(indent=2))
    for m in manifests:
        timed = [r for r in m.results if r.metric == "wall_time"]
        failed = [r for r in timed if r.status != "ok"]
        for r in failed:
            # The message is the benchmark's own exception text: the repository's words, escapes and all.
            print(terminal_text(f"FAILED {r.suite}/{r.name} {r.params_key()}: {r.message}"), file=sys.stderr)
        hardware = hardware_label(m.environment.backend, m.environment.device_kind, m.environment.device_count)
        print(f"{m.commit.sha[:10]} on {hardware}: "
              f"{len(timed) - len(failed)} ok, {len(failed)} failed ({m.status})")
        print(_medians(timed), end="")
    if options.ingest and settings.uploads_over_http:
        from runners.uploader import UploadUnavailable
        from service.context import http_uploader

        send = http_uploader(settings)
        for index, doc in enumerate(documents):
            try:
                sent = send(doc)
            except UploadUnavailable as exc:
                # The measurements are not lost with the connection: kept, to be sent again as they are (the same
                # run ids: the service stores each once). Measuring again would make other runs.
                kept = _keep_unsent(settings, documents[index:])
                raise UploadUnavailable(f"{exc}. The {len(kept)} run(s) not confirmed are kept: `kernelwatch ingest "
                                        f"FILE` sends each again ({', '.join(str(k) for k in kept)})") from None
            print(_uploaded(sent.run_id, sent.created, send.api))
    elif options.ingest:
        ctx = open_context(settings)
        started = datetime.now(UTC)
        for m in manifests:
            ctx.submit(m)
            # the run id `compare` and the API take (the store's row number is no name a user can give back)
            kind = " (a working copy's run: an environment of its own)" if m.environment.working_tree else ""
            print(f"stored as run {m.run_id}{kind}")
        print_found(ctx, started, manifests[0].repository.name if manifests else None)


MAX_MEDIANS_LISTED = 40  # a larger suite's figures are the compare report's and the dashboard's to show


def _medians(timed: Sequence[BenchmarkResult]) -> str:
    """Each measured benchmark's median time, one line each: the run said how many were ok and no figure."""
    ok = [r for r in timed if r.status == "ok" and r.samples]
    if len(ok) > MAX_MEDIANS_LISTED:
        return f"  ({len(ok)} benchmarks measured: `kernelwatch compare` or the dashboard shows their times)\n"
    from service.detect.compare import BenchmarkKey

    # Labelled as compare labels its rows, so a line here finds its row there.
    rows = [(BenchmarkKey(r.suite, r.name, tuple((k, str(r.params[k])) for k in sorted(r.params))).label,
             format_value(statistics.median(r.samples), r.unit), len(r.samples)) for r in ok]
    width = max((len(label) for label, _, _ in rows), default=0)
    return "".join(terminal_text(f"  {label:<{width}}  {median:>10} (median of {n})") + "\n"
                   for label, median, n in rows)


def print_found(ctx: Context, since: datetime, repository: str | None) -> None:
    """What detection found in the runs just stored (the in-process queue has done it, confirmation rounds
    included, by the time ``submit`` returns): the alerts a finding made since ``since`` raised or joined. Said
    only in the store's log and on the inbox before; a regression the command had just measured went unsaid."""
    from service.pipeline.alerts import alerts_found_since
    from service.report.alerts_text import alerts_to_text

    if ctx.celery is not None:  # the distributed form: the workers detect, after this command has returned
        print("detection runs in the service's workers: `kernelwatch alerts list` shows what they find")
        return
    from service.detect.changepoints import ChangePointParams
    from service.store.commits import measured_commit_count

    with ctx.sessions() as session:
        found = alerts_found_since(session, since, repository)
        measured = measured_commit_count(session, repository) if repository is not None else None
    if found:
        print(f"found (kernelwatch alerts list has every alert):\n{alerts_to_text(found)}", end="")
    else:
        print("found nothing new: no change point, static diff or numerics change in these runs' series")
    side = ChangePointParams().min_side
    if measured is not None and measured < 2 * side:
        # A first-day history of four commits: a 3x slowdown at the third was never given a time verdict, and
        # nothing said why (the README does).
        print(f"note: {measured} commit(s) of {repository} measured so far; a change in time is reported with at "
              f"least {side} commits measured on each side of it. To test two commits now: kernelwatch compare "
              "BASE HEAD (runs interleaved with `kernelwatch run --commit BASE --commit HEAD --rounds 4` decide "
              "best)")


def _uploaded(run_id: str, created: bool, api: str) -> str:
    return f"uploaded as run {run_id} to {api}{'' if created else ' (already stored; nothing changed)'}"


def _keep_unsent(settings: Settings, documents: list[dict[str, Any]]) -> list[Path]:
    """Write manifests an upload could not deliver under KERNELWATCH_HOME/unsent, one file each."""
    folder = settings.home / "unsent"
    folder.mkdir(parents=True, exist_ok=True)
    kept = []
    for doc in documents:
        path = folder / f"{doc['run_id']}.json"
        path.write_text(json.dumps(doc))
        kept.append(path)
    return kept


def cmd_ingest(settings: Settings, path: Path) -> int:
    from service.contract import MAX_MANIFEST_BYTES
    from service.store.commits import repository_of_run
    from service.store.models import Run

    # The cap POST /runs has: /dev/zero or a runaway file is refused at it, not read into memory whole.
    try:
        with path.open("rb") as handle:
            payload = handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror}") from None
    if len(payload) > MAX_MANIFEST_BYTES:
        raise InvalidInput(f"{path} is larger than a manifest may be ({MAX_MANIFEST_BYTES} bytes)")
    if settings.uploads_over_http:  # the host's runs go to the service: so does this one (a run kept unsent)
        from service.context import http_uploader

        send = http_uploader(settings)
        try:
            document = json.loads(payload)
        except ValueError as exc:
            raise InvalidInput(f"{path} is not a manifest (not JSON: {exc})") from None
        if not isinstance(document, dict):
            raise InvalidInput(f"{path} is not a manifest (a JSON object)")
        sent = send(document)
        print(_uploaded(sent.run_id, sent.created, send.api))
        return EXIT_OK
    ctx = open_context(settings)
    started = datetime.now(UTC)
    outcome = ctx.submit(payload)
    with ctx.sessions() as session:
        # the run id `compare` and the API take, as `run` prints it (the store's row number is no name to give back)
        stored = session.get(Run, outcome.run_id)
        uid = stored.run_uid if stored is not None else str(outcome.run_id)
        repository = repository_of_run(session, outcome.run_id)
    print(f"run {uid} {'stored' if outcome.created else 'already stored; nothing changed'}")
    if outcome.created:
        print_found(ctx, started, repository)
    return EXIT_OK
