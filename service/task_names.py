"""Every Celery task and queue name, in one place (issue 19: they were written in three). The senders (CeleryQueue in
service/pipeline/queue.py, `kernelwatch submit`, POST /api/v1/runs/enqueue, beat's schedule) send by these names,
and the worker (service/tasks.py) registers its tasks under them: neither imports the other's code."""

from __future__ import annotations

import re

# Queues: a worker of the service takes ingest, detect and notify; a runner host takes runner.<hardware>.
INGEST_QUEUE = "ingest"
DETECT_QUEUE = "detect"
NOTIFY_QUEUE = "notify"

PARSE_TASK = "kernelwatch.parse_artifacts"  # ingest
PARSE_SWEEP_TASK = "kernelwatch.parse_sweep"  # ingest, from beat
DETECT_TASK = "kernelwatch.detect_series"  # detect
COMPARE_TASK = "kernelwatch.compare_runs"  # detect
FOLLOW_UP_FAILED_TASK = "kernelwatch.follow_up_failed"  # detect
RUN_SUITE_TASK = "kernelwatch.run_suite"  # runner.<hardware>
RUN_TRACKED_TASK = "kernelwatch.run_tracked"  # from beat: queues a run_suite at a tracked branch's tip
NOTIFY_ALERT_TASK = "kernelwatch.notify_alert"  # notify
NOTIFY_DUE_TASK = "kernelwatch.notify_due"  # notify, from beat
GITHUB_DELIVERY_TASK = "kernelwatch.github_delivery"  # notify
GITHUB_DELIVERY_SWEEP_TASK = "kernelwatch.github_delivery_sweep"  # notify, from beat
PR_REPORT_TASK = "kernelwatch.report_pull_request"  # notify
PR_RUN_FAILED_TASK = "kernelwatch.pull_request_run_failed"  # notify: a pull request's runs could not be made


# A runner queue's suffix: what `kernelwatch worker --queues runner.HW` takes. A name outside it (`CPU`, `a b`) made
# a queue no worker consumes, and the task was lost without a word.
HARDWARE_NAME = re.compile(r"^[a-z0-9][a-z0-9.\-]{0,63}$")


def runner_queue(hardware: str) -> str:
    """The queue of the runners of one kind of hardware: runner.cpu, runner.h200, runner.tpu-v5e-8."""
    return f"runner.{hardware}"
