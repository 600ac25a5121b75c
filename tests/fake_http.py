"""What the recording fakes of outside HTTP APIs (GitHub, Slack) share: a request handler that answers JSON and
keeps quiet."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

# How often a test's HTTP server checks for shutdown() (serve_forever's poll_interval, 0.5 s by default): the most a
# stop waits, and every test with such a server stopped it in its teardown.
SHUTDOWN_POLL_S = 0.02


class _Serving(Protocol):
    def serve_forever(self, poll_interval: float = ...) -> None: ...


def serve_in_thread(server: _Serving) -> threading.Thread:
    """``server.serve_forever()`` in a daemon thread, started, checking for shutdown() every SHUTDOWN_POLL_S."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True)
    thread.start()
    return thread


class JsonHandler(BaseHTTPRequestHandler):
    def send_json(self, status: int, answer: Any, headers: Mapping[str, str],
                  content_type: str = "application/json") -> None:
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass
