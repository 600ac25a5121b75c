"""The beat entry that hands out webhook deliveries whose handler was lost: there when the hook is on, and the
Celery task's retry bound is the store's dead-letter bound (one number, service/store/deliveries.py)."""

from __future__ import annotations

from pathlib import Path

from service.celery_app import GITHUB_SWEEP_S, github_sweep_schedule
from service.settings import load_settings
from service.store.deliveries import DELIVERY_ATTEMPTS, STALE_AFTER
from service.task_names import GITHUB_DELIVERY_SWEEP_TASK, GITHUB_DELIVERY_TASK
from service.tasks import make_celery


def test_the_sweep_runs_only_with_the_hook_on(tmp_path: Path) -> None:
    off = load_settings({"KERNELWATCH_HOME": str(tmp_path)})
    assert github_sweep_schedule(off) == {}
    on = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_GITHUB_WEBHOOK_SECRET": "s",
                        "KERNELWATCH_REDIS_URL": "redis://127.0.0.1:6379/9"})
    [entry] = github_sweep_schedule(on).values()
    assert entry["task"] == GITHUB_DELIVERY_SWEEP_TASK and entry["options"]["queue"] == "notify"
    assert GITHUB_SWEEP_S < STALE_AFTER.total_seconds()  # a lost delivery waits at most one period past stale
    app = make_celery(on)
    assert app.conf.beat_schedule["github delivery sweep"]["task"] == GITHUB_DELIVERY_SWEEP_TASK
    assert app.tasks[GITHUB_DELIVERY_TASK].max_retries == DELIVERY_ATTEMPTS
