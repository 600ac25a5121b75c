"""A runner's upload to the service over its HTTP API: artifacts by content address, then the manifest.

Stdlib only (urllib) and no service imports: a runner host needs the runner package, not the service's database
code. For each artifact the manifest names, ``HEAD /api/v1/artifacts/<sha256>`` asks whether the service has it
and ``PUT`` sends the raw bytes when it does not; then ``POST /api/v1/runs`` sends the manifest. Every request is
safe to repeat (artifacts are write-once by digest, runs idempotent by run id), so a transient failure
(connection refused or reset, a timeout, 502/503/504) is retried with exponential backoff. Anything else is
final: a 4xx is the runner's fault and the same request would fail again, a 409 means another payload is already
stored under this run id.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelwatch.http_call import Answer, ResponseTooLarge, check_token, check_url, foreign_body, send
from runners.artifacts import ArtifactError, ArtifactStore

log = logging.getLogger(__name__)

TRANSIENT_STATUSES = frozenset({502, 503, 504})
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # hashlib.sha256(b"")
MAX_BACKOFF_S = 60.0


class UploadError(Exception):
    """An upload that did not happen; ``status`` is the HTTP status when the service answered."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.details = details or {}


class UploadRejected(UploadError):
    """The service refused the request (4xx, or a 500): sending it again would not help."""


class UploadConflict(UploadRejected):
    """409: the service holds another payload under this run id. The run that is stored stays as it is."""


class UploadUnavailable(UploadError):
    """The service could not be reached, or said it was unavailable, on every try: worth trying again later."""


@dataclass(frozen=True)
class UploadOutcome:
    run_id: str
    created: bool  # False: the service already held this run with this same payload
    artifacts_sent: int
    artifacts_present: int  # the service had them already


def referenced_artifacts(manifest: dict[str, Any]) -> list[str]:
    """The distinct digests a manifest's results name, in order of first appearance."""
    seen: dict[str, None] = {}
    for result in manifest.get("results", []):
        for artifact in result.get("artifacts", []) or []:
            seen.setdefault(str(artifact["sha256"]), None)
    return list(seen)


