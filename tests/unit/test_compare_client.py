"""The HTTP read of a comparison against a scripted local server: pages joined, transient answers retried,
final ones turned into the error the service described (the real service is in
tests/integration/test_compare_outputs.py; a 503 or a page that runs backwards cannot be asked of it)."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kernelwatch.errors import InvalidInput, NotFound, Transient, Unauthorized
from service.integrations.compare_api import CompareClient
from tests.fake_http import serve_in_thread

Answer = tuple[int, dict[str, Any]]


class Script:
    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.requests: list[tuple[str, dict[str, str], str | None]] = []


def page(names: list[str], next_offset: int | None) -> dict[str, Any]:
    return {"format": "kernelwatch.compare", "version": 1, "summary": {"regression": 3},
            "benchmarks": [{"name": n} for n in names], "page": {"next_offset": next_offset}}


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            parts = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(parts.query))
            script.requests.append((parts.path, query, self.headers.get("Authorization")))
            status, body = script.answers.pop(0)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serve_in_thread(httpd)
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    finally:
        httpd.shutdown()
        httpd.server_close()


def client(url: str, token: str | None = "kw_t") -> CompareClient:
    return CompareClient(url, token, timeout=5, retries=2, sleep=lambda _: None, page_limit=2)


def test_pages_are_joined_and_the_paging_dropped(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(200, page(["a", "b"], 2)), (503, {}), (200, page(["c", "d"], 4)), (200, page(["e"], None))]
    document = client(url).compare("v1", "main", "kernels", alpha=0.1, min_effect=0.05)
    assert [b["name"] for b in document["benchmarks"]] == ["a", "b", "c", "d", "e"] and "page" not in document
    assert [q["offset"] for _, q, _ in script.requests] == ["0", "2", "2", "4"]  # the 503 was asked again
    path, query, auth = script.requests[0]
    assert path == "/api/v1/compare" and auth == "Bearer kw_t"
    assert query == {"base": "v1", "head": "main", "repo": "kernels", "alpha": "0.1", "min_effect": "0.05",
                     "sort": "name", "limit": "2", "offset": "0"}


@pytest.mark.parametrize(("status", "error", "message"), [
    (404, NotFound, "no run or commit matches"), (401, Unauthorized, "--token"), (400, InvalidInput, "alpha"),
])
def test_final_answers_become_the_services_error(server: tuple[str, Script], status: int,
                                                 error: type[Exception], message: str) -> None:
    url, script = server
    script.answers = [(status, {"error": {"code": "x", "message": "no run or commit matches 'x'; alpha; "}})]
    with pytest.raises(error, match=message):
        client(url, token=None).compare("x", "y")
    assert script.requests[0][2] is None  # no token, no header
    assert len(script.requests) == 1  # never retried


def test_an_unavailable_service_is_transient_after_the_retries(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(503, {})] * 3
    with pytest.raises(Transient, match="failed 3 time"):
        client(url).compare("x", "y")


def test_a_page_that_runs_backwards_is_refused(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(200, page(["a", "b"], 2)), (200, page(["c"], 1))]
    with pytest.raises(InvalidInput, match="paged backwards"):
        client(url).compare("x", "y")


def test_the_url_must_be_http() -> None:
    with pytest.raises(InvalidInput, match="service's address"):
        CompareClient("ftp://host")
    assert CompareClient("http://h:8000/api/v1/").api == "http://h:8000/api/v1"
    assert "kw_secret" not in repr(CompareClient("http://h", "kw_secret"))


def test_not_comparable_keeps_its_kind_across_http(server: tuple[str, Script]) -> None:
    """`ci --url` tells "base and head share no environment" (not compared, exit 0) from a wrong request (exit 2)."""
    from kernelwatch.errors import NotComparable

    url, script = server
    script.answers = [(400, {"error": {"code": "not_comparable", "message": "different environments"}})]
    with pytest.raises(NotComparable, match="different environments"):
        client(url).compare("x", "y")


def test_an_address_with_credentials_is_refused_without_showing_them() -> None:
    """The one check of a service's address (kernelwatch.http_call.check_url) for --url, KERNELWATCH_URL and the
    runner's uploader alike."""
    with pytest.raises(InvalidInput, match="holds credentials") as info:
        CompareClient("http://user:hunter2@h:8000")
    assert "hunter2" not in str(info.value)
    with pytest.raises(InvalidInput, match="is not a URL") as info:
        CompareClient("http://user:hunter2@h:notaport")
    assert "hunter2" not in str(info.value)
