"""A fake of the few GitHub REST endpoints the pull-request hook calls: a real HTTP server on 127.0.0.1 (so the
service's own transport, retries and auth run unchanged), recording every request.

It checks what GitHub would check: an installation token is only issued for an RS256 JWT that the app's public
key verifies, and every other call must carry a token it issued (or the configured plain token).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fake_http import JsonHandler, serve_in_thread

APP_ID = "4242"
TOKEN_USER = "kw-token-user"  # the plain token's own user (GET /user)
PLAIN_TOKEN = "ghp_plain_test_token"


def app_key_pair() -> tuple[str, str]:
    """(private PEM, public PEM) of a fresh RSA key, as GitHub would generate for an app."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str  # without the query
    query: dict[str, list[str]]
    authorization: str
    body: Any


@dataclass
class FakeGitHub:
    public_key: str = ""
    plain_token: str = PLAIN_TOKEN
    installation_id: int = 77
    # (owner/name, number) -> the pull request object GET /pulls/{n} answers
    pulls: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    # (owner/name, login) -> admin | maintain | write | triage | read; anyone else is not a collaborator (404)
    permissions: dict[tuple[str, str], str] = field(default_factory=dict)
    merge_base: Callable[[str, str, str], str] = lambda repo, base, head: base
    requests: list[Recorded] = field(default_factory=list)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> {id, body, issue}
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    # Answers to give before serving normally, one per request: (status, headers)
    failures: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    # Answers lost after the work was done: (method, path pattern, status), each spent on the first request it
    # matches (GitHub made the comment, then answered this status)
    lost_answers: list[tuple[str, str, int]] = field(default_factory=list)
    url: str = ""
    # While set to an unset Event, every request is recorded and then held unanswered until it is set (what a
    # slow GitHub looks like to whoever waits on it).
    hold: threading.Event | None = None
    answered: int = 0
    _tokens: set[str] = field(default_factory=set)
    _next_id: int = 1000
    _author: dict[str, Any] = field(default_factory=dict)  # who the request being served acts as (serve)
    user_forbidden: bool = False  # GET /user refused, as for an Actions GITHUB_TOKEN
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def calls(self, method: str, pattern: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.method == method and re.fullmatch(pattern, r.path)]

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; GitHub saw: "
                                     + ", ".join(f"{r.method} {r.path}" for r in self.requests))
            time.sleep(0.2)

    # -- the server's side ----------------------------------------------------------------------------------------

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _authorized(self, authorization: str) -> bool:
        token = authorization.removeprefix("Bearer ").removeprefix("token ")
        return token == self.plain_token or token in self._tokens

    def serve(self, method: str, path: str, query: dict[str, list[str]], auth: str,
              body: Any) -> tuple[int, Any, dict[str, str]]:
        with self._lock:
            self.requests.append(Recorded(method, path, query, auth, body))
        if self.hold is not None:
            self.hold.wait(timeout=120)
        with self._lock:
            self.answered += 1
            if self.failures:
                status, headers = self.failures.pop(0)
                return status, {"message": "injected failure" + (
                    " API rate limit exceeded" if status in (403, 429) else "")}, headers
            if m := re.fullmatch(r"/app/installations/(\d+)/access_tokens", path):
                return self._issue_token(auth, int(m.group(1)))
            if re.fullmatch(r"/repos/[^/]+/[^/]+/installation", path):
                if not self._app_jwt_ok(auth):
                    return 401, {"message": "A JSON web token could not be decoded"}, {}
                return 200, {"id": self.installation_id}, {}
            if not self._authorized(auth):
                return 401, {"message": "Bad credentials"}, {}
            # Who a comment made now is by: the token's user, or the app's bot (which GitHub says acted).
            plain = auth.removeprefix("Bearer ").removeprefix("token ") == self.plain_token
            self._author = ({"user": {"login": TOKEN_USER, "type": "User"}} if plain else
                            {"user": {"login": "kernelwatch[bot]", "type": "Bot"},
                             "performed_via_github_app": {"id": int(APP_ID)}})
            if method == "GET" and path == "/user":
                if not plain or self.user_forbidden:
                    return 403, {"message": "Resource not accessible by integration"}, {}
                return 200, {"login": TOKEN_USER}, {}
            answer = self._route(method, path, query, body)
            for i, (lost_method, pattern, status) in enumerate(self.lost_answers):
                if lost_method == method and re.fullmatch(pattern, path):
                    del self.lost_answers[i]
                    return status, {"message": "injected failure after the work was done"}, {}
            return answer

    def _app_jwt_ok(self, auth: str) -> bool:
        try:
            claims = jwt.decode(auth.removeprefix("Bearer "), self.public_key, algorithms=["RS256"])
        except jwt.PyJWTError:
            return False
        return str(claims.get("iss")) == APP_ID and claims["exp"] - claims["iat"] <= 600

    def _issue_token(self, auth: str, installation: int) -> tuple[int, Any, dict[str, str]]:
        if not self._app_jwt_ok(auth):
            return 401, {"message": "A JSON web token could not be decoded"}, {}
        if installation != self.installation_id:
            return 404, {"message": "Not Found"}, {}
        token = f"ghs_installation_{self._id()}"
        self._tokens.add(token)
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        return 201, {"token": token, "expires_at": expires}, {}

    def _route(self, method: str, path: str, query: dict[str, list[str]],
               body: Any) -> tuple[int, Any, dict[str, str]]:
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/(.*)", path)
        if m is None:
            return 404, {"message": "Not Found"}, {}
        repo, rest = m.group(1), m.group(2)
        if method == "GET" and (c := re.fullmatch(r"compare/(.+)\.\.\.(.+)", rest)):
            return 200, {"merge_base_commit": {"sha": self.merge_base(repo, c.group(1), c.group(2))}}, {}
        if method == "GET" and (c := re.fullmatch(r"pulls/(\d+)", rest)):
            pull = self.pulls.get((repo, int(c.group(1))))
            return (200, pull, {}) if pull else (404, {"message": "Not Found"}, {})
        if method == "GET" and (c := re.fullmatch(r"collaborators/([^/]+)/permission", rest)):
            role = self.permissions.get((repo, c.group(1)))
            if role is None:
                return 404, {"message": "is not a user"}, {}
            legacy = {"maintain": "write", "triage": "read"}.get(role, role)
            return 200, {"permission": legacy, "role_name": role}, {}
        if method == "GET" and (c := re.fullmatch(r"issues/(\d+)/comments", rest)):
            per_page, page = int(query.get("per_page", ["30"])[0]), int(query.get("page", ["1"])[0])
            on_issue = [x for x in self.comments.values() if x["issue"] == (repo, int(c.group(1)))]
            return 200, on_issue[(page - 1) * per_page: page * per_page], {}
        if method == "POST" and (c := re.fullmatch(r"issues/(\d+)/comments", rest)):
            comment = {"id": self._id(), "body": body["body"], "issue": (repo, int(c.group(1))), **self._author}
            self.comments[comment["id"]] = comment
            return 201, comment, {}
        if method == "PATCH" and (c := re.fullmatch(r"issues/comments/(\d+)", rest)):
            edited = self.comments.get(int(c.group(1)))
            if edited is None:
                return 404, {"message": "Not Found"}, {}
            edited["body"] = body["body"]
            return 200, edited, {}
        if method == "POST" and rest == "check-runs":
            run = {"id": self._id(), **body}
            self.check_runs[run["id"]] = run
            return 201, run, {}
        if method == "GET" and (c := re.fullmatch(r"commits/([0-9a-f]{40})/check-runs", rest)):
            name = query.get("check_name", [None])[0]
            runs = [r for r in self.check_runs.values()
                    if r.get("head_sha") == c.group(1) and name in (None, r.get("name"))]
            return 200, {"total_count": len(runs), "check_runs": runs}, {}
        if method == "PATCH" and (c := re.fullmatch(r"check-runs/(\d+)", rest)):
            updated = self.check_runs.get(int(c.group(1)))
            if updated is None:
                return 404, {"message": "Not Found"}, {}
            if updated.get("status") == "completed" and (
                    body.get("status", "completed") != "completed"
                    or body.get("conclusion", updated.get("conclusion")) != updated.get("conclusion")):
                # As GitHub: a completed check run's status and conclusion are final.
                return 422, {"message": "a completed check run cannot change its status or conclusion"}, {}
            updated.update(body)
            return 200, updated, {}
        if method == "POST" and (c := re.fullmatch(r"statuses/([0-9a-f]{40})", rest)):
            status = {"sha": c.group(1), **body}
            self.statuses.append(status)
            return 201, status, {}
        return 404, {"message": "Not Found"}, {}


class _Handler(JsonHandler):
    fake: FakeGitHub

    def _handle(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        status, answer, headers = self.fake.serve(self.command, split.path, parse_qs(split.query),
                                                  self.headers.get("Authorization", ""), body)
        self.send_json(status, answer, headers)

    do_GET = do_POST = do_PATCH = _handle


@contextmanager
def serve_fake_github(fake: FakeGitHub) -> Iterator[FakeGitHub]:
    handler = type("Handler", (_Handler,), {"fake": fake})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    serve_in_thread(server)
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
