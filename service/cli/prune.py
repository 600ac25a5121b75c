"""`kernelwatch reparse` (artifacts read again by parsers newer than the one that read them) and `kernelwatch
prune` (retention: old runs' raw artifacts, or KernelWatch's own checkouts and environments)."""

from __future__ import annotations

import argparse

from kernelwatch.errors import InvalidInput
from service.cli.common import EXIT_OK, Subparsers, open_context
from service.settings import Settings

CHECKOUTS_UNUSED_FOR = "1h"  # `prune --checkouts` without --older-than


def register(sub: Subparsers) -> None:
    reparse = sub.add_parser("reparse", help="parse again the artifacts whose parser is newer than what read them")
    reparse.set_defaults(handler=_reparse)

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
    prune.set_defaults(handler=_prune)


def _reparse(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_reparse(settings)


def _prune(args: argparse.Namespace, settings: Settings) -> int:
    if args.checkouts:
        return cmd_prune_checkouts(settings, args.older_than or CHECKOUTS_UNUSED_FOR, args.dry_run)
    if args.older_than is None:
        raise InvalidInput("prune needs --older-than DURATION (or --checkouts)")
    return cmd_prune(settings, args.older_than, args.dry_run)


def cmd_reparse(settings: Settings) -> int:
    from service.pipeline.parse_artifacts import parse_results, stale_results
    from service.store.db import unit_of_work

    ctx = open_context(settings)
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
    ctx = open_context(settings)
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
