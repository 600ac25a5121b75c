"""One request of a KernelWatch HTTP client (the compare client, a runner's uploader), guarded at the boundary.

Standard library only, so that a runner host needs nothing of the service. What it guards against, each seen
against a hostile server in a test:

- **Redirects are not followed.** urllib follows a 30x by default and sends the request's headers along, the
  bearer token included, to whatever host the Location names. A KernelWatch API has no reason to redirect; the
  answer is returned as it is, with its Location, for the caller to report ("give the final address"). A client
  of an API that does move its own resources (GitHub's) follows them within its origin only
  (:class:`SameOriginRedirects`).
- **Bodies are read up to a cap** (:data:`MAX_BODY_BYTES`): a 400 MB reply took the compare client to 990 MB.
- **A token must be a header value.** One holding a newline or a space made urllib raise with the whole header,
  secret and all, in its message: :func:`check_token` refuses it first and never repeats it.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import IO

MAX_BODY_BYTES = 64 * 2**20  # a page of 5,000 compared benchmarks is a few MB; a manifest's answer far less
_HEADER_VALUE = re.compile(r"[\x21-\x7e]{1,4096}")


class ResponseTooLarge(ValueError):
    """The answer's body ran past the cap."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    location: str | None = None  # a redirect's target, not followed

    @property
    def redirected(self) -> bool:
        return 300 <= self.status < 400

    def redirect_text(self) -> str:
        return (f"answered {self.status}, a redirect to {self.location or 'an address it did not give'}: a token is "
                f"never sent on to where a redirect points; give the service's final address")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None  # urllib then hands the 30x back as an HTTPError: an answer like any other


_OPENER = urllib.request.build_opener(_NoRedirects())


def origin(url: str) -> tuple[str, str, int | None]:
    """A URL's scheme, host and port (the default port made explicit): what a credential is scoped to."""
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect within the request's origin only (an API's own moves: GitHub answers a renamed
    repository's calls with a 301 to another path of api.github.com). urllib's own handler sends the request's
    headers, the Authorization header included, to any host a Location names; a redirect to another origin is
    handed back as the 30x it is, for the caller to report. So is a redirect of anything but a read: urllib turns a
    redirected POST into a GET without its body, and a comment's creation would read as done."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if req.get_method() not in ("GET", "HEAD") or origin(urllib.parse.urljoin(req.full_url, newurl)) != origin(
                req.full_url):
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def check_token(token: str, what: str) -> None:
    """ValueError, naming ``what`` (where the token came from) and never the token, unless it can be sent as a
    header value: printable ASCII, no space, at most 4 KiB."""
    if not _HEADER_VALUE.fullmatch(token):
        raise ValueError(f"{what} holds a character an HTTP header cannot carry (a newline, a space or a non-ASCII "
                         f"character?) or is over 4 KiB; the token is not shown")


def check_url(url: str, what: str) -> str:
    """The URL, or ValueError naming ``what`` where it is no http(s) address with a host and a valid port, or where
    it holds credentials (a token authenticates; a password in the URL was echoed in every error and read as part
    of the host name). A message never shows the credentials."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number in range)
    except ValueError as exc:
        raise ValueError(f"{what} {_without_credentials(url)!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} is the service's address, e.g. http://kernelwatch:8000, got "
                         f"{_without_credentials(url)!r}")
    if "@" in parts.netloc:
        raise ValueError(f"{what} holds credentials (user@ or user:password@): give the address alone, the token "
                         "apart (KERNELWATCH_TOKEN or --token)")
    return url


def _without_credentials(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}" if sep else url.rpartition("@")[2]


def _read(stream: IO[bytes], limit: int) -> bytes:
    body = stream.read(limit + 1)
    if len(body) > limit:
        raise ResponseTooLarge(f"the answer ran past {limit // 2**20} MiB")
    return body


def send(request: urllib.request.Request, timeout: float, limit: int = MAX_BODY_BYTES) -> Answer:
    """The service's answer to ``request``, whatever its status (a redirect unfollowed); network failures raise as
    urllib raises them (the callers retry those), a body past ``limit`` as :class:`ResponseTooLarge`."""
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return Answer(int(response.status), _read(response, limit))
    except urllib.error.HTTPError as exc:
        try:
            location = exc.headers.get("Location") if exc.headers is not None else None
            return Answer(exc.code, _read(exc, limit), location if 300 <= exc.code < 400 else None)
        finally:
            exc.close()


FOREIGN_EXCERPT_CHARS = 120
_TAG = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]*>", re.IGNORECASE | re.DOTALL)


def foreign_body(body: bytes) -> str:
    """What to quote of an error body that is not the service's JSON error shape (a proxy's or another server's HTML
    page, a wrong URL's 404): its text without markup or control characters, on one line and short, said to be
    foreign, so that a one-line error neither carries a page of HTML nor passes for the service's own message."""
    text = _TAG.sub(" ", body[:4096].decode("utf-8", "replace"))
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if not text:
        return "an empty body, not a KernelWatch answer"
    cut = text if len(text) <= FOREIGN_EXCERPT_CHARS else text[:FOREIGN_EXCERPT_CHARS - 1] + "…"
    return f"not a KernelWatch answer: {cut!r}"
