"""The runner's HTTP upload against a real local HTTP server with scripted answers: what is retried (refused
connections, timeouts, 502/503/504) and what is final (4xx, a 409 above all), and that artifacts go up first."""

from __future__ import annotations

import hashlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kernelwatch.errors import ConfigurationError
from runners.artifacts import ArtifactStore
from runners.uploader import HttpUploader, UploadConflict, UploadRejected, UploadUnavailable
from service.settings import load_settings
from tests import builders
from tests.fake_http import serve_in_thread

TOKEN = "kw_abcd1234_" + "s" * 32
Answer = tuple[int, dict[str, Any] | None]


@dataclass
class Script:
    """Answers by (method, path prefix), consumed in order; the last one of a list repeats."""

    answers: dict[tuple[str, str], list[Answer]]
    seen: list[tuple[str, str, bytes, str]] = field(default_factory=list)
    delay_s: float = 0.0

    def answer(self, method: str, path: str) -> Answer:
        for (m, prefix), queue in self.answers.items():
            if m == method and path.startswith(prefix):
                return queue.pop(0) if len(queue) > 1 else queue[0]
        return 404, {"error": {"code": "not_found", "message": f"no {path}"}}


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            script.seen.append((self.command, self.path, body, self.headers.get("Authorization", "")))
            if script.delay_s:
                time.sleep(script.delay_s)
            status, doc = script.answer(self.command, self.path)
            raw = json.dumps(doc).encode() if doc is not None else b""
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (the timeout test)

        do_GET = do_PUT = do_POST = do_HEAD = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def start_server(script: Script, port: int = 0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(script))
    server.daemon_threads = True
    serve_in_thread(server)
    return server


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    servers: list[ThreadingHTTPServer] = []

    def make(script: Script, port: int = 0) -> str:
        server = start_server(script, port)
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def uploader(base: str, store: ArtifactStore, sleeps: list[float], **kwargs: Any) -> HttpUploader:
    return HttpUploader(base, TOKEN, store, timeout=kwargs.pop("timeout", 5.0), retries=kwargs.pop("retries", 4),
                        backoff=0.5, sleep=sleeps.append, **kwargs)


def error(code: str, message: str = "m", **details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **({"details": details} if details else {})}}


def created(doc: dict[str, Any]) -> Answer:
    return 201, {"run_id": doc["run_id"], "created": True}


def test_503_twice_then_created_is_a_success_after_backing_off(serve: Callable[..., str], tmp_path: Path) -> None:
    doc = builders.manifest(1)
    script = Script({("POST", "/api/v1/runs"): [(503, error("unavailable")), (503, error("unavailable")),
                                                created(doc)]})
    sleeps: list[float] = []
    outcome = uploader(serve(script), ArtifactStore(tmp_path), sleeps)(doc)
    assert outcome.created and outcome.run_id == doc["run_id"]
    assert [s[0] for s in script.seen] == ["POST"] * 3
    assert sleeps == [0.5, 1.0]  # exponential
    assert all(s[3] == f"Bearer {TOKEN}" for s in script.seen)
    assert json.loads(script.seen[-1][2]) == doc


@pytest.mark.parametrize("status", [502, 504])
def test_gateway_errors_are_transient_too(serve: Callable[..., str], tmp_path: Path, status: int) -> None:
    doc = builders.manifest(1)
    script = Script({("POST", "/api/v1/runs"): [(status, None), (200, {"run_id": doc["run_id"], "created": False})]})
    outcome = uploader(serve(script), ArtifactStore(tmp_path), [])(doc)
    assert not outcome.created  # already stored with this same payload: a success
    assert len(script.seen) == 2


def test_a_400_is_never_retried(serve: Callable[..., str], tmp_path: Path) -> None:
    script = Script({("POST", "/api/v1/runs"): [(400, error("invalid_input", "format_version 7 is unknown"))]})
    sleeps: list[float] = []
    with pytest.raises(UploadRejected, match="format_version 7 is unknown") as info:
        uploader(serve(script), ArtifactStore(tmp_path), sleeps)(builders.manifest(1))
    assert info.value.status == 400 and info.value.code == "invalid_input"
    assert len(script.seen) == 1 and sleeps == []


