"""Decompression bombs built without ever holding their expansion: one deflate block sequence for a slice of
zeros, repeated. A gigabyte of zeros comes out as about a megabyte of valid gzip, in half a second."""

from __future__ import annotations

import struct
import zlib

SLICE = 1 << 20


def gzip_bomb(expanded: int) -> bytes:
    """A valid one-member gzip file that expands to ``expanded`` zero bytes (a multiple of 1 MiB)."""
    if expanded % SLICE:
        raise ValueError(f"expanded must be a multiple of {SLICE}")
    zeros = bytes(SLICE)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    # After a full flush the compressor starts afresh, so this block sequence means "a slice of zeros" wherever
    # it is placed: repeating it repeats the slice.
    block = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    end = deflate.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(expanded // SLICE):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + block * (expanded // SLICE) + end + struct.pack("<II", crc, expanded & 0xFFFFFFFF)
