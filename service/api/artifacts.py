"""Artifacts by content address: PUT to upload (digest checked on arrival, size-capped, idempotent), HEAD to ask
whether the service has them (a runner skips those), GET to download."""

from __future__ import annotations

import errno
import hashlib
import os
import re

from flask import Response, request

from kernelwatch.errors import InvalidInput, NotFound, Transient
from runners.artifacts import ArtifactError
from service.api.auth import readable, requires
from service.api.blueprint import bp, context, read_body, reply

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # the store's disk, quota or file-size limit
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _digest(sha256: str) -> str:
    if not _SHA256.match(sha256):
        raise InvalidInput(f"{sha256[:80]!r} is not a sha256 digest (64 lowercase hex digits)")
    return sha256


@bp.put("/artifacts/<sha256>")
@requires("submit")
def put_artifact(sha256: str) -> Response:
    digest = _digest(sha256)
    store = context().artifacts
    if store.has(digest) and store.intact(digest):
        # Write-once: the stored bytes already match this digest. Drain nothing more than needed. (A damaged file
        # under it is replaced by these bytes below: a re-upload is how a store is repaired.)
        return reply({"sha256": digest, "created": False}, 200)
    data = read_body(store.max_bytes)
    actual = hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise InvalidInput(f"the body's sha256 is {actual}, not {digest}: upload corrupted or misaddressed")
    try:
        store.put(data, kind="upload", name=digest)
    except OSError as exc:
        if exc.errno in _FULL:
            # Nothing was kept (the store writes a temporary file and renames it whole). A 503 the runner's
            # uploader retries with backoff, so the run lands once space is freed; a 500 would be given up.
            raise Transient(f"the artifact store is full ({os.strerror(exc.errno or 0)}); retry later") from None
        raise
    return reply({"sha256": digest, "size": len(data), "created": True}, 201,
                 {"Location": f"{request.script_root}{request.path}"})


@bp.route("/artifacts/<sha256>", methods=["GET", "HEAD"])
@readable
def get_artifact(sha256: str) -> Response:
    digest = _digest(sha256)
    store = context().artifacts
    if not store.has(digest):
        raise NotFound(f"no artifact {digest}")
    if request.method == "HEAD":
        # The uploader's question "do you have it?": a damaged file is not having it, so the runner sends the
        # bytes again and the PUT repairs the store (the file is read and hashed: one artifact, once an upload).
        if not store.intact(digest):
            raise NotFound(f"artifact {digest} is damaged here; upload it again")
        return Response(status=200, headers={"ETag": f'"{digest}"'})
    try:
        data = store.get(digest)
    except ArtifactError as exc:  # damaged on disk, or expands past the cap: the server's problem, said plainly
        raise NotFound(f"artifact {digest} cannot be read back: {exc}") from None
    # Named by its digest only (never by a name a runner gave it, which could carry a path or a header break),
    # and never sniffed into something a browser would render.
    return Response(data, mimetype="application/octet-stream",
                    headers={"ETag": f'"{digest}"', "Content-Disposition": f"attachment; filename={digest}",
                             "X-Content-Type-Options": "nosniff"})
