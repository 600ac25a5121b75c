"""A comparison read from a KernelWatch service over its HTTP API: every page of ``GET /api/v1/compare`` joined
back into the one document ``kernelwatch compare --format json`` prints, so that every output form works the same
on a service's data as on a local database's.

A thin transport (stdlib urllib, a timeout per request): connection failures and 502/503/504 are tried again
with backoff, any other answer is final and becomes the error the service described (a 404 for an unknown
reference, a 401 for a missing token) so that the CLI reports it as the service said it.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from kernelwatch.errors import (
    Forbidden,
    InvalidInput,
    KernelWatchError,
    NotComparable,
    NotFound,
    Transient,
    Unauthorized,
)
from kernelwatch.http_call import Answer, ResponseTooLarge, check_token, check_url, foreign_body, send

PAGE_LIMIT = 5000  # the API's largest page: a suite of a few thousand results comes in one request
_TRANSIENT = frozenset({502, 503, 504})
_BY_STATUS: dict[int, type[KernelWatchError]] = {400: InvalidInput, 401: Unauthorized, 403: Forbidden,
                                                 404: NotFound}
MAX_PAGES = 10_000  # a service whose next_offset never ends is a bug, not a reason to loop for ever


class CompareClient:
    def __init__(self, base_url: str, token: str | None = None, timeout: float = 120.0, retries: int = 3,
                 backoff: float = 1.0, sleep: Callable[[float], None] = time.sleep,
                 page_limit: int = PAGE_LIMIT) -> None:
        """``base_url``: the service's root (``http://host:8000``) or its API root (``.../api/v1``). A comparison
        is computed on request, so the timeout is generous. ``page_limit``: rows per request (tests page with
        small ones)."""
        root = base_url.rstrip("/")
        try:
            check_url(root, "--url")
            if token:
                check_token(token, "the token (--token or KERNELWATCH_TOKEN)")
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        self.api = root if root.endswith("/api/v1") else f"{root}/api/v1"
        self._token = token or None
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._sleep = sleep
        self.page_limit = page_limit

    def __repr__(self) -> str:  # never the token
        return f"CompareClient({self.api!r})"

    def compare(self, base: str, head: str, repository: str | None = None, alpha: float = 0.05,
                min_effect: float = 0.01) -> dict[str, Any]:
        """The whole comparison as one ``kernelwatch.compare`` document (no ``page``): the first page's summary,
        geomeans and labels, with the benchmarks of every page in the service's name order."""
        query: dict[str, str] = {"base": base, "head": head, "alpha": repr(alpha), "min_effect": repr(min_effect),
                                 "sort": "name", "limit": str(self.page_limit)}
        if repository:
            query["repo"] = repository
        document: dict[str, Any] | None = None
        offset: int | None = 0
        for _ in range(MAX_PAGES):
            if offset is None:
                break
            page = self._get("/compare", {**query, "offset": str(offset)})
            paging = page.pop("page", None) or {}
            benchmarks = page.get("benchmarks")
            next_offset = paging.get("next_offset") if isinstance(paging, dict) else "not a page"
            if not isinstance(benchmarks, list) or not (next_offset is None or type(next_offset) is int):
                raise InvalidInput(f"the service at {self.api} answered /compare with no comparison document (its "
                                   f"benchmarks or its page are missing or malformed)")
            if document is None:
                document = page
            else:
                document["benchmarks"].extend(benchmarks)
            if next_offset is not None and next_offset <= offset:
                raise InvalidInput(f"the service at {self.api} paged backwards (offset {offset} then {next_offset})")
            offset = next_offset
        else:
            raise InvalidInput(f"the service at {self.api} gave more than {MAX_PAGES} pages")
        assert document is not None
        return document

    def repository_url(self, name: str) -> str | None:
        """The URL the service stores for a repository, to resolve a branch or tag name in it."""
        for repository in self._get("/repositories", {}).get("repositories", []):
            if repository.get("name") == name:
                return str(repository.get("url") or "") or None
        return None

    def _get(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        url = f"{self.api}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        attempt = 0
        while True:
            try:
                answer = self._once(url)
                status, body = answer.status, answer.body
                if answer.redirected:
                    raise InvalidInput(f"{self.api}{path} {answer.redirect_text()} (--url)")
                if status not in _TRANSIENT:
                    break
                reason = f"HTTP {status}"
            except ResponseTooLarge as exc:
                raise InvalidInput(f"{self.api}{path}: {exc}; this is no KernelWatch answer") from None
            except (ConnectionError, TimeoutError, http.client.HTTPException) as exc:
                reason = f"{type(exc).__name__}: {exc}"
            except urllib.error.URLError as exc:
                reason = f"{type(exc.reason).__name__}: {exc.reason}"
            if attempt >= self.retries:
                raise Transient(f"GET {self.api}{path} failed {attempt + 1} time(s), last: {reason}")
            self._sleep(self.backoff * 2 ** attempt)
            attempt += 1
        try:
            decoded = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested past Python's stack
            decoded = None
        if status == 200 and isinstance(decoded, dict):
            return decoded
        error = decoded.get("error") if isinstance(decoded, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        message = message if isinstance(message, str) and message else foreign_body(body)
        if status in (401, 403):
            message += " (give --token or set KERNELWATCH_TOKEN)"
        kind = NotComparable if isinstance(error, dict) and error.get("code") == "not_comparable" else \
            _BY_STATUS.get(status, KernelWatchError)
        raise kind(f"{self.api}{path}: {status}: {message}")

    def _once(self, url: str) -> Answer:
        request = urllib.request.Request(url, method="GET")
        request.add_header("Accept", "application/json")
        if self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        return send(request, self.timeout)
