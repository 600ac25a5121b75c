"""What every verb of `kernelwatch` shares: the exit statuses, the handler's signature, and the context a command
that touches the store opens. Kept apart from ``service/cli/__init__.py``, which imports every verb module: a verb
importing the package it is registered by would be an import loop (tests/unit/test_import_contracts.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from kernelwatch.errors import ConfigurationError
from service.report.compare_table import terminal_safe
from service.settings import Settings

if TYPE_CHECKING:  # SQLAlchemy, Celery and the pipeline behind it: not for every `kernelwatch` start
    from service.context import Context

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2

# The one place a parsed command line is read: each verb's adapter turns it into typed options and calls its
# command, so that the commands themselves never see an argparse.Namespace.
Handler: TypeAlias = Callable[[argparse.Namespace, Settings], int]
# argparse names no public type for what add_subparsers returns.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


# The largest id a stored row can have (a BIGINT, and SQLite's INTEGER): a larger one given on the command line
# made the driver raise (OverflowError from SQLite, DataError from PostgreSQL) instead of "no such row".
MAX_ID = 2**63 - 1


def stored_id(text: str) -> int:
    """argparse's type for a stored row's id: a whole number from 1 to MAX_ID (ASCII digits; "²" is no id)."""
    if not (text.isascii() and text.isdigit() and len(text) <= 19 and 1 <= int(text) <= MAX_ID):
        raise argparse.ArgumentTypeError(f"{text!r} is no id (a whole number from 1 to {MAX_ID})")
    return int(text)


def at_least(low: int) -> Callable[[str], int]:
    """argparse's type for a count of at least ``low`` (samples, rounds, warm-up calls), checked before anything
    runs: `run --samples 0` measured the whole suite and then failed on the manifest it could not write."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is under {low}")
        return value

    parse.__name__ = f"at least {low}"  # what argparse names in its error
    return parse


def probability(text: str) -> float:
    """argparse's type for a false-verdict rate (--alpha), checked before anything runs (`ci --alpha 2` measured and
    stored the whole suite, then refused it) by the comparison's own rule (service.detect.compare.CompareParams)."""
    from service.detect.compare import CompareParams

    try:
        return CompareParams(alpha=float(text)).alpha
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc) if "alpha" in str(exc) else f"{text!r} is not a number") from None


def param_filter(text: str) -> str:
    """argparse's type for --params (NAME=VALUE[,NAME=VALUE]), checked before anything runs: a malformed one was
    refused by the benchmark process, as if the measured commits had failed."""
    from runners.suite import parse_param_filter

    try:
        parse_param_filter(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def service_url(text: str) -> str:
    """argparse's type for --url: a service's address (kernelwatch.http_call.check_url), checked before anything
    runs, never echoing a password."""
    from kernelwatch.http_call import check_url

    try:
        return check_url(text.strip(), "--url").rstrip("/")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cpu_isa(text: str) -> str:
    """argparse's type for --cpu-isa: one of the ISAs XLA:CPU knows (runners.local.CPU_ISAS), in its own spelling,
    so that "avx2" and "AVX2" are one environment and a typo is refused, not measured as a series of its own."""
    from runners.local import CPU_ISAS

    if text.upper() not in CPU_ISAS:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISA XLA:CPU knows (one of {', '.join(CPU_ISAS)})")
    return text.upper()


def uploads_elsewhere(settings: Settings) -> bool:
    """Whether this host's runs go to a service (KERNELWATCH_URL and KERNELWATCH_TOKEN) while its own store is the
    embedded file: a read of that file then sees none of them."""
    return settings.uploads_over_http and settings.database_url is None


def open_context(settings: Settings, *, reads: bool = False, administers: str | None = None) -> Context:
    """The store, queue and notifier of ``settings``, its schema checked to be current (the embedded SQLite file,
    ours alone, brought up to date without asking). ``reads``: a command that reports what is stored says so on
    stderr where this host's runs are uploaded elsewhere (:func:`uploads_elsewhere`), rather than print an empty
    answer as if nothing were measured. ``administers``: a command that changes or reads the service's own state
    (triage, tokens, deliveries), named so: refused there, since it would act on this host's embedded file, which
    the service never reads (a token made so was refused by the service with 401)."""
    from service.context import Context
    from service.store.db import current_revision, upgrade

    if administers is not None and uploads_elsewhere(settings):
        raise ConfigurationError(
            f"{administers} acts on the service's database, and this host has none configured: KERNELWATCH_URL "
            f"sends its runs to {settings.service_url}, but without KERNELWATCH_DATABASE_URL this would act on this "
            f"host's own file ({settings.effective_database_url}). Set KERNELWATCH_DATABASE_URL to the service's "
            "database (the same file where `kernelwatch serve` on this host is the service), or use its dashboard "
            "(alerts are triaged there too)")
    if reads and uploads_elsewhere(settings):
        print(f"note: reading this host's own store ({settings.effective_database_url}); the runs made here go "
              f"to {settings.service_url} (KERNELWATCH_URL): read them there (its dashboard and API, or "
              f"`kernelwatch compare`, which reads from it)", file=sys.stderr)

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


def run_progress(done: int, planned: int, key: str) -> None:
    """A benchmark done, on standard error (standard output is the report's)."""
    print(terminal_safe(f"  [{done}/{planned}] {key}"), file=sys.stderr)
