"""A thin transport to GitHub's REST API: the few calls the pull-request hook makes, with timeouts, retries of
5xx and connection errors only, and rate limits honoured.

A call that creates something (POST a comment, POST a check run) is not repeated after a 5xx or a timeout:
GitHub may have made the thing before it failed to answer, and a blind repeat makes it twice (two comments on a
pull request, two check runs). Such a failure goes back to the task as GitHubUnavailable; the task's retry first
looks for what it made (the comment's marker, the check run's external id) and edits it. A creating call is
repeated only where the request provably never arrived (connection refused) or GitHub said it did nothing (a
rate limit).

Two ways to authenticate: a GitHub App (a JWT signed RS256 with the app's private key buys an installation
token, cached until shortly before it expires) or a plain token. ``urllib`` because the project declares no HTTP
client and these few JSON calls need none.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import quote

import jwt

from kernelwatch.digits import is_whole
from kernelwatch.errors import KernelWatchError, Transient
from kernelwatch.http_call import SameOriginRedirects

log = logging.getLogger(__name__)

USER_AGENT = "kernelwatch-pr-hook"
# GitHub moves a renamed or transferred repository's calls with a 301 within api.github.com; never elsewhere with
# the installation's token (kernelwatch/http_call.py SameOriginRedirects).
_OPENER = urllib.request.build_opener(SameOriginRedirects())
API_VERSION = "2022-11-28"
MAX_RATE_LIMIT_WAIT_S = 60.0  # longer waits go back to the task queue (a retry later) instead of holding a worker
COMMENTS_PAGE = 100
MAX_COMMENT_PAGES = 30  # 3,000 comments: past that the marker search gives up and a new comment is made


class GitHubError(KernelWatchError):
    """GitHub refused the request (4xx other than a rate limit): retrying the same call cannot help."""

    http_status = 502

    def __init__(self, status: int, method: str, path: str, message: str) -> None:
        super().__init__(f"GitHub answered {status} to {method} {path}: {message[:300]}")
        self.status = status


class GitHubUnavailable(Transient):
    """A 5xx, a connection failure or a rate limit that outlasts what a call waits: try again later.
    ``retry_after_s`` is GitHub's own hint, when it gave one."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Auth(Protocol):
    def header(self, api: GitHubClient) -> str:
        """The Authorization header's value."""
        ...


@dataclass(frozen=True)
class TokenAuth:
    token: str

    def header(self, api: GitHubClient) -> str:
        return f"Bearer {self.token}"


def app_jwt(app_id: str, private_key: str, now: float | None = None) -> str:
    """The app's own credential: ten minutes at most (GitHub's limit), issued a minute in the past so that a
    clock slightly ahead of GitHub's is not refused."""
    issued = int(now if now is not None else time.time()) - 60
    return jwt.encode({"iat": issued, "exp": issued + 9 * 60, "iss": app_id}, private_key, algorithm="RS256")


class AppInstallationAuth:
    """An installation token of a GitHub App, fetched with the app's JWT and reused until a minute before it
    expires (an hour). Thread-safe: one instance serves a whole worker."""

    def __init__(self, app_id: str, private_key: str, installation_id: int) -> None:
        self.app_id = app_id
        self._key = private_key
        self.installation_id = installation_id
        self._token = ""
        self._expires = 0.0
        self._lock = threading.Lock()

    def header(self, api: GitHubClient) -> str:
        with self._lock:
            if time.time() > self._expires - 60:
                jwt_auth = TokenAuth(app_jwt(self.app_id, self._key))
                answer = api.call("POST", f"/app/installations/{self.installation_id}/access_tokens",
                                  auth=jwt_auth)
                self._token = str(answer["token"])
                self._expires = _epoch(answer.get("expires_at")) or time.time() + 3000
            return f"Bearer {self._token}"


def _epoch(stamp: object) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def installation_for(api_url: str, app_id: str, private_key: str, repository: str, timeout_s: float = 10) -> int:
    """The app's installation on a repository, for an event that did not name one."""
    client = GitHubClient(api_url, TokenAuth(app_jwt(app_id, private_key)), timeout_s=timeout_s)
    return int(client.call("GET", f"/repos/{repository}/installation")["id"])


