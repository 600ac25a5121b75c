"""`kernelwatch deliveries`: the GitHub webhook deliveries the service stored, what became of each, and a retry
of a dead-lettered one (service/store/deliveries.py)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelwatch.errors import InvalidInput
from service.cli.common import EXIT_OK, Subparsers, open_context, stored_id
from service.report.compare_table import terminal_safe
from service.settings import Settings

if TYPE_CHECKING:
    from service.context import Context

MAX_LIMIT = 1000


def register(sub: Subparsers) -> None:
    parser = sub.add_parser("deliveries", help="GitHub webhook deliveries: state (failed: dead-lettered after "
                                               "repeated failures), attempts, last error; --retry ID hands one out "
                                               "again")
    parser.add_argument("--state", action="append",
                        help="only these states (received, queued, done, failed); repeat for several")
    parser.add_argument("--limit", type=int, default=20, help="newest first, at most this many (1-1000)")
    parser.add_argument("--retry", type=stored_id, action="append", metavar="ID",
                        help="hand this failed (or never queued) delivery out again, with a fresh count of "
                             "attempts; repeat for several")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.set_defaults(handler=_deliveries)


@dataclass(frozen=True)
class DeliveriesOptions:
    states: tuple[str, ...] = ()  # only these; none: every state
    limit: int = 20
    retry: tuple[int, ...] = ()  # hand these out again first
    format: str = "text"  # text | json


def _deliveries(args: argparse.Namespace, settings: Settings) -> int:
    options = DeliveriesOptions(tuple(args.state or ()), args.limit, tuple(args.retry or ()), args.format)
    return cmd_deliveries(options, open_context(settings, administers="`kernelwatch deliveries`"))


def cmd_deliveries(options: DeliveriesOptions, ctx: Context) -> int:
    from service.pipeline.pull_requests import retry_delivery
    from service.store.deliveries import STATES, deliveries_view

    unknown = sorted(set(options.states) - set(STATES))
    if unknown:
        raise InvalidInput(f"--state {unknown[0]!r} is not one of {', '.join(STATES)}")
    if not 1 <= options.limit <= MAX_LIMIT:
        raise InvalidInput("--limit is from 1 to 1000")
    for delivery_id in options.retry:
        retry_delivery(ctx.sessions, ctx.queue.enqueue_github_delivery, delivery_id)
        print(f"delivery {delivery_id} handed out again")
    with ctx.sessions() as session:
        views = deliveries_view(session, options.states, options.limit)
    if options.format == "json":
        print(json.dumps({"deliveries": views}, indent=2))
        return EXIT_OK
    for view in views:
        print(format_line(view))
    if not views:
        print("no webhook deliveries" + (f" in state {', '.join(options.states)}" if options.states else ""))
    return EXIT_OK


def format_line(view: dict[str, Any]) -> str:
    """One delivery on one line; stored text (GitHub's ids, error messages) made safe for a terminal."""
    what = view["outcome"] or (f"last error: {view['last_error']}" if view["last_error"] else "")
    when = (view["received_at"] or "")[:16].replace("T", " ")
    return terminal_safe(f"{view['id']:>5}  {view['state']:<8} {view['attempts']:>2}x  {when}  "
                         f"{view['event'][:20]:<20} {view['delivery'][:36]:<36}  {what[:160]}")
