"""Decompression with a hard cap on what comes out: the one way uploaded or stored bytes are expanded.

A decompression bomb (a megabyte of gzip that expands to a gigabyte) is refused once its output passes the cap,
having produced at most ``limit + 1`` bytes: input is fed a slice at a time and the decompressor is never asked
for more than the room left under the cap, so neither the compressed nor the expanded side is held whole beyond
what the caller allowed. Gzip (one member or several, as ``cat a.gz b.gz`` makes) and zlib streams are read;
anything damaged, truncated or followed by garbage is a :class:`DecompressionError` naming its source.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, Literal

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 20  # compressed bytes fed to the decompressor per call
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS

Format = Literal["gzip", "zlib"]


class DecompressionError(ValueError):
    """Compressed data that is damaged, truncated, or not in the format it claims to be."""


class ExpansionError(DecompressionError):
    """Compressed data that expands past its cap: refused with at most ``limit + 1`` bytes ever produced."""

    def __init__(self, source: str, limit: int) -> None:
        super().__init__(f"{source}: expands past {limit} bytes; refused without expanding it further")
        self.source = source
        self.limit = limit


def is_gzip(data: bytes) -> bool:
    return data[:2] == GZIP_MAGIC


def _slices(data: bytes, size: int = CHUNK) -> Iterator[bytes]:
    view = memoryview(data)
    for start in range(0, len(view), size):
        yield bytes(view[start:start + size])


def inflate_bounded(chunks: Iterable[bytes], limit: int, source: str = "<bytes>", fmt: Format = "gzip") -> bytes:
    """The expansion of the compressed ``chunks``, refused with :class:`ExpansionError` past ``limit`` bytes.

    Gzip input may hold several members, one after another (each is expanded in turn, under the same cap) and
    may end in NUL padding; zlib input is one stream."""
    if limit < 0:
        raise ValueError(f"limit must be at least 0, got {limit}")
    wbits = _GZIP_WBITS if fmt == "gzip" else _ZLIB_WBITS
    out = io.BytesIO()  # getvalue() hands over its buffer: the expansion is not copied at the end
    decompressor = zlib.decompressobj(wbits)
    started = False  # a member (or the zlib stream) has begun: its end must be seen
    padding = False  # after a gzip member, only NUL bytes have followed
    try:
        for chunk in chunks:
            pending = chunk
            while pending:
                if decompressor.eof:
                    # What follows a finished member: another member, NUL padding, or garbage.
                    if fmt == "zlib" or padding or not pending.startswith(GZIP_MAGIC[: len(pending)]):
                        if pending.strip(b"\0"):
                            raise DecompressionError(f"{source}: trailing data after the compressed stream")
                        padding = True
                        break
                    decompressor = zlib.decompressobj(wbits)
                started = True
                # Never ask for more than one byte past the room left: a bomb produces at most limit + 1 bytes.
                # A full answer (as long as asked) is the only case in which output may still be pending, and it
                # always passes the limit, so nothing is left buffered inside the decompressor unseen.
                room = limit + 1 - out.tell()
                out.write(decompressor.decompress(pending, room))
                if out.tell() > limit:
                    raise ExpansionError(source, limit)
                pending = decompressor.unconsumed_tail or decompressor.unused_data
    except zlib.error as exc:
        raise DecompressionError(f"{source}: damaged {fmt} data: {exc}") from None
    if not started:
        raise DecompressionError(f"{source}: empty input, not {fmt} data")
    if not decompressor.eof:
        raise DecompressionError(f"{source}: truncated {fmt} data (the stream ends before its last block)")
    return out.getvalue()


def decompress_bounded(data: bytes, limit: int, source: str = "<bytes>", fmt: Format | None = None) -> bytes:
    """``data`` (gzip, or zlib; told by its first bytes when ``fmt`` is None) expanded, at most ``limit`` bytes."""
    if fmt is None:
        fmt = "gzip" if is_gzip(data) else "zlib"
    return inflate_bounded(_slices(data), limit, source, fmt)


def read_chunks(stream: BinaryIO, size: int = CHUNK) -> Iterator[bytes]:
    while chunk := stream.read(size):
        yield chunk


def gunzip_file_bounded(path: Path, limit: int, source: str | None = None) -> bytes:
    """A gzip file's expansion, read a slice at a time, refused past ``limit`` bytes."""
    with path.open("rb") as handle:
        return inflate_bounded(read_chunks(handle), limit, source or str(path), "gzip")