class GitHubClient:
    def __init__(self, api_url: str, auth: Auth, timeout_s: float = 10.0, attempts: int = 4,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.api_url = api_url.rstrip("/")
        self.auth = auth
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.sleep = sleep
        self._login: str | None = None  # the token's user (GET /user), once asked

    # -- the calls the hook makes ------------------------------------------------------------------------------

    def merge_base(self, repository: str, base: str, head: str) -> str:
        answer = self.call("GET", f"/repos/{repository}/compare/{quote(base, safe='')}...{quote(head, safe='')}")
        return str(answer["merge_base_commit"]["sha"])

    def pull_request(self, repository: str, number: int) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", f"/repos/{repository}/pulls/{number}")
        return answer

    def permission(self, repository: str, user: str) -> str:
        """admin | maintain | write | triage | read | none."""
        try:
            answer = self.call("GET", f"/repos/{repository}/collaborators/{quote(user, safe='')}/permission")
        except GitHubError as exc:
            if exc.status == 404:  # not a collaborator at all
                return "none"
            raise
        return str(answer.get("role_name") or answer.get("permission") or "none")

    def find_comment(self, repository: str, number: int, marker: str) -> int | None:
        """The id of this service's comment on the pull request: the first carrying ``marker`` that this client's
        identity wrote. Anyone can write the marker into a comment of their own; editing theirs would put the
        verdict under their name, for them to edit after."""
        for page in range(1, MAX_COMMENT_PAGES + 1):
            comments = self.call("GET", f"/repos/{repository}/issues/{number}/comments"
                                        f"?per_page={COMMENTS_PAGE}&page={page}")
            for comment in comments:
                if marker in (comment.get("body") or "") and self._wrote(comment):
                    return int(comment["id"])
            if len(comments) < COMMENTS_PAGE:
                return None
        return None

    def _wrote(self, comment: dict[str, Any]) -> bool:
        """Whether this client's identity wrote the comment: the app (GitHub names the app that acted, and its
        user is a bot), or the token's own user."""
        user = comment.get("user") or {}
        if isinstance(self.auth, AppInstallationAuth):
            # GitHub names the app that made a comment; another app's bot (github-actions) is not this one.
            app = comment.get("performed_via_github_app") or {}
            return user.get("type") == "Bot" and str(app.get("id")) == str(self.auth.app_id)
        if self._login is None:
            try:
                self._login = str(self.call("GET", "/user").get("login") or "")
            except GitHubError as exc:
                # A token that may not read its own user (an Actions GITHUB_TOKEN): no comment is taken for
                # ours, so a lost comment id costs a second comment, never someone else's edited.
                log.warning("cannot tell which comments are this token's (GET /user: %s): none is taken over", exc)
                self._login = ""
        return bool(self._login) and user.get("login") == self._login

    def create_comment(self, repository: str, number: int, body: str) -> int:
        return int(self.call("POST", f"/repos/{repository}/issues/{number}/comments", {"body": body},
                             repeatable=False)["id"])

    def update_comment(self, repository: str, comment_id: int, body: str) -> None:
        self.call("PATCH", f"/repos/{repository}/issues/comments/{comment_id}", {"body": body})

    def create_check_run(self, repository: str, fields: dict[str, Any]) -> int:
        return int(self.call("POST", f"/repos/{repository}/check-runs", fields, repeatable=False)["id"])

    def find_check_run(self, repository: str, sha: str, name: str, external_id: str) -> int | None:
        """The id of the check run this service made on ``sha`` (its name and external id), if GitHub has one:
        one still in progress first, else the newest."""
        answer = self.call("GET", f"/repos/{repository}/commits/{quote(sha, safe='')}/check-runs"
                                  f"?check_name={quote(name, safe='')}&filter=all&per_page=100")
        mine = [run for run in answer.get("check_runs") or [] if str(run.get("external_id")) == external_id]
        if not mine:
            return None
        return int(max(mine, key=lambda run: (run.get("status") != "completed", int(run["id"])))["id"])

    def update_check_run(self, repository: str, check_run_id: int, fields: dict[str, Any]) -> None:
        self.call("PATCH", f"/repos/{repository}/check-runs/{check_run_id}", fields)

    def create_status(self, repository: str, sha: str, fields: dict[str, Any]) -> None:
        self.call("POST", f"/repos/{repository}/statuses/{sha}", fields)

    # -- the transport -------------------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, auth: Auth | None = None,
             repeatable: bool = True) -> Any:
        """One API call, answered JSON. Retries 5xx and connection errors with backoff; waits out a rate limit
        when GitHub says it ends soon; any other 4xx is a GitHubError at once. ``repeatable=False`` (a call that
        creates something): a 5xx or a timeout is GitHubUnavailable at once, since GitHub may have acted."""
        url = f"{self.api_url}{path}"
        data = json.dumps(body).encode() if body is not None else None
        failure = ""
        for attempt in range(self.attempts):
            if attempt:
                self.sleep(min(8.0, 0.5 * 2 ** (attempt - 1)))
            request = urllib.request.Request(url, data=data, method=method, headers={
                "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT, "Authorization": (auth or self.auth).header(self),
                **({"Content-Type": "application/json"} if data is not None else {})})
            try:
                with _OPENER.open(request, timeout=self.timeout_s) as response:
                    raw = response.read()
                return json.loads(raw) if raw.strip() else {}
            except urllib.error.HTTPError as exc:
                text = exc.read().decode(errors="replace")
                wait = _rate_limit_wait(exc.code, exc.headers, text)
                if wait is not None:
                    if wait > MAX_RATE_LIMIT_WAIT_S or attempt == self.attempts - 1:
                        raise GitHubUnavailable(f"GitHub's rate limit for {method} {path} lifts in {wait:.0f} s",
                                                retry_after_s=wait) from None
                    log.warning("GitHub rate limit on %s %s: waiting %.0f s", method, path, wait)
                    self.sleep(wait)
                    continue
                if 300 <= exc.code < 400:  # a redirect off the API's origin (SameOriginRedirects follows the rest)
                    where = exc.headers.get("Location") if exc.headers is not None else None
                    raise GitHubError(exc.code, method, path, f"a redirect to {str(where)[:200]!r}, not followed: "
                                      f"only reads are followed, within {self.api_url}'s host (the credentials "
                                      "never reach another host, a write is never replayed as a read)") from None
                if exc.code < 500:
                    raise GitHubError(exc.code, method, path, _message(text)) from None
                failure = f"GitHub answered {exc.code} to {method} {path}"
                if not repeatable:
                    raise GitHubUnavailable(f"{failure}; not repeated: GitHub may have acted on it") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                failure = f"GitHub unreachable for {method} {path}: {getattr(exc, 'reason', exc)}"
                if not repeatable and not _never_arrived(exc):
                    raise GitHubUnavailable(f"{failure}; not repeated: GitHub may have acted on it") from None
            log.warning("%s (attempt %d of %d)", failure, attempt + 1, self.attempts)
        raise GitHubUnavailable(failure)


