"""A fast sample of each fault scenario of bench/faults.py (the same code, tests/faults.py, a few runs and a fault of
a few seconds), so that CI catches a regression of robustness itself: nothing lost, nothing stored twice, the
fault visible where it concerns, everything recovered with nobody stepping in.

Scenarios sampled elsewhere, not run twice:
- postgres-restart: test_reliability_postgres.py (a private cluster stopped under a live web process while a
  runner submits: prompt 503s in the error shape, every run stored once and whole);
- redis-restart: test_reliability_redis.py (queued work survives a broker restart; a submission the broker
  refused is a 503, retried, and its detection not dropped);
- a detect worker SIGKILLed mid-batch: test_reliability_worker_kill.py;
- Slack's 429 bursts and outages on the notifier's own terms: test_slack_notify.py (here: the same faults for a
  window of wall time, alerts arriving throughout).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults import (
    Outcome,
    Plan,
    can_mount_tmpfs,
    disk_full,
    github_500_429,
    kill_ingest_worker,
    kill_runner_mid_suite,
    kill_web_mid_upload,
    slack_500_429,
)


def assert_robust(outcome: Outcome) -> None:
    summary = f"{outcome}"
    assert outcome.submitted > 0, summary
    assert outcome.lost == 0, summary
    assert outcome.duplicates == 0, summary
    assert outcome.stored == outcome.submitted, summary
    assert outcome.visible, summary
    assert outcome.recovered, summary


def test_a_web_process_killed_mid_upload_loses_and_doubles_nothing(tmp_path: Path) -> None:
    outcome = kill_web_mid_upload(Plan(runs=6, fault_s=1.5, workdir=tmp_path))
    assert_robust(outcome)


def test_a_killed_ingest_worker_leaves_its_parses_to_the_next(tmp_path: Path) -> None:
    outcome = kill_ingest_worker(Plan(runs=6, fault_s=1.0, workdir=tmp_path))
    # About one run in three here a task vanishes with the killed worker (kombu's Redis transport pops a message,
    # RPOP, and only then records it as unacknowledged; celery/celery#7950): beat's parse sweep queues it again.
    assert_robust(outcome)


def test_a_runner_killed_mid_suite_has_its_run_stored_once_by_another(tmp_path: Path) -> None:
    # test_runner_workers.py covers the same on the machine's PostgreSQL; this one is the bench's scenario, small.
    outcome = kill_runner_mid_suite(Plan(runs=1, fault_s=1.0, workdir=tmp_path))
    assert_robust(outcome)


def test_github_down_then_rate_limiting_delays_reports_and_doubles_none(tmp_path: Path) -> None:
    outcome = github_500_429(Plan(runs=3, fault_s=4.0, workdir=tmp_path))
    assert_robust(outcome)


def test_slack_down_then_rate_limiting_for_a_while_delays_alerts_and_loses_none(tmp_path: Path) -> None:
    # The notifier's clock runs 30x: its 30 s backoff passes in one second of the test.
    outcome = slack_500_429(Plan(runs=4, fault_s=4.0, workdir=tmp_path, clock_scale=30))
    assert_robust(outcome)


def test_a_full_artifact_store_refuses_clearly_and_takes_the_upload_once_freed(tmp_path: Path) -> None:
    why_not = can_mount_tmpfs()
    if why_not is not None:
        pytest.skip(f"disk-full needs a tmpfs of its own (root, CAP_SYS_ADMIN): {why_not}")
    outcome = disk_full(Plan(runs=6, fault_s=1.5, workdir=tmp_path))
    summary = f"{outcome}"
    # What holds already: nothing half-written, nothing doubled, every run the client was told about stored.
    assert outcome.duplicates == 0, summary
    assert not any("half-written" in note for note in outcome.notes), summary
    assert_robust(outcome)
