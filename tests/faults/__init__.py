"""Fault scenarios against the service's real processes, shared by `bench/faults.py` (full size, a minute of fault)
and tests/integration/test_faults_sample.py (a fast sample of each, so CI catches a regression of robustness).

Each scenario starts what it needs (a scratch database on the machine's PostgreSQL, or a private cluster where it
restarts PostgreSQL; a private redis-server everywhere, so no Redis database of the machine's is touched), submits
runs over HTTP the way a runner does (``runners.uploader.HttpUploader``, tried again while it says the service is
unavailable), injects its fault in the middle, and counts what came out: an ``Outcome``.

Counting: ``submitted`` runs the client sent; ``stored`` of those found in the run table with all their results;
``duplicates`` run rows beyond the first per run id, plus results or parsed records stored twice; ``lost`` runs
(or alerts) submitted and never stored whole, whatever the client was told; ``visible`` whether the fault showed
where it concerns (an error in the stable shape to the client, a pending or failed state on the alert, a
redelivered task in the worker's log); ``recovered`` whether everything ended stored and drained with nobody
stepping in (the client's own retries, a second worker, the sweep).
"""

from __future__ import annotations

from collections.abc import Callable

from tests.faults.harness import Outcome, Plan
from tests.faults.integrations import github_500_429, slack_500_429
from tests.faults.processes import (
    can_mount_tmpfs,
    disk_full,
    kill_ingest_worker,
    kill_runner_mid_suite,
    kill_web_mid_upload,
    postgres_restart,
    redis_restart,
)

__all__ = ["SCENARIOS", "Outcome", "Plan", "can_mount_tmpfs", "disk_full", "github_500_429", "kill_ingest_worker",
           "kill_runner_mid_suite", "kill_web_mid_upload", "postgres_restart", "redis_restart", "slack_500_429"]

SCENARIOS: dict[str, Callable[[Plan], Outcome]] = {
    "kill-ingest-worker": kill_ingest_worker,
    "kill-runner-mid-suite": kill_runner_mid_suite,
    "kill-web-mid-upload": kill_web_mid_upload,
    "postgres-restart": postgres_restart,
    "redis-restart": redis_restart,
    "disk-full": disk_full,
    "slack-500-429": slack_500_429,
    "github-500-429": github_500_429,
}

