"""A content-addressed, write-once artifact store on the filesystem: raw captures (traces, HLO dumps, object
files, disassembly) kept gzip-compressed under the sha256 of their uncompressed bytes.

Runners write into one (their outbox) and the service keeps one (under KERNELWATCH_HOME); the same class serves
both. Writes are atomic (a temporary file renamed into place), so a crash leaves either the whole artifact or
nothing; a second write of the same content is a no-op. Reads stream through a size cap, so a compressed bomb
is refused without ever being expanded in memory.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from runners.bounded_decompress import DecompressionError, ExpansionError, gunzip_file_bounded

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
INCOMING_PREFIX = ".incoming-"  # a write in flight; one a killed process left behind is swept (sweep_incoming)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ArtifactError(ValueError):
    pass


class ArtifactMissing(ArtifactError):
    """The store holds no file for this digest: never stored here, or removed (retention prunes old ones)."""


class ArtifactDamaged(ArtifactError):
    """The file under this digest does not hold its bytes (truncated, corrupted on disk): the same content put
    again replaces it (``put``)."""


@dataclass(frozen=True)
class ArtifactRef:
    kind: str  # "xplane", "hlo", "x86-obj", "sass", "llo", "cost"...
    name: str  # what it was called where it was captured (a dump file's name), for people
    sha256: str
    size: int  # uncompressed bytes


class ArtifactStore:
    def __init__(self, root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes

    def path_for(self, sha256: str) -> Path:
        if not _SHA256.match(sha256):
            raise ArtifactError(f"{sha256!r} is not a sha256 hex digest")
        return self.root / sha256[:2] / f"{sha256}.gz"

    def has(self, sha256: str) -> bool:
        return self.path_for(sha256).is_file()

    def put(self, data: bytes, kind: str, name: str) -> ArtifactRef:
        if len(data) > self.max_bytes:
            raise ArtifactError(f"artifact {name} is {len(data)} bytes, over the limit of {self.max_bytes}")
        digest = hashlib.sha256(data).hexdigest()
        path = self.path_for(digest)
        if not path.is_file() or not self.intact(digest):  # write-once, but a damaged file is no write at all
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=INCOMING_PREFIX)
            try:
                with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6,
                                                               mtime=0) as gz:
                    gz.write(data)
                os.replace(tmp, path)  # atomic: readers see all of it or nothing
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        return ArtifactRef(kind=kind, name=name, sha256=digest, size=len(data))

    def get(self, sha256: str, max_bytes: int | None = None) -> bytes:
        """The artifact's bytes, verified against its digest; refuses to expand past ``max_bytes``."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        path = self.path_for(sha256)
        if not path.is_file():
            raise ArtifactMissing(f"no artifact {sha256}")
        try:
            data = gunzip_file_bounded(path, limit, source=f"artifact {sha256}")
        except ExpansionError as exc:
            raise ArtifactError(str(exc)) from None
        except (DecompressionError, OSError) as exc:
            raise ArtifactDamaged(f"artifact {sha256} is damaged: {exc}") from None
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ArtifactDamaged(f"artifact {sha256} does not match its digest")
        return data

    def size(self, sha256: str) -> int | None:
        """The stored artifact's size in bytes from its gzip trailer (ISIZE: the size modulo 2^32, exact under the
        store's cap), without reading it; None where there is no file or it is too short to hold one."""
        try:
            with self.path_for(sha256).open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                if handle.tell() < 18:  # a gzip member's header and trailer
                    return None
                handle.seek(-4, os.SEEK_END)
                return int.from_bytes(handle.read(4), "little")
        except FileNotFoundError:
            return None

    def intact(self, sha256: str) -> bool:
        """Whether the file under this digest holds its bytes (read whole, through the store's cap, and hashed: for
        an uploader's question and the rare write of content already stored, not for every lookup). One that
        expands past the cap counts as intact: the cap is a reader's limit (it may have been raised since), not
        damage."""
        try:
            self.get(sha256)
        except ArtifactDamaged:
            return False
        except ArtifactError:
            return self.has(sha256)
        return True

    def remove(self, sha256: str) -> int | None:
        """Delete one artifact's file; returns the bytes it took on disk, None when it was not there (a removal
        repeated after a crash is not an error)."""
        path = self.path_for(sha256)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return None
        return size

    def sweep_incoming(self, older_than_s: float, now: float | None = None) -> tuple[int, int]:
        """Delete the temporary files of writes that never finished (a process killed mid-write: its ``finally``
        never ran) and are older than ``older_than_s``; a write in flight is seconds old and is left alone.
        Returns (files, bytes) removed."""
        cutoff = (time.time() if now is None else now) - older_than_s
        files = size = 0
        for path in self.root.glob(f"??/{INCOMING_PREFIX}*"):
            try:
                stat = path.stat()
                if stat.st_mtime >= cutoff:
                    continue
                path.unlink()
            except FileNotFoundError:
                continue  # finished (renamed into place) or swept by another process meanwhile
            files += 1
            size += stat.st_size
        return files, size

    def copy_to(self, other: ArtifactStore, sha256: str) -> None:
        """Move one artifact between stores without expanding it (e.g. a runner's outbox into the service's)."""
        target = other.path_for(sha256)
        if target.is_file():
            return
        self.get(sha256, max_bytes=other.max_bytes)  # verify before trusting it
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=INCOMING_PREFIX)
        try:
            with os.fdopen(fd, "wb") as out, self.path_for(sha256).open("rb") as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
