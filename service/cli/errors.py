"""The one place an exception of a `kernelwatch` command becomes an exit status and a line on standard error:
a user's error (bad input, configuration, an upload refused, a database that cannot be reached) is exit 2 in one
line; anything else is a bug and keeps its traceback."""

from __future__ import annotations

import sys

from kernelwatch.errors import KernelWatchError
from runners.uploader import UploadError
from service.cli.common import EXIT_USAGE
from service.report.compare_table import terminal_text
from service.settings import Settings, redact_url

EXIT_INTERRUPTED = 130  # the shell's 128 + SIGINT


def exit_status(exc: BaseException, settings: Settings | None) -> int | None:
    """The exit status ``exc`` ends the command with, its message printed; None: not the user's to fix, so the
    caller re-raises it. ``settings`` is None when reading them failed."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, KernelWatchError | FileExistsError | UploadError) or _git_refused(exc):
        # An error may quote what it refused (a repository's exception, a manifest's field): never raw escapes.
        print(terminal_text(f"kernelwatch: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, Exception) and _database_unreachable(exc):
        # The database cannot be reached (or refused us): the user's to fix, in one line, the password not in it.
        where = redact_url(settings.effective_database_url) if settings is not None else "the database"
        reason = next((line.strip() for line in str(getattr(exc, "orig", None) or exc).splitlines() if line.strip()),
                      "unreachable")
        print(f"kernelwatch: error: cannot use the database at {where}: {reason}", file=sys.stderr)
        return EXIT_USAGE
    return None


def _git_refused(exc: BaseException) -> bool:
    """runners.gitrepo's GitError (an unknown revision, a path that is no repository): the user's input, said in
    one line (`submit --commit deadbeef` ended in a traceback); tested without importing git's module for
    commands that never touch it: if it raised, it was loaded."""
    gitrepo = sys.modules.get("runners.gitrepo")
    return gitrepo is not None and isinstance(exc, gitrepo.GitError)


def _database_unreachable(exc: BaseException) -> bool:
    """SQLAlchemy's OperationalError (no server, refused, wrong password), without importing SQLAlchemy for
    commands that never touch a database: if it raised, it was loaded."""
    errors = sys.modules.get("sqlalchemy.exc")
    return errors is not None and isinstance(exc, errors.OperationalError)
