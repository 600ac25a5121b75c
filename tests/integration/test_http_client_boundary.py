"""KernelWatch's own HTTP clients (`compare --url`, a runner's uploader) against a hostile server on 127.0.0.1: a
redirect never carries the token to another host, an answer that is no comparison document is one line and exit 2,
a token no header can carry is refused without being shown, and a URL that cannot work is refused before any try."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runners.artifacts import ArtifactStore
from runners.uploader import HttpUploader, UploadRejected
from tests import builders
from tests.cli_inprocess import run_cli
from tests.fake_http import JsonHandler, serve_in_thread

TOKEN = "kw_abcdef123456_s3cr3tS3CR3Ts3cr3tS3CR3T"
Reply = Callable[[JsonHandler], None]


class Hostile:
    """A server that answers every request with ``reply`` and records (method, path, Authorization)."""

    def __init__(self) -> None:
        self.reply: Reply = lambda h: h.send_json(200, {}, {})
        self.seen: list[tuple[str, str, str | None]] = []
        owner = self

        class Handler(JsonHandler):
            def _any(self) -> None:
                owner.seen.append((self.command, self.path, self.headers.get("Authorization")))
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                owner.reply(self)

            do_GET = do_HEAD = do_POST = do_PUT = _any  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[Hostile, Hostile]]:
    first, second = Hostile(), Hostile()
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def compare(url: str, token: str = TOKEN) -> Any:
    env = dict(os.environ)
    env.pop("KERNELWATCH_DATABASE_URL", None)
    return run_cli(["compare", "aaaa", "bbbb", "--url", url, "--token", token, "--format", "json"], env)


def redirect_to(target: str) -> Reply:
    return lambda h: h.send_json(302, {}, {"Location": f"{target}/api/v1/compare"})


def test_a_redirect_never_carries_the_token_elsewhere(servers: tuple[Hostile, Hostile], tmp_path: Path) -> None:
    first, elsewhere = servers
    first.reply = redirect_to(elsewhere.url)
    answered = compare(first.url)
    assert answered.returncode == 2 and "redirect" in answered.stderr and "final address" in answered.stderr
    assert TOKEN not in answered.stderr and "Traceback" not in answered.stderr
    uploader = HttpUploader(first.url, TOKEN, ArtifactStore(tmp_path / "artifacts"), retries=0)
    with pytest.raises(UploadRejected, match="redirect"):
        uploader(builders.manifest())
    assert first.seen and elsewhere.seen == []  # the other host heard nothing, the token least of all


@pytest.mark.parametrize("answer", [
    "[" * 100_000 + "]" * 100_000,  # nested past Python's recursion
    json.dumps({"page": [], "summary": {}}),  # no benchmarks
    json.dumps({"benchmarks": [], "page": {"next_offset": "ten"}}),
    json.dumps({"benchmarks": {}, "page": {"next_offset": None}}),
])
def test_an_answer_that_is_no_comparison_is_one_line(servers: tuple[Hostile, Hostile], answer: str) -> None:
    first, _ = servers

    def reply(h: JsonHandler) -> None:
        data = answer.encode()
        h.send_response(200)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    first.reply = reply
    answered = compare(first.url)
    assert answered.returncode == 2 and "Traceback" not in answered.stderr, answered.stderr[-2000:]
    assert len(answered.stderr.strip().splitlines()) == 1


def test_another_server_s_error_page_is_quoted_short_and_said_to_be_foreign(servers: tuple[Hostile, Hostile],
                                                                             tmp_path: Path) -> None:
    """A URL that reaches some other server (a proxy, a wrong path): its 404 page of HTML is not the service's
    message, and a one-line error carries neither its markup nor its length."""
    first, _ = servers
    page = ("<!DOCTYPE html><html><head><title>404 Not Found</title><style>body{color:red}</style></head>"
            "<body>\n<h1>Not Found</h1>\n<p>The requested URL was not found on this server.</p>"
            + "<p>padding</p>" * 200 + "</body></html>").encode()

    def reply(h: JsonHandler) -> None:
        h.send_response(404)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(len(page)))
        h.end_headers()
        h.wfile.write(page)

    first.reply = reply
    answered = compare(first.url)
    assert answered.returncode == 2 and len(answered.stderr.strip().splitlines()) == 1, answered.stderr
    assert "not a KernelWatch answer: '404 Not Found Not Found The requested URL" in answered.stderr
    assert "<" not in answered.stderr and "color:red" not in answered.stderr and len(answered.stderr) < 400
    uploader = HttpUploader(first.url, TOKEN, ArtifactStore(tmp_path / "artifacts"), retries=0)
    with pytest.raises(UploadRejected, match="not a KernelWatch answer: '404 Not Found") as refused:
        uploader(builders.manifest())
    assert "<" not in str(refused.value)


def test_an_answer_past_the_cap_is_not_read_whole(servers: tuple[Hostile, Hostile]) -> None:
    first, _ = servers
    chunk = b" " * 2**20

    def reply(h: JsonHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(80 * len(chunk)))
        h.end_headers()
        try:
            for _ in range(80):
                h.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading at its cap, as it should

    first.reply = reply
    answered = compare(first.url)
    assert answered.returncode == 2 and "ran past 64 MiB" in answered.stderr, answered.stderr[-2000:]


def test_a_token_no_header_can_carry_is_refused_unshown(servers: tuple[Hostile, Hostile], tmp_path: Path) -> None:
    first, _ = servers
    for bad in (TOKEN + "\r", TOKEN + "\nX-Injected: 1", "kw_é_" + TOKEN):
        answered = compare(first.url, bad)
        assert answered.returncode == 2 and "the token is not shown" in answered.stderr, answered.stderr
        assert "s3cr3t" not in answered.stderr and "Traceback" not in answered.stderr
        with pytest.raises(UploadRejected, match="KERNELWATCH_TOKEN holds a character") as refused:
            HttpUploader(first.url, bad, ArtifactStore(tmp_path / "artifacts"))
        assert "s3cr3t" not in str(refused.value)
    assert first.seen == []  # nothing was sent


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:abc", "ftp://127.0.0.1", "http://"])
def test_a_url_that_cannot_work_is_refused_before_any_try(url: str) -> None:
    answered = compare(url)
    assert answered.returncode == 2 and "Traceback" not in answered.stderr and "--url" in answered.stderr
