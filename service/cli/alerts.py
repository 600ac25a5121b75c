"""`kernelwatch alerts`: findings grouped by commit range (list), their triage, and the Slack messages due."""

from __future__ import annotations

import argparse
import json

from kernelwatch.errors import ConfigurationError, InvalidInput
from service.cli.common import EXIT_OK, Subparsers, open_context, stored_id
from service.settings import Settings


def register(sub: Subparsers) -> None:
    alerts = sub.add_parser("alerts", help="findings grouped by commit range, and their triage")
    alerts_sub = alerts.add_subparsers(dest="alerts_command", required=True)
    alerts_list = alerts_sub.add_parser("list", help="list alerts, newest first")
    alerts_list.add_argument("--repo", default=None, help="only this repository's (by name)")
    alerts_list.add_argument("--state", default=None, help="only alerts in this state (untriaged, fixed...)")
    alerts_list.add_argument("--format", choices=["text", "json"], default="text")
    alerts_list.set_defaults(handler=_list)
    alerts_triage = alerts_sub.add_parser("triage", help="change an alert's state, or note on it")
    alerts_triage.add_argument("id", type=stored_id)
    alerts_triage.add_argument("state", help="untriaged, acknowledged, investigating, invalid, wontfix, fixed, "
                                             "improvement (its current state with --note: a note only)")
    alerts_triage.add_argument("--note", default="")
    alerts_triage.add_argument("--author", default=None, help="default: $USER")
    alerts_triage.set_defaults(handler=_triage)
    alerts_notify = alerts_sub.add_parser("notify", help="send the Slack messages that are due (retries after an "
                                                         "outage) and say what is still pending or failed")
    alerts_notify.add_argument("--retry-failed", action="store_true",
                               help="also retry the ones given up on (after fixing the token or channel)")
    alerts_notify.set_defaults(handler=_notify)


def _list(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_alerts_list(settings, args.repo, args.state, args.format)


def _triage(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_alerts_triage(settings, args.id, args.state, args.note, args.author)


def _notify(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_alerts_notify(settings, args.retry_failed)


def cmd_alerts_list(settings: Settings, repo: str | None, state: str | None, fmt: str) -> int:
    from service.pipeline.alerts import list_alerts
    from service.report.alerts_text import alerts_to_json, alerts_to_text

    ctx = open_context(settings, reads=True)
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

    ctx = open_context(settings, administers="`kernelwatch alerts triage`")
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
    ctx = open_context(settings, administers="`kernelwatch alerts notify`")
    if ctx.notifier is None:
        raise ConfigurationError("Slack is off: set KERNELWATCH_SLACK_TOKEN and KERNELWATCH_SLACK_CHANNEL")
    started = ctx.notifier.retry_failed() if retry_failed else []
    started += ctx.notifier.sweep()
    counts = ctx.notifier.counts()
    print(f"Slack deliveries started: {len(set(started))}; pending: {counts.get('pending', 0)}; "
          f"failed: {counts.get('failed', 0)}")
    return EXIT_OK