class HttpUploader:
    """``upload(manifest)`` for runners/worker.py's ``execute``: sends one manifest and its artifacts."""

    def __init__(self, base_url: str, token: str, artifacts: ArtifactStore, timeout: float = 60.0,
                 retries: int = 5, backoff: float = 1.0, sleep: Callable[[float], None] = time.sleep) -> None:
        """``base_url`` is the service's root (``http://host:8000``) or its API root (``.../api/v1``);
        ``retries`` is how many times a transient failure is tried again, waiting ``backoff * 2**n`` seconds."""
        root = base_url.rstrip("/")
        try:
            check_url(root, "KERNELWATCH_URL")
            check_token(token, "KERNELWATCH_TOKEN")
        except ValueError as exc:
            raise UploadRejected(str(exc)) from None
        self.api = root if root.endswith("/api/v1") else f"{root}/api/v1"
        self._token = token
        self.artifacts = artifacts
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._sleep = sleep

    def __repr__(self) -> str:  # never the token: an uploader ends up in logs and tracebacks
        return f"HttpUploader({self.api!r}, retries={self.retries}, timeout={self.timeout})"

    def __call__(self, manifest: dict[str, Any]) -> UploadOutcome:
        digests = referenced_artifacts(manifest)
        sent = present = 0
        for digest in digests:
            if self._send_artifact(digest):
                sent += 1
            else:
                present += 1
        body = json.dumps(manifest).encode()
        run_id = str(manifest.get("run_id", "?"))
        response = self._request("POST", "/runs", body, "application/json")
        if response.status == 400:
            missing = _error_of(response).get("details", {}).get("missing_artifacts")
            if missing and set(missing) <= set(digests):
                # Uploaded a moment ago and gone now (the service's store was cleaned between our HEAD and the
                # POST): send those once more, then the manifest once more.
                for digest in missing:
                    self._send_artifact(digest, known_missing=True)
                response = self._request("POST", "/runs", body, "application/json")
        if response.status in (200, 201):
            return UploadOutcome(run_id=run_id, created=response.status == 201, artifacts_sent=sent,
                                 artifacts_present=present)
        raise _rejection(response, f"run {run_id}")

    def check_credentials(self) -> None:
        """UploadRejected (or UploadUnavailable) now, before a suite is measured, where the token may not submit:
        a wrong or under-scoped token was found only after the measurements it then threw away. The check is the
        one write that changes nothing a reader sees: the empty artifact (sha256 of no bytes), stored once and
        never named by any run."""
        put = self._request("PUT", f"/artifacts/{EMPTY_SHA256}", b"", "application/octet-stream")
        if put.status not in (200, 201):
            raise _rejection(put, "the credentials check")

    def enqueue(self, fields: dict[str, Any]) -> dict[str, Any]:
        """A suite run queued at the service for its runners (POST /runs/enqueue): its answer, ``task_id`` and
        ``queue``. UploadRejected where the service refuses it, UploadUnavailable where it has no runner queue (the
        embedded form answers 503) or cannot be reached."""
        # One retry, not the upload's five: a service of the embedded form answers 503 (no runner queue) every
        # time, and a person waiting at a prompt is told at once.
        answer = self._request("POST", "/runs/enqueue", json.dumps(fields).encode(), "application/json", retries=1)
        if answer.status != 202:
            raise _rejection(answer, "the enqueue")
        try:
            queued = json.loads(answer.body)
            if isinstance(queued, dict) and isinstance(queued.get("task_id"), str) and isinstance(
                    queued.get("queue"), str):
                return queued
        except ValueError:
            pass
        raise UploadRejected(f"{self.api}/runs/enqueue answered no task id: this is no KernelWatch answer")

    def stored_first_commits(self, name: str) -> list[str]:
        """The root commits the service holds for the repository named ``name`` (none where it holds no such
        repository, or none recorded): read before a suite is measured, since a run of another project under
        that name is refused only when submitted (service/pipeline/ingest.py)."""
        answer = self._request("GET", "/repositories")
        if answer.status != 200:
            raise _rejection(answer, "the repository check")
        try:
            listed = json.loads(answer.body)["repositories"]
            found = next((r for r in listed if isinstance(r, dict) and r.get("name") == name), None)
            roots = [] if found is None else found.get("first_commits") or []
        except (ValueError, KeyError, TypeError):
            raise UploadRejected(f"{self.api}/repositories answered no repository list") from None
        if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
            raise UploadRejected(f"{self.api}/repositories answered first commits that are no list of shas")
        return roots

    def _send_artifact(self, digest: str, known_missing: bool = False) -> bool:
        """True when the bytes were sent, False when the service had them already."""
        if not known_missing:
            head = self._request("HEAD", f"/artifacts/{digest}")
            if head.status == 200:
                return False
            if head.status != 404:
                raise _rejection(head, f"artifact {digest}")
        try:
            data = self.artifacts.get(digest)
        except ArtifactError as exc:
            raise UploadRejected(f"cannot upload artifact {digest}: {exc}") from None
        put = self._request("PUT", f"/artifacts/{digest}", data, "application/octet-stream")
        if put.status not in (200, 201):
            raise _rejection(put, f"artifact {digest}")
        return True

    def _request(self, method: str, path: str, body: bytes | None = None,
                 content_type: str | None = None, retries: int | None = None) -> Answer:
        """One request, tried again on transient failures only (``retries`` times, the uploader's by default); any
        final HTTP answer is returned as is."""
        retries = self.retries if retries is None else retries
        url = f"{self.api}{path}"
        attempt = 0
        while True:
            try:
                response = self._once(method, url, body, content_type)
                if response.redirected:
                    raise UploadRejected(f"{method} {url} {response.redirect_text()} (KERNELWATCH_URL)",
                                         response.status)
                if response.status not in TRANSIENT_STATUSES:
                    return response
                reason = f"HTTP {response.status}: {_error_of(response).get('message', '')}".rstrip(": ")
            except ResponseTooLarge as exc:
                raise UploadRejected(f"{method} {url}: {exc}; this is no KernelWatch answer") from None
            except (ConnectionError, TimeoutError, http.client.HTTPException) as exc:
                reason = f"{type(exc).__name__}: {exc}"
            except urllib.error.URLError as exc:
                if not isinstance(exc.reason, (ConnectionError, TimeoutError, OSError)):
                    raise UploadRejected(f"{method} {url}: {exc.reason}") from None
                reason = f"{type(exc.reason).__name__}: {exc.reason}"
            if attempt >= retries:
                raise UploadUnavailable(f"{method} {url} failed {attempt + 1} time(s), last: {reason}; the service "
                                        "is unreachable or unavailable, try again later")
            delay = min(MAX_BACKOFF_S, self.backoff * 2 ** attempt)
            log.warning("%s %s: %s; try %d of %d in %.1f s", method, url, reason, attempt + 2, retries + 1,
                        delay)
            self._sleep(delay)
            attempt += 1

    def _once(self, method: str, url: str, body: bytes | None, content_type: str | None) -> Answer:
        request = urllib.request.Request(url, data=body, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        request.add_header("Accept", "application/json")
        if content_type:
            request.add_header("Content-Type", content_type)
        return send(request, self.timeout)


def _error_of(response: Answer) -> dict[str, Any]:
    """The ``error`` object of the service's error shape, or an empty one when the body is something else."""
    try:
        body = json.loads(response.body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested past Python's stack
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def _rejection(response: Answer, what: str) -> UploadRejected:
    error = _error_of(response)
    message = error.get("message") or foreign_body(response.body)
    code = error.get("code")
    details = error.get("details") if isinstance(error.get("details"), dict) else None
    if response.status == 409 and code == "another_project":  # not this run id stored already: stored nowhere
        return UploadRejected(f"{what}: {message}", 409, code, details)
    if response.status == 409:
        return UploadConflict(f"{what}: the service already holds a different payload under this run id; the stored "
                              f"run is kept ({message})", 409, code, details)
    if response.status in (401, 403):
        return UploadRejected(f"{what}: {response.status} {code}: {message}; check KERNELWATCH_TOKEN (a token with "
                              "scope submit)", response.status, code, details)
    return UploadRejected(f"{what}: {response.status} {code or ''}: {message}".replace("  ", " "), response.status,
                          code, details)
