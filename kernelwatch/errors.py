"""The boundary vocabulary: what went wrong, sorted by whose fault it is and what an HTTP face returns.

Only ``Transient`` is ever retried; ``InvalidInput`` is the caller's fault and retrying cannot help.
"""

from __future__ import annotations


class KernelWatchError(Exception):
    """Base of every error that crosses a boundary; ``http_status`` is what an API face answers."""

    http_status = 500


class InvalidInput(KernelWatchError):
    http_status = 400


class NotComparable(InvalidInput):
    """Two sides that share no environment (another JAX, another device): nothing to compare, which is no fault of
    the request's wording; `ci` reports it as not compared rather than as a usage error."""


class Unauthorized(KernelWatchError):
    http_status = 401


class Forbidden(KernelWatchError):
    """Who the caller is is known, and it may not do this (a token without the scope)."""

    http_status = 403


class NotFound(KernelWatchError):
    http_status = 404


class Conflict(KernelWatchError):
    http_status = 409


class AnotherProject(Conflict):
    """A run filed under a repository name the store holds for another project (no root commit in common:
    service/pipeline/ingest.py). Not the conflict of a run id stored already, which a redelivered task may meet and
    take as done: this run is stored nowhere, and whoever made it must be told."""


class PayloadTooLarge(InvalidInput):
    http_status = 413


class Transient(KernelWatchError):
    """A dependency (database, broker, runner host) is unavailable right now; the same call may succeed later."""

    http_status = 503


class ConfigurationError(KernelWatchError):
    """Settings are missing or malformed; the message says which variable to set and how."""
