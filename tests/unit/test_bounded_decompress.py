"""Bounded decompression: round trips under the cap, bombs refused while they expand (memory and time bounded,
checked in a fresh process), damaged, truncated and trailing input refused, and every caller going through it."""

from __future__ import annotations

import gzip
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest

from runners.artifacts import ArtifactError, ArtifactStore
from runners.bounded_decompress import (
    DecompressionError,
    ExpansionError,
    decompress_bounded,
    gunzip_file_bounded,
    inflate_bounded,
)
from runners.parsers.by_kind import ParseFailure, parse
from tests.bombs import gzip_bomb

REPO_ROOT = Path(__file__).resolve().parents[2]
HLO = (b"HloModule m, entry_computation_layout={()->f32[]}\n\n"
       b"ENTRY %main () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n")


@pytest.mark.parametrize("data", [b"", b"x", b"HloModule m\n" * 10_000, bytes(range(256)) * 5000])
def test_gzip_and_zlib_round_trip_under_the_cap(data: bytes) -> None:
    assert decompress_bounded(gzip.compress(data), len(data)) == data
    assert decompress_bounded(zlib.compress(data), len(data)) == data
    assert decompress_bounded(zlib.compress(data), len(data), fmt="zlib") == data


def test_one_byte_over_the_cap_is_refused_naming_source_and_cap() -> None:
    data = b"a" * 1000
    with pytest.raises(ExpansionError, match=r"^trace\.gz: expands past 999 bytes") as caught:
        decompress_bounded(gzip.compress(data), 999, source="trace.gz")
    assert caught.value.limit == 999 and isinstance(caught.value, ValueError)
    with pytest.raises(ExpansionError, match="expands past 0 bytes"):
        decompress_bounded(gzip.compress(b"a"), 0)
    assert decompress_bounded(gzip.compress(b""), 0) == b""


def test_members_are_concatenated_under_one_cap_and_nul_padding_is_allowed() -> None:
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress_bounded(two, 100) == b"first second" == gzip.decompress(two)
    assert decompress_bounded(two + bytes(512), 100) == b"first second"
    with pytest.raises(ExpansionError):
        decompress_bounded(two, 11)  # each member is under the cap, together they are not


@pytest.mark.parametrize(("data", "words"), [
    (gzip.compress(b"x" * 5000, mtime=0)[:-20], "truncated"),
    (gzip.compress(b"x" * 5000, mtime=0)[:12], "truncated"),
    (b"\x1f\x8b\x08\x00" + b"\xff" * 50, "damaged"),
    (gzip.compress(b"payload", mtime=0) + b"garbage", "trailing data"),
    (zlib.compress(b"payload") + b"garbage", "trailing data"),
    (b"", "empty input"),
    (b"plain text, not compressed", "damaged"),
])
def test_damaged_input_is_a_typed_error(data: bytes, words: str) -> None:
    with pytest.raises(DecompressionError, match=words):
        decompress_bounded(data, 1 << 20, source="hostile.gz")


def test_a_gzip_whose_checksum_lies_is_damaged() -> None:
    data = bytearray(gzip.compress(b"payload"))
    data[-8] ^= 0xFF  # the CRC32
    with pytest.raises(DecompressionError, match="damaged"):
        decompress_bounded(bytes(data), 100)


def test_input_split_anywhere_gives_the_same_answer() -> None:
    data = b"".join(gzip.compress(bytes([i]) * (i * 37)) for i in range(1, 20))
    expected = gzip.decompress(data)
    for size in (1, 2, 3, 7, 100, len(data)):
        chunks = (data[i:i + size] for i in range(0, len(data), size))
        assert inflate_bounded(chunks, len(expected)) == expected
        with pytest.raises(ExpansionError):
            inflate_bounded((data[i:i + size] for i in range(0, len(data), size)), len(expected) - 1)


def test_a_gigabyte_bomb_is_refused_fast_and_in_bounded_memory() -> None:
    """1 GiB of zeros in ~1 MiB of gzip, expanded in a fresh process against a 16 MiB cap: refused within
    seconds, the process's peak memory far from the gigabyte (the interpreter, the bomb and the cap)."""
    script = textwrap.dedent("""
        import resource, sys, time
        from runners.bounded_decompress import ExpansionError, decompress_bounded
        from tests.bombs import gzip_bomb
        bomb = gzip_bomb(1 << 30)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.monotonic()
        try:
            decompress_bounded(bomb, 16 << 20, source="bomb.xplane.pb.gz")
        except ExpansionError as exc:
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print(len(bomb), before, after, time.monotonic() - start, exc, sep="|")
        else:
            sys.exit("the bomb was expanded")
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    size, before, after, seconds, message = proc.stdout.strip().split("|")
    assert int(size) < 2 << 20  # the bomb really is small...
    assert "bomb.xplane.pb.gz: expands past 16777216 bytes" in message  # ...and expands past the cap
    grown_kib = int(after) - int(before)  # ru_maxrss is in KiB on Linux
    assert grown_kib < 64 * 1024, f"peak memory grew by {grown_kib} KiB while refusing a 16 MiB cap"
    assert float(seconds) < 5


def test_the_artifact_store_reads_through_the_cap(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, max_bytes=1 << 20)
    ref = store.put(b"kept" * 100, kind="hlo", name="m.txt")
    assert store.get(ref.sha256) == b"kept" * 100
    # A stored file that expands past the cap (placed by hand: put() never writes one) is refused, not expanded.
    bomb_digest = "ab" * 32
    path = store.path_for(bomb_digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip_bomb(64 << 20))
    with pytest.raises(ArtifactError, match=f"artifact {bomb_digest}: expands past {1 << 20} bytes"):
        store.get(bomb_digest)
    assert gunzip_file_bounded(store.path_for(ref.sha256), 400) == b"kept" * 100


def test_the_parsers_read_compressed_artifacts_through_the_cap() -> None:
    plain = parse("hlo", HLO, "module.txt")
    assert parse("hlo", gzip.compress(HLO), "module.txt.gz") == plain
    with pytest.raises(ParseFailure, match=r"^bomb\.xplane\.pb\.gz: expands past 1048576 bytes"):
        parse("xplane", gzip_bomb(32 << 20), "bomb.xplane.pb.gz", max_bytes=1 << 20)
    with pytest.raises(ParseFailure, match=r"module\.txt\.gz: truncated gzip"):
        parse("hlo", gzip.compress(HLO)[:-30], "module.txt.gz")
