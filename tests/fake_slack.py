"""A fake Slack Web API on 127.0.0.1: a real HTTP server answering chat.postMessage and chat.update as Slack
does, recording every request, and checking each message against Slack's limits (a message past them is
refused with ``invalid_blocks``, as Slack refuses it).

It can misbehave on demand: answer the next requests with 429 and a Retry-After, answer 500 (Slack down), or
stop listening altogether (connection refused) and come back later on the same port.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fake_http import JsonHandler, serve_in_thread

TOKEN = "xoxb-test-token"
CHANNEL_ID = "C0FAKECHAN"
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
MAX_FIELD_TEXT = 2000


@dataclass
class Request:
    method: str  # chat.postMessage, chat.update
    body: dict[str, Any]
    status: int  # what the fake answered


@dataclass
class Message:
    ts: str
    channel: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    edits: int = 0


def limit_errors(blocks: list[dict[str, Any]]) -> list[str]:
    """What Slack would refuse in these blocks (empty: it takes them)."""
    errors = []
    if len(blocks) > MAX_BLOCKS:
        errors.append(f"{len(blocks)} blocks")
    for i, block in enumerate(blocks):
        text = block.get("text", {}).get("text", "") if isinstance(block.get("text"), dict) else ""
        if block.get("type") == "header" and len(text) > MAX_HEADER_TEXT:
            errors.append(f"block {i}: header of {len(text)} chars")
        if block.get("type") == "section" and len(text) > MAX_SECTION_TEXT:
            errors.append(f"block {i}: section text of {len(text)} chars")
        for f in block.get("fields", []):
            if len(f.get("text", "")) > MAX_FIELD_TEXT:
                errors.append(f"block {i}: field of {len(f['text'])} chars")
        if block.get("type") == "section" and not text and not block.get("fields"):
            errors.append(f"block {i}: empty section")
    return errors


@dataclass
class FakeSlack:
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    messages: dict[str, Message] = field(default_factory=dict)
    _rate_limited: int = 0
    _retry_after: int = 1
    _error_status: int | None = None
    _reject: str | None = None
    _next_ts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # While an unset Event, each request is counted in ``arrived`` and held unanswered until it is set (a slow
    # Slack, to whoever waits on it).
    hold: threading.Event | None = None
    arrived: int = 0
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/api/"

    # --- what tests set up ---

    def rate_limit(self, count: int, retry_after: int = 1) -> None:
        """Answer the next ``count`` requests with 429 Too Many Requests and this Retry-After."""
        with self._lock:
            self._rate_limited, self._retry_after = count, retry_after

    def fail_with(self, status: int | None) -> None:
        """Answer every request with this HTTP status (500: Slack down) until called with None."""
        with self._lock:
            self._error_status = status

    def reject_with(self, error: str | None) -> None:
        """Answer every request ``{"ok": false, "error": error}`` (invalid_auth...) until called with None."""
        with self._lock:
            self._reject = error

    # --- what tests read ---

    def calls(self, method: str, ok_only: bool = False) -> list[Request]:
        return [r for r in self.requests if r.method == method and (not ok_only or r.status == 200)]

    def top_level(self) -> list[Message]:
        return [m for m in self.messages.values() if m.thread_ts is None]

    def replies(self, ts: str) -> list[Message]:
        return [m for m in self.messages.values() if m.thread_ts == ts]

    # --- the server ---

    def start(self) -> None:
        server = ThreadingHTTPServer((self.host, self.port), self._handler())
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = serve_in_thread(server)

    def stop(self) -> None:
        """Stop listening: every connection is refused until ``start`` again (same port, same messages)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _answer(self, method: str, body: dict[str, Any], auth: str) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._lock:
            if self._rate_limited > 0:
                self._rate_limited -= 1
                return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(self._retry_after)}
            if self._error_status is not None:
                return self._error_status, {"ok": False, "error": "internal_error"}, {}
            if self._reject is not None:
                return 200, {"ok": False, "error": self._reject}, {}
            if auth != f"Bearer {TOKEN}":
                return 200, {"ok": False, "error": "invalid_auth"}, {}
            blocks = body.get("blocks") or []
            if limit_errors(blocks) or len(body.get("text", "")) > 40000:
                return 200, {"ok": False, "error": "invalid_blocks", "detail": limit_errors(blocks)}, {}
            if method == "chat.postMessage":
                return 200, self._post(body), {}
            if method == "chat.update":
                return 200, self._update(body), {}
            return 200, {"ok": False, "error": "unknown_method"}, {}

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        channel = body.get("channel")
        if channel not in ("#perf-alerts", CHANNEL_ID):
            return {"ok": False, "error": "channel_not_found"}
        thread_ts = body.get("thread_ts")
        if thread_ts is not None and thread_ts not in self.messages:
            return {"ok": False, "error": "thread_not_found"}
        self._next_ts += 1
        ts = f"1764480000.{self._next_ts:06d}"
        self.messages[ts] = Message(ts=ts, channel=CHANNEL_ID, text=body.get("text", ""),
                                    blocks=body.get("blocks") or [], thread_ts=thread_ts)
        return {"ok": True, "channel": CHANNEL_ID, "ts": ts, "message": {"text": body.get("text", "")}}

    def _update(self, body: dict[str, Any]) -> dict[str, Any]:
        # chat.update takes the channel's id only, never its name: the fake is as strict.
        message = self.messages.get(body.get("ts", ""))
        if body.get("channel") != CHANNEL_ID or message is None:
            return {"ok": False, "error": "message_not_found" if message is None else "channel_not_found"}
        message.text, message.blocks = body.get("text", ""), body.get("blocks") or []
        message.edits += 1
        return {"ok": True, "channel": CHANNEL_ID, "ts": message.ts}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {}
                method = self.path.rstrip("/").rsplit("/", 1)[-1]
                with fake._lock:
                    fake.arrived += 1
                if fake.hold is not None:
                    fake.hold.wait(timeout=120)
                status, answer, headers = fake._answer(method, body, self.headers.get("Authorization", ""))
                with fake._lock:
                    fake.requests.append(Request(method=method, body=body, status=status))
                self.send_json(status, answer, headers, "application/json; charset=utf-8")

        return Handler


@contextmanager
def running_fake_slack() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()
