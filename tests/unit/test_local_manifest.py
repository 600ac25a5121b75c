"""The runner's manifest assembly from what its child process wrote."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

from runners.local import RunRequest, build_manifest
from service.contract import parse_manifest
from tests import builders


def measurement(name: str, status: str = "ok") -> dict:  # type: ignore[type-arg]
    ok = status == "ok"
    return {"measurement": {
        "key": f"s/{name}[]", "suite": "s", "name": name, "params": {}, "unit": "s", "direction": "lower_is_better",
        "status": status, "samples": [1e-3, 2e-3] if ok else [], "compile_time_s": 0.1 if ok else None,
        "flops": None, "bytes_accessed": None, "max_abs_error": None, "message": None if ok else "boom",
    }}


def assemble(records: list[dict]) -> dict:  # type: ignore[type-arg]
    now = datetime(2026, 3, 1, tzinfo=UTC)
    return build_manifest(RunRequest(repo=Path("."), rev="HEAD"), records,
                          builders.commit(3), {"name": "r", "url": "file:///r", "default_branch": "main"}, "main",
                          now, now + timedelta(seconds=5), run_id="abcdef0123456789")


def header(planned: int) -> dict:  # type: ignore[type-arg]
    return {"environment": builders.environment(), "planned": planned}


def test_all_ok_is_complete_and_valid() -> None:
    doc = assemble([header(2), measurement("a"), measurement("b")])
    assert doc["status"] == "complete"
    assert parse_manifest(doc).results[0].samples == [1e-3, 2e-3]


def test_a_failed_kernel_makes_the_run_partial_and_keeps_the_others() -> None:
    doc = assemble([header(2), measurement("a"), measurement("b", "failed")])
    m = parse_manifest(doc)
    assert m.status == "partial" and [r.status for r in m.results] == ["ok", "failed"]


def test_a_child_that_died_early_leaves_a_partial_run() -> None:
    assert assemble([header(3), measurement("a")])["status"] == "partial"


def test_nothing_measured_is_a_failed_run() -> None:
    assert assemble([header(1), measurement("a", "failed")])["status"] == "failed"
