import gzip
import hashlib
from pathlib import Path

import pytest

from runners.artifacts import ArtifactError, ArtifactStore


def test_put_is_content_addressed_write_once_and_round_trips(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    ref = store.put(b"HloModule m\n" * 100, kind="hlo", name="module_0001.txt")
    assert ref.sha256 == hashlib.sha256(b"HloModule m\n" * 100).hexdigest() and ref.size == 1200
    first_mtime = store.path_for(ref.sha256).stat().st_mtime_ns
    again = store.put(b"HloModule m\n" * 100, kind="hlo", name="other-name.txt")
    assert again.sha256 == ref.sha256 and store.path_for(ref.sha256).stat().st_mtime_ns == first_mtime
    assert store.get(ref.sha256) == b"HloModule m\n" * 100
    assert not list(tmp_path.rglob(".incoming-*"))


def test_limits_on_write_and_on_expansion(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, max_bytes=1000)
    with pytest.raises(ArtifactError, match="over the limit"):
        store.put(b"x" * 1001, kind="hlo", name="big")
    # A bomb: 50 MB of zeros compress to ~50 KB; placed by hand, it must be refused while streaming.
    bomb = b"\0" * 50_000_000
    digest = hashlib.sha256(bomb).hexdigest()
    path = store.path_for(digest)
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(bomb))
    with pytest.raises(ArtifactError, match="expands past 1000"):
        store.get(digest)


def test_damaged_or_substituted_content_is_refused(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    ref = store.put(b"real", kind="hlo", name="a")
    store.path_for(ref.sha256).write_bytes(gzip.compress(b"fake"))
    with pytest.raises(ArtifactError, match="does not match"):
        store.get(ref.sha256)
    store.path_for(ref.sha256).write_bytes(b"not gzip at all")
    with pytest.raises(ArtifactError, match="damaged"):
        store.get(ref.sha256)


@pytest.mark.parametrize("bad", ["../../etc/passwd", "a" * 63, "A" * 64, "/abs", "x\0y"])
def test_digests_that_try_to_escape_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ArtifactError, match="not a sha256"):
        ArtifactStore(tmp_path).path_for(bad)


def test_copy_between_stores_verifies(tmp_path: Path) -> None:
    outbox, service = ArtifactStore(tmp_path / "outbox"), ArtifactStore(tmp_path / "service")
    ref = outbox.put(b"trace bytes", kind="xplane", name="host.xplane.pb")
    outbox.copy_to(service, ref.sha256)
    assert service.get(ref.sha256) == b"trace bytes"
