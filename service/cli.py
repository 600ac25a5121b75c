"""The `kernelwatch` command. Argument parsing is kept apart from the functions that do the work, and user
errors become exit codes in one place (`main`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from service.errors import ConfigurationError, KernelWatchError
from service.settings import Settings, load_settings

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelwatch", description="Kernel performance regressions, per commit.")
    sub = parser.add_subparsers(dest="command", required=True)

    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    up = db_sub.add_parser("upgrade", help="apply migrations")
    up.add_argument("--revision", default="head")

    run = sub.add_parser("run", help="run the suite of a repository at a commit and store the results")
    run.add_argument("--repo", type=Path, required=True, help="path of a git repository holding kernels_under_test/")
    run.add_argument("--commit", default="HEAD", help="revision to run (sha, branch, tag...)")
    run.add_argument("--samples", type=int, default=20, help="timed samples per benchmark (default 20)")
    run.add_argument("--suite", default="*", help="glob over suite/name, e.g. 'softmax/*'")
    run.add_argument("--params", default="", help="only parameter points matching NAME=VALUE[,NAME=VALUE]")
    run.add_argument("--branch", default=None, help="branch the commit belongs to (default: detected)")
    run.add_argument("--output", type=Path, default=None, help="also write the manifest to this file")
    run.add_argument("--no-ingest", action="store_true", help="do not store; use with --output")

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

    worker = sub.add_parser("worker", help="start a Celery worker (needs KERNELWATCH_REDIS_URL)")
    worker.add_argument("--queues", default="detect")
    worker.add_argument("--concurrency", type=int, default=1)
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
    return EXIT_OK


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    from runners.local import RunRequest, run_at_commit
    from service.contract import parse_manifest

    request = RunRequest(repo=args.repo, rev=args.commit, samples=args.samples, suite=args.suite,
                         params=args.params, branch=args.branch)

    def progress(done: int, planned: int, key: str) -> None:
        print(f"  [{done}/{planned}] {key}", file=sys.stderr)

    settings.ensure_dirs()
    manifest_dict = run_at_commit(request, settings.worktree_dir, progress)
    manifest = parse_manifest(manifest_dict)  # validate here too: never write a file the service would refuse
    if args.output:
        args.output.write_text(json.dumps(manifest_dict, indent=2))
    failed = [r for r in manifest.results if r.status != "ok"]
    for r in failed:
        print(f"FAILED {r.suite}/{r.name} {r.params_key()}: {r.message}", file=sys.stderr)
    print(f"{manifest.commit.sha[:10]}: {len(manifest.results) - len(failed)} ok, {len(failed)} failed "
          f"({manifest.status})")
    if not args.no_ingest:
        from service.pipeline.submit import submit_manifest

        ctx = _context(settings)
        outcome = submit_manifest(ctx.sessions, ctx.queue, manifest)
        print(f"stored as run {outcome.run_id}")
    return EXIT_OK


def cmd_ingest(settings: Settings, path: Path) -> int:
    from service.pipeline.submit import submit_manifest

    try:
        payload = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror}") from None
    ctx = _context(settings)
    outcome = submit_manifest(ctx.sessions, ctx.queue, payload)
    print(f"run {outcome.run_id} {'stored' if outcome.created else 'already stored; nothing changed'}")
    return EXIT_OK


def _serve(settings: Settings, host: str, port: int, ctx=None) -> None:  # type: ignore[no-untyped-def]
    from werkzeug.serving import make_server

    from service.app import create_app

    app = create_app(settings, context=ctx or _context(settings))
    # A threaded WSGI server is plenty for one machine's dashboard; the distributed form runs gunicorn.
    server = make_server(host, port, app, threaded=True)
    print(f"KernelWatch dashboard on http://{host}:{port}/  (Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from service.demo import run_demo

    console = Console(stderr=True)
    ctx = _context(settings)
    workdir = args.workdir or settings.home / "demo"
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as progress:
        outcome = run_demo(ctx, workdir, args.samples, args.rounds, progress)
    for line in outcome.summary_lines():
        print(line)
    if not args.no_serve:
        _serve(settings, args.host, args.port, ctx)
    return EXIT_OK


def cmd_worker(settings: Settings, queues: str, concurrency: int) -> int:
    if not settings.redis_url:
        raise ConfigurationError("kernelwatch worker needs KERNELWATCH_REDIS_URL (e.g. redis://127.0.0.1:6379/0)")
    from service.tasks import make_celery

    app = make_celery(settings)
    app.worker_main(["worker", "--queues", queues, "--concurrency", str(concurrency), "--loglevel", "INFO"])
    return EXIT_OK


def dispatch(args: argparse.Namespace, settings: Settings) -> int:
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
    if args.command == "worker":
        return cmd_worker(settings, args.queues, args.concurrency)
    raise AssertionError(f"unhandled command {args.command}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return dispatch(args, load_settings())
    except (KernelWatchError, FileExistsError) as exc:
        print(f"kernelwatch: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
