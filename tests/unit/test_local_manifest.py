"""The runner's manifest assembly from what its benchmark processes measured."""

from datetime import UTC, datetime
from pathlib import Path

from runners.local import EnvironmentRun, RunRequest, build_manifest
from service.contract import parse_manifest
from tests import builders


def measurement(name: str, status: str = "ok", metric: str = "wall_time") -> dict:  # type: ignore[type-arg]
    ok = status == "ok"
    return {
        "key": f"s/{name}[]", "suite": "s", "name": name, "params": {}, "unit": "s", "direction": "lower_is_better",
        "status": status, "samples": [1e-3, 2e-3] if ok else [], "metric": metric,
        "compile_time_s": 0.1 if ok else None, "flops": None, "bytes_accessed": None, "max_abs_error": None,
        "message": None if ok else "boom",
    }


def assemble(planned: list[str], measurements: list[dict]) -> dict:  # type: ignore[type-arg]
    run = EnvironmentRun(environment=builders.environment(), devices=1, planned=planned, measurements=measurements,
                         started_at=datetime(2026, 3, 1, tzinfo=UTC),
                         finished_at=datetime(2026, 3, 1, 0, 1, tzinfo=UTC))
    return build_manifest(RunRequest(repo=Path("."), rev="HEAD"), run, builders.commit(3),
                          {"name": "r", "url": "file:///r", "default_branch": "main"}, "main",
                          run_id="abcdef0123456789")


def test_all_ok_is_complete_and_valid() -> None:
    doc = assemble(["a", "b"], [measurement("a"), measurement("b")])
    assert doc["status"] == "complete"
    assert parse_manifest(doc).results[0].samples == [1e-3, 2e-3]


def test_quality_metrics_travel_as_results_of_their_own() -> None:
    doc = assemble(["a"], [measurement("a"), measurement("a", metric="rel_error")])
    assert doc["status"] == "complete"
    assert [r.metric for r in parse_manifest(doc).results] == ["wall_time", "rel_error"]


def test_a_failed_kernel_makes_the_run_partial_and_keeps_the_others() -> None:
    m = parse_manifest(assemble(["a", "b"], [measurement("a"), measurement("b", "failed")]))
    assert m.status == "partial" and [r.status for r in m.results] == ["ok", "failed"]


def test_nothing_measured_is_a_failed_run() -> None:
    assert assemble(["a"], [measurement("a", "failed")])["status"] == "failed"


def test_a_failure_message_with_unstorable_text_is_escaped_not_refused() -> None:
    hostile = measurement("b", "failed") | {"message": "ValueError: a\x00b \ud800 tab\there"}
    m = parse_manifest(assemble(["a", "b"], [measurement("a"), hostile]))
    assert m.results[1].message == "ValueError: a\\x00b \\ud800 tab\there"  # the tab is free text's own


def test_the_hosts_health_over_the_run_travels_in_the_manifest() -> None:
    from runners.host_health import CpuCounters, Snapshot

    def snap(busy: int, idle: int, steal: int) -> Snapshot:
        return Snapshot(cpu=CpuCounters(user=busy, nice=0, system=0, idle=idle, iowait=0, irq=0, softirq=0,
                                        steal=steal, cores=4), load_1m=2.0)

    run = EnvironmentRun(environment=builders.environment(), devices=1, planned=["a"], measurements=[measurement("a")],
                         health_start=snap(100, 100, 0), health_end=snap(400, 150, 50))
    doc = build_manifest(RunRequest(repo=Path("."), rev="HEAD"), run, builders.commit(3),
                         {"name": "r", "url": "file:///r", "default_branch": "main"}, "main", run_id="abcdef0123456789")
    health = parse_manifest(doc).host_health
    assert health is not None
    assert (health.steal_fraction, health.busy_fraction, health.cores, health.load_1m) == (0.125, 0.75, 4, 2.0)


def test_a_host_without_proc_stat_sends_no_host_health() -> None:
    doc = assemble(["a"], [measurement("a")])  # no snapshots, as on macOS
    assert "host_health" not in doc and parse_manifest(doc).host_health is None


def test_a_folder_s_name_becomes_a_name_the_manifest_takes(tmp_path: Path) -> None:
    """A non-ASCII letter passed str.isalnum and the manifest's pattern refused the run after it was measured."""
    from runners.local import repository_name
    from service.contract.manifest import NAME_CHARACTERS, NAME_MAX_LENGTH

    for folder, expected in (("kernels", "kernels"), ("nöyau x", "n-yau-x"), ("k" * 250, "k" * NAME_MAX_LENGTH)):
        (tmp_path / folder).mkdir()
        name = repository_name(tmp_path / folder)
        assert name == expected and set(name) <= NAME_CHARACTERS