def _never_arrived(exc: BaseException) -> bool:
    """Whether a transport failure proves the request never reached GitHub (nothing listened, no such host)."""
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, (ConnectionRefusedError, socket.gaierror))


def _message(text: str) -> str:
    try:
        return str(json.loads(text).get("message", text))
    except (ValueError, AttributeError):
        return text


def _rate_limit_wait(status: int, headers: Any, text: str) -> float | None:
    """Seconds until a rate limit lifts, or None when this is not a rate limit. GitHub answers a primary limit
    with 403 or 429 and X-RateLimit-Remaining: 0 (X-RateLimit-Reset says when), a secondary one with Retry-After
    or, failing both, a message naming it (then a minute is what its documentation asks)."""
    if status not in (403, 429):
        return None
    retry_after = headers.get("Retry-After") if headers is not None else None
    if retry_after and is_whole(str(retry_after)):
        return float(retry_after)
    if headers is not None and headers.get("X-RateLimit-Remaining") == "0":
        reset = headers.get("X-RateLimit-Reset")
        if reset and is_whole(str(reset)):
            return max(1.0, float(reset) - time.time())
        return 60.0
    if status == 429 or "rate limit" in text.lower():
        return 60.0
    return None


class ClientFactory:
    """A client per repository: as the app's installation there (its token cached per installation, so one
    worker fetches one an hour), or with the plain token. Built once per process from the settings."""

    def __init__(self, api_url: str, app_id: str = "", private_key: str = "", token: str = "",
                 timeout_s: float = 10.0) -> None:
        self.api_url = api_url
        self.app_id = app_id
        self._key = private_key
        self._token = token
        self.timeout_s = timeout_s
        self._installations: dict[int, AppInstallationAuth] = {}
        self._lock = threading.Lock()

    def __call__(self, repository: str, installation_id: int | None) -> GitHubClient:
        if not self.app_id:
            return GitHubClient(self.api_url, TokenAuth(self._token), self.timeout_s)
        if installation_id is None:
            installation_id = installation_for(self.api_url, self.app_id, self._key, repository, self.timeout_s)
        with self._lock:
            auth = self._installations.get(installation_id)
            if auth is None:
                auth = self._installations[installation_id] = AppInstallationAuth(self.app_id, self._key,
                                                                                  installation_id)
        return GitHubClient(self.api_url, auth, self.timeout_s)
