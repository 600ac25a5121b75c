"""The real thing: `kernelwatch serve` in its own process, a runner's upload over HTTP with urllib (artifacts by
digest, then the manifest), read back over HTTP; on both databases."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from service.pipeline.tokens import create_token
from service.store.db import unit_of_work
from tests import builders
from tests.processes import clean_env, start_web


@pytest.fixture
def server(sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> Iterator[str]:
    """`kernelwatch serve` in its own process over the migrated database; yields the API's root URL."""
    with start_web(clean_env(tmp_path, KERNELWATCH_DATABASE_URL=database_url), tmp_path) as web:
        yield f"{web.url}/api/v1"


def call(method: str, url: str, token: str | None = None, body: bytes | None = None,
         content_type: str = "application/json") -> tuple[int, Any]:
    request = urllib.request.Request(url, data=body, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw, status = response.read(), response.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    return status, json.loads(raw) if raw and method != "HEAD" else raw


def test_a_runner_submits_over_http(server: str, sessions: sessionmaker[Session]) -> None:
    with unit_of_work(sessions) as s:
        token = create_token(s, "runner-cpu", ["submit"])[1]
    blobs = {"module_0.txt": b"HloModule jit_matmul\nENTRY main {}\n" * 20, "fusion.o": bytes(range(256)) * 8}
    doc = builders.manifest(1)
    doc["results"][0]["artifacts"] = [{"kind": "hlo", "name": name, "sha256": hashlib.sha256(b).hexdigest(),
                                       "size": len(b)} for name, b in blobs.items()]
    status, body = call("POST", f"{server}/runs", token, json.dumps(doc).encode())
    assert status == 400 and len(body["error"]["details"]["missing_artifacts"]) == 2

    for data in blobs.values():
        digest = hashlib.sha256(data).hexdigest()
        assert call("HEAD", f"{server}/artifacts/{digest}")[0] == 404  # what a runner asks before uploading
        assert call("PUT", f"{server}/artifacts/{digest}", token, data, "application/octet-stream")[0] == 201
        assert call("HEAD", f"{server}/artifacts/{digest}")[0] == 200
    assert call("PUT", f"{server}/artifacts/{'0' * 64}", None, b"x", "application/octet-stream")[0] == 401

    status, body = call("POST", f"{server}/runs", token, json.dumps(doc).encode())
    assert status == 201 and body["run_id"] == doc["run_id"]
    assert call("POST", f"{server}/runs", token, json.dumps(doc).encode())[0] == 200  # a retry is harmless
    status, results = call("GET", f"{server}/runs/{doc['run_id']}/results")
    assert status == 200 and results["results"][0]["samples"] == doc["results"][0]["samples"]
    assert len(results["results"][0]["artifacts"]) == 2
    with urllib.request.urlopen(f"{server}/artifacts/{hashlib.sha256(blobs['fusion.o']).hexdigest()}") as r:
        assert r.read() == blobs["fusion.o"]
    doc["status"] = "partial"
    status, body = call("POST", f"{server}/runs", token, json.dumps(doc).encode())
    assert status == 409 and body["error"]["code"] == "conflict"
    status, body = call("GET", f"{server}/nowhere")
    assert status == 404 and body["error"]["code"] == "not_found"
