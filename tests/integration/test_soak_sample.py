"""A fast sample of bench/soak.py, the same code at a small size: the service as docker-compose runs it (gunicorn
with two workers, a Celery worker for ingest, detect and notify, PostgreSQL, Redis), three runner processes
uploading realistic manifests and artifacts through runners/uploader.py for 12 seconds while a reader loads the
dashboard and the API. What must hold at any size: no 5xx, every accepted run stored exactly once, the queues
drained, no traceback or failed task in the service's logs, and no memory blow-up. Two hardware kinds for three
runners, half a second apart: two runs of one series land within a second, so the worker's two pool processes
detect the same series at once, and the inbox is read while regrouping moves findings between alerts. No timing
is asserted: the machine's load decides those. A second test checks that the verdict fails on each failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.soak import SoakConfig, SoakReport, checks, format_report, soak
from tests.conftest import fresh_redis
from tests.soak import PageHit, Submission

REDIS_URL = "redis://127.0.0.1:6379/8"  # this test's alone (the other tests use 2-4, 6, 7, 9-14; the benches 5 and 15)


def test_a_short_soak_loses_nothing_answers_no_5xx_and_keeps_its_memory(pg_database: str, tmp_path: Path) -> None:
    # Loose on memory: 12 seconds say nothing about a slow leak, only about a blow-up (a whole suite held per run).
    config = SoakConfig(runners=3, duration=12, readers=1, hardware_kinds=2, pause=0.5, resubmit_every=4,
                        drain_timeout=240, max_growth_pct=0, max_growth_mb=300, redis_url=fresh_redis(REDIS_URL))
    report = soak(config, pg_database, tmp_path)
    table = format_report(report)
    print(table)

    accepted = {s.run_id for s in report.submissions if s.status in (200, 201)}
    assert len(accepted) >= 3, table  # each runner got at least one run in
    assert any(s.resubmitted and s.status == 200 for s in report.submissions), table  # a repeat, answered 200
    assert set(report.stored) == accepted and set(report.stored.values()) == {1}, table
    assert report.drained_s is not None, table
    retried_5xx = [r for s in report.submissions for r in s.retries if r.startswith("HTTP 5")]
    assert not [s for s in report.submissions if s.status >= 500] and not retried_5xx, table
    assert report.pages and not [h for h in report.pages if h.status >= 500], table
    assert not any(report.log_problems.values()), table
    assert report.passed, table  # the rest of the bench's checks: results stored, memory within 300 MB, ...
    fresh_redis(REDIS_URL)


def _report(**changes: Any) -> SoakReport:
    ok = [Submission(0, f"soak-t-r00-{k:05d}", k, 0.1, 201, 40, False, ()) for k in range(3)]
    report = SoakReport(SoakConfig(), 60.0, ok + [Submission(0, "soak-t-r00-00002", 3, 0.1, 200, 40, True, ())],
                        [PageHit("/", 0.01, 200)], [], {"web main": 100.0}, {"web main": 120.0},
                        {"web main": 120.0}, (1.0, 1.0), [(5.0, 3)], 2.0, {}, {s.run_id: 1 for s in ok}, 120, 0,
                        {"web": [], "worker": []}, {})
    for name, value in changes.items():
        setattr(report, name, value)
    report.checks = checks(report)
    return report


def test_the_verdict_fails_on_each_kind_of_robustness_failure() -> None:
    """The soak's checks themselves: a clean report passes, and each failure it exists to catch fails it."""
    assert _report().passed, format_report(_report())
    stored = {f"soak-t-r00-{k:05d}": 1 for k in range(3)}
    failing: dict[str, dict[str, Any]] = {
        "a lost run": {"stored": {k: v for k, v in stored.items() if not k.endswith("2")}, "results_stored": 80},
        "a run stored twice": {"stored": {**stored, "soak-t-r00-00001": 2}},
        "a run stored that was never acknowledged": {"stored": {**stored, "soak-t-r00-00009": 1}},
        "a 5xx a retry hid": {"submissions": [Submission(0, k, 0, 0.1, 201, 40, False, ("HTTP 503: busy",))
                                              for k in stored]},
        "a page's 5xx": {"pages": [PageHit("/", 0.01, 500)]},
        "a backlog left": {"drained_s": None, "backlog": {"detect": 4}},
        "a failed task": {"log_problems": {"web": [], "worker": ["Task kernelwatch.x[1] raised unexpected: Error"]}},
        "a leak": {"memory_end": {"web main": 400.0}},
    }
    for what, changes in failing.items():
        report = _report(**changes)
        assert not report.passed, f"{what} passed the soak:\n{format_report(report)}"
    # Growth past the percentage alone, or past the megabytes alone, is within the bound: both must be exceeded.
    assert _report(memory_start={"web main": 10.0}, memory_end={"web main": 60.0}).passed
    assert _report(memory_start={"web main": 1000.0}, memory_end={"web main": 1150.0}).passed
