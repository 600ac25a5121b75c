"""`kernelwatch serve` (the dashboard and API on one machine) and `kernelwatch demo` (a scratch repository with a
planted regression, run, detected, then served)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from service.cli.common import EXIT_OK, Subparsers, at_least, open_context
from service.settings import Settings

if TYPE_CHECKING:
    from service.context import Context


def register(sub: Subparsers) -> None:
    serve = sub.add_parser("serve", help="serve the dashboard")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.set_defaults(handler=_serve)

    demo = sub.add_parser("demo", help="build a scratch repository with a planted regression, run and detect it")
    demo.add_argument("--workdir", type=Path, default=None, help="scratch directory (default: $KERNELWATCH_HOME/demo)")
    demo.add_argument("--samples", type=at_least(1), default=15, help="timed samples per benchmark and run")
    demo.add_argument("--rounds", type=at_least(1), default=3, help="runs per commit, interleaved across commits")
    demo.add_argument("--no-serve", action="store_true", help="exit after the summary instead of serving")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument("--port", type=int, default=8000)
    demo.set_defaults(handler=_demo)


@dataclass(frozen=True)
class DemoOptions:
    workdir: Path | None  # None: $KERNELWATCH_HOME/demo
    samples: int
    rounds: int
    serve: bool  # serve the dashboard after the summary (not --no-serve)
    host: str
    port: int


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    serve(settings, args.host, args.port)
    return EXIT_OK


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_demo(settings, DemoOptions(args.workdir, args.samples, args.rounds, not args.no_serve, args.host,
                                          args.port))


def serve(settings: Settings, host: str, port: int, ctx: Context | None = None) -> None:
    from werkzeug.serving import make_server

    from service.app import create_app

    # A request answers when its data is stored; what it sets off runs after (service/pipeline/background.py).
    served = (ctx or open_context(settings)).with_background_queue()
    app = create_app(settings, context=served)
    # A threaded WSGI server is plenty for one machine's dashboard; the distributed form runs gunicorn.
    server = make_server(host, port, app, threaded=True)
    print(f"KernelWatch dashboard on http://{host}:{port}/  (Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        _finish_follow_up(served)


def _finish_follow_up(ctx: Context, timeout_s: float = 30.0) -> None:
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


def cmd_demo(settings: Settings, options: DemoOptions) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from service.demo import run_demo

    console = Console(stderr=True)
    # The demo measures every commit: nothing is left to bisect. Confirmation stays on: on a shared machine a
    # busy minute can look like a step, and re-running base and head side by side is what tells.
    ctx = open_context(dataclasses.replace(settings, follow_up=("confirm",)))
    workdir = options.workdir or settings.home / "demo"
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as progress:
        outcome = run_demo(ctx, workdir, options.samples, options.rounds, progress)
    for line in outcome.summary_lines():
        print(line)
    if options.serve:
        serve(settings, options.host, options.port, ctx)
    return EXIT_OK