@pytest.mark.parametrize("status", [401, 403, 413, 500])
def test_other_refusals_are_final_too(serve: Callable[..., str], tmp_path: Path, status: int) -> None:
    script = Script({("POST", "/api/v1/runs"): [(status, error("x"))]})
    with pytest.raises(UploadRejected) as info:
        uploader(serve(script), ArtifactStore(tmp_path), [])(builders.manifest(1))
    assert info.value.status == status and len(script.seen) == 1
    assert TOKEN not in str(info.value)


def test_a_409_is_a_terminal_conflict(serve: Callable[..., str], tmp_path: Path) -> None:
    doc = builders.manifest(1)
    script = Script({("POST", "/api/v1/runs"): [(409, error("conflict", "run has other samples"))]})
    with pytest.raises(UploadConflict, match="different payload under this run id") as info:
        uploader(serve(script), ArtifactStore(tmp_path), [])(doc)
    assert info.value.status == 409 and len(script.seen) == 1
    assert f"run {doc['run_id']}" in str(info.value)


def test_connection_refused_then_the_service_comes_up(serve: Callable[..., str], tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on, yet
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    doc = builders.manifest(1)
    script = Script({("POST", "/api/v1/runs"): [created(doc)]})
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:  # refused twice, then the service is there
            serve(script, port)

    up = HttpUploader(f"http://127.0.0.1:{port}", TOKEN, ArtifactStore(tmp_path), timeout=5, retries=4,
                      backoff=0.5, sleep=sleep)
    assert up(doc).created
    assert sleeps == [0.5, 1.0] and len(script.seen) == 1


def test_a_service_that_stays_down_is_unavailable_after_the_retries(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    with pytest.raises(UploadUnavailable, match="failed 4 time"):
        uploader(f"http://127.0.0.1:{port}", ArtifactStore(tmp_path), sleeps, retries=3)(builders.manifest(1))
    assert sleeps == [0.5, 1.0, 2.0]


def test_a_timeout_is_retried(serve: Callable[..., str], tmp_path: Path) -> None:
    doc = builders.manifest(1)
    script = Script({("POST", "/api/v1/runs"): [created(doc)]}, delay_s=0.5)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        script.delay_s = 0.0

    up = HttpUploader(serve(script), TOKEN, ArtifactStore(tmp_path), timeout=0.2, retries=2, backoff=0.1,
                      sleep=sleep)
    assert up(doc).created
    assert sleeps == [0.1] and len(script.seen) == 2


def _with_artifacts(store: ArtifactStore, blobs: list[bytes]) -> dict[str, Any]:
    refs = [store.put(b, "hlo", f"module_{i}.txt") for i, b in enumerate(blobs)]
    doc = builders.manifest(1)
    doc["results"][0]["artifacts"] = [{"kind": r.kind, "name": r.name, "sha256": r.sha256, "size": r.size}
                                      for r in refs]
    doc["results"].append(builders.result(name="other", artifacts=doc["results"][0]["artifacts"][:1]))
    return doc


def test_artifacts_go_up_first_and_what_the_service_has_is_skipped(serve: Callable[..., str],
                                                                   tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    have, lack = b"HloModule have\n" * 10, b"HloModule lack\n" * 10
    doc = _with_artifacts(store, [have, lack])
    have_sha, lack_sha = hashlib.sha256(have).hexdigest(), hashlib.sha256(lack).hexdigest()
    script = Script({("HEAD", f"/api/v1/artifacts/{have_sha}"): [(200, None)],
                     ("HEAD", f"/api/v1/artifacts/{lack_sha}"): [(404, None)],
                     ("PUT", f"/api/v1/artifacts/{lack_sha}"): [(503, None), (201, {"created": True})],
                     ("POST", "/api/v1/runs"): [created(doc)]})
    outcome = uploader(serve(script) + "/api/v1/", store, [])(doc)
    assert (outcome.artifacts_sent, outcome.artifacts_present) == (1, 1)
    assert [(m, p.rsplit("/", 1)[-1][:8]) for m, p, _, _ in script.seen] == [
        ("HEAD", have_sha[:8]), ("HEAD", lack_sha[:8]), ("PUT", lack_sha[:8]), ("PUT", lack_sha[:8]),
        ("POST", "runs")]
    assert script.seen[2][2] == lack  # the raw bytes, not the stored gzip


def test_missing_artifacts_named_by_the_service_are_sent_again_once(serve: Callable[..., str],
                                                                    tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    doc = _with_artifacts(store, [b"gone since\n"])
    sha = doc["results"][0]["artifacts"][0]["sha256"]
    script = Script({("HEAD", "/api/v1/artifacts/"): [(200, None)],
                     ("PUT", "/api/v1/artifacts/"): [(201, None)],
                     ("POST", "/api/v1/runs"): [(400, error("invalid_input", missing_artifacts=[sha])),
                                                created(doc)]})
    assert uploader(serve(script), store, [])(doc).created
    assert [m for m, *_ in script.seen] == ["HEAD", "POST", "PUT", "POST"]


def test_an_artifact_missing_locally_is_a_clear_refusal(serve: Callable[..., str], tmp_path: Path) -> None:
    doc = _with_artifacts(ArtifactStore(tmp_path / "elsewhere"), [b"not in this store"])
    script = Script({("HEAD", "/api/v1/artifacts/"): [(404, None)]})
    with pytest.raises(UploadRejected, match="cannot upload artifact"):
        uploader(serve(script), ArtifactStore(tmp_path / "here"), [])(doc)


def test_the_token_stays_out_of_reprs(tmp_path: Path) -> None:
    up = HttpUploader("http://kw:8000", TOKEN, ArtifactStore(tmp_path))
    assert TOKEN not in repr(up) and up.api == "http://kw:8000/api/v1"
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_URL": "http://kw:8000",
                              "KERNELWATCH_TOKEN": TOKEN})
    assert settings.uploads_over_http and TOKEN not in repr(settings)


@pytest.mark.parametrize("env, message", [
    ({"KERNELWATCH_URL": "http://kw:8000"}, "KERNELWATCH_TOKEN"),
    ({"KERNELWATCH_TOKEN": TOKEN}, "KERNELWATCH_URL"),
    ({"KERNELWATCH_URL": "kw:8000", "KERNELWATCH_TOKEN": TOKEN}, "service's address"),
    # a password in the address was echoed in every error and read as part of the host name
    ({"KERNELWATCH_URL": "http://user:hunter2@kw:8000", "KERNELWATCH_TOKEN": TOKEN}, "holds credentials"),
])
def test_half_an_upload_configuration_says_what_to_set(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        load_settings({"KERNELWATCH_HOME": str(tmp_path), **env})
    assert TOKEN not in str(info.value) and "hunter2" not in str(info.value)
    assert not load_settings({"KERNELWATCH_HOME": str(tmp_path)}).uploads_over_http


def test_a_run_suite_task_uploads_over_http_and_keeps_a_run_already_stored(
        serve: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import runners.worker
    from service.task_names import RUN_SUITE_TASK
    from service.tasks import make_celery

    doc = builders.manifest(1)
    script = Script({("POST", "/api/v1/runs"): [(409, error("conflict", "other samples"))]})
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_URL": serve(script),
                              "KERNELWATCH_TOKEN": TOKEN})

    def execute(task: Any, task_id: str, home: Path, upload: Callable[[dict[str, Any]], object]) -> list[str]:
        upload(doc)  # a redelivered task whose first delivery stored its own measurement: not an error
        return [doc["run_id"]]

    monkeypatch.setattr(runners.worker, "execute", execute)
    result = make_celery(settings).tasks[RUN_SUITE_TASK].apply(kwargs={"repo": "r", "commit": "c"}, task_id="t-1")
    assert result.get() == [doc["run_id"]]
    assert [(m, p) for m, p, _, _ in script.seen] == [("POST", "/api/v1/runs")]
    assert not (tmp_path / "kernelwatch.db").exists()  # no database on the runner's side
