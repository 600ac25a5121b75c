"""`kernelwatch token`: API tokens (service/pipeline/tokens.py): create one (its secret shown this once), list
them (never a secret), revoke one."""

from __future__ import annotations

import argparse
import json
import sys

from service.cli.common import EXIT_OK, Subparsers, open_context
from service.report.compare_table import terminal_safe
from service.settings import Settings


def register(sub: Subparsers) -> None:
    token = sub.add_parser("token", help="API tokens: create (shown once), list, revoke")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    token_create = token_sub.add_parser("create", help="create a token and print it (the only time it is shown)")
    token_create.add_argument("name")
    token_create.add_argument("--scope", action="append", required=True, choices=["submit", "triage", "admin"],
                              help="what it may do; repeat for several (admin grants every scope)")
    token_create.set_defaults(handler=_create)
    token_list = token_sub.add_parser("list", help="tokens by id: name, prefix, scopes, last use; never secrets")
    token_list.add_argument("--format", choices=["text", "json"], default="text")
    token_list.set_defaults(handler=_list)
    token_revoke = token_sub.add_parser("revoke", help="revoke a token by id or by name")
    token_revoke.add_argument("ref", metavar="NAME|ID")
    token_revoke.set_defaults(handler=_revoke)


def _create(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_token_create(settings, args.name, tuple(args.scope))


def _list(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_token_list(settings, args.format)


def _revoke(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_token_revoke(settings, args.ref)


def cmd_token_create(settings: Settings, name: str, scopes: tuple[str, ...]) -> int:
    from service.pipeline.tokens import create_token
    from service.store.db import unit_of_work

    ctx = open_context(settings, administers="`kernelwatch token create`")
    with unit_of_work(ctx.sessions) as session:
        view, token = create_token(session, name, list(scopes))
    print(f"token {view.name} (id {view.id}, {', '.join(view.scopes)}): shown this once, keep it now",
          file=sys.stderr)
    print(token)
    return EXIT_OK


def cmd_token_revoke(settings: Settings, ref: str) -> int:
    from service.pipeline.tokens import revoke_token
    from service.store.db import unit_of_work

    ctx = open_context(settings, administers="`kernelwatch token revoke`")
    with unit_of_work(ctx.sessions) as session:
        view = revoke_token(session, ref)
    print(f"token {view.name} (id {view.id}) revoked")
    return EXIT_OK


def cmd_token_list(settings: Settings, fmt: str) -> int:
    from service.pipeline.tokens import list_tokens
    from service.store.db import unit_of_work

    ctx = open_context(settings, administers="`kernelwatch token list`")
    with unit_of_work(ctx.sessions) as session:
        views = list_tokens(session)
    if fmt == "json":
        print(json.dumps([{"id": v.id, "name": v.name, "prefix": v.prefix, "scopes": v.scopes,
                           "created_at": v.created_at.isoformat(),
                           "last_used_at": v.last_used_at.isoformat() if v.last_used_at else None,
                           "revoked_at": v.revoked_at.isoformat() if v.revoked_at else None} for v in views],
                         indent=2))
        return EXIT_OK
    for v in views:
        used = f"{v.last_used_at:%Y-%m-%d %H:%M}" if v.last_used_at else "never used"
        state = f"revoked {v.revoked_at:%Y-%m-%d %H:%M}" if v.revoked_at else "active"
        print(terminal_safe(f"{v.id:>4}  {v.name:<24} kw_{v.prefix}_…  {','.join(v.scopes):<20} {used:<16}  "
                            f"{state}"))
    if not views:
        print("no tokens: make one with `kernelwatch token create NAME --scope submit`")
    return EXIT_OK
