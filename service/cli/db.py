"""`kernelwatch db`: the schema (migrations), and what stored rows an older release computed differently: the
roofline figures of results stored before they existed, the attributions of findings an older pairing rule made."""

from __future__ import annotations

import argparse

from service.cli.common import EXIT_OK, Subparsers, open_context
from service.settings import Settings


def register(sub: Subparsers) -> None:
    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    up = db_sub.add_parser("upgrade", help="apply migrations")
    up.add_argument("--revision", default="head")
    up.set_defaults(handler=_upgrade)
    backfill = db_sub.add_parser("backfill-roofline", help="compute the roofline figures of stored results that lack "
                                 "them (stored before migration 0011, or before their hardware had figures); `db "
                                 "upgrade` does it too")
    backfill.set_defaults(handler=_backfill)
    reattribute = db_sub.add_parser("reattribute", help="attribute again the findings whose stored attribution an "
                                    "older rule computed (fusions paired by an older rule); `db upgrade` does it too")
    reattribute.set_defaults(handler=_reattribute)


def _upgrade(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_db_upgrade(settings, args.revision)


def _backfill(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_db_backfill_roofline(settings)


def _reattribute(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_db_reattribute(settings)


def cmd_db_upgrade(settings: Settings, revision: str) -> int:
    from service.store.db import upgrade

    settings.ensure_dirs()
    upgrade(settings.effective_database_url, revision)
    print(f"database at revision {revision}")
    if revision == "head":
        # Results stored before the roofline columns existed get their figures now, so that every stored
        # result a roof applies to has them; findings an older attribution rule attributed are attributed by
        # today's (each a no-op once done).
        cmd_db_backfill_roofline(settings)
        return cmd_db_reattribute(settings)
    return EXIT_OK


def cmd_db_backfill_roofline(settings: Settings) -> int:
    from service.pipeline.roofline_backfill import backfill_roofline
    from service.store.db import unit_of_work

    ctx = open_context(settings)
    try:
        with unit_of_work(ctx.sessions) as session:
            counts = backfill_roofline(session)
    finally:
        ctx.close()
    print(f"roofline figures: {counts.filled} results filled, {counts.without_roof} without a roof "
          f"(no published figures and no calibration), {counts.without_counts} without FLOP/byte counts")
    return EXIT_OK


def cmd_db_reattribute(settings: Settings) -> int:
    from service.pipeline.attribution import refresh_stale_attributions
    from service.store.db import unit_of_work

    ctx = open_context(settings)
    try:
        with unit_of_work(ctx.sessions) as session:
            changed = refresh_stale_attributions(session, ctx.artifacts)
    finally:
        ctx.close()
    print(f"attributions: {changed} findings attributed again by the current rule")
    return EXIT_OK
