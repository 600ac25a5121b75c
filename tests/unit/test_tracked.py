"""Tracked branches: reading KERNELWATCH_TRACK, the beat schedule made of it, and one tick's decision (with fakes
for git, the database and the broker)."""

from __future__ import annotations

from typing import Any

import pytest

from kernelwatch.errors import ConfigurationError, Transient
from service.pipeline.tracking import tick
from service.settings import load_settings
from service.task_names import RUN_TRACKED_TASK
from service.tracked import (
    TrackedBranch,
    TrackError,
    beat_schedule,
    parse_track,
    parse_track_entry,
    queued_mark_ttl_s,
    scheduled_task_id,
)


@pytest.mark.parametrize(("entry", "expected"), [
    ("/srv/kernels@main", TrackedBranch("/srv/kernels", "main", "cpu")),
    ("/srv/kernels@main@tpu-v5e-8", TrackedBranch("/srv/kernels", "main", "tpu-v5e-8")),
    ("/srv/kernels@release/2.1@h200", TrackedBranch("/srv/kernels", "release/2.1", "h200")),
    ("https://github.com/org/kernels.git@main", TrackedBranch("https://github.com/org/kernels.git", "main")),
    ("git@github.com:org/kernels.git@main", TrackedBranch("git@github.com:org/kernels.git", "main")),
    ("git@github.com:org/kernels.git@dev@h200", TrackedBranch("git@github.com:org/kernels.git", "dev", "h200")),
    ("https://ci@host.example/kernels@main", TrackedBranch("https://ci@host.example/kernels", "main")),
    ("ssh://git@host.example/kernels@main@cpu", TrackedBranch("ssh://git@host.example/kernels", "main", "cpu")),
    ("file:///srv/kernels@main", TrackedBranch("file:///srv/kernels", "main")),
])
def test_an_entry_is_read_from_the_right(entry: str, expected: TrackedBranch) -> None:
    assert parse_track_entry(entry) == expected


@pytest.mark.parametrize("entry", ["/srv/kernels", "@main", "/srv/kernels@", "/srv/kernels@bad..name",
                                   "/srv/kernels@main@h 200", "https://host.example@main"])
def test_a_malformed_entry_says_what_to_write(entry: str) -> None:
    with pytest.raises(TrackError, match="REPO_URL_OR_PATH@BRANCH"):
        parse_track_entry(entry)


@pytest.mark.parametrize(("entry", "suggested"), [("/srv/kernels@main@CPU", "'cpu'"),
                                                  ("/srv/kernels@main@tpu_v5e", "'tpu-v5e'")])
def test_a_hardware_no_worker_consumes_is_refused_with_its_queue_name(entry: str, suggested: str) -> None:
    # It was scheduled to runner.CPU, a queue `kernelwatch worker --queues runner.CPU` refuses to consume.
    with pytest.raises(TrackError, match=f"not a runner queue's name.*e.g. {suggested}"):
        parse_track_entry(entry)


def test_the_setting_is_a_comma_separated_list_without_repeats() -> None:
    assert parse_track("") == ()
    assert parse_track(" /a@main , /b@dev@h200 ,") == (TrackedBranch("/a", "main"), TrackedBranch("/b", "dev", "h200"))
    with pytest.raises(TrackError, match="twice"):
        parse_track("/a@main,/a@main@cpu")


def test_settings_validate_track_and_period(tmp_path: Any) -> None:
    home = {"KERNELWATCH_HOME": str(tmp_path)}
    settings = load_settings(home)
    assert settings.tracked == () and settings.track_period_s == 3600
    settings = load_settings({**home, "KERNELWATCH_TRACK": "/a@main@h200", "KERNELWATCH_TRACK_PERIOD": "900"})
    assert settings.tracked == (TrackedBranch("/a", "main", "h200"),) and settings.track_period_s == 900
    with pytest.raises(ConfigurationError, match="KERNELWATCH_TRACK entry '/a'"):
        load_settings({**home, "KERNELWATCH_TRACK": "/a"})
    for bad in ("0", "-5", "1h", "1.5"):
        with pytest.raises(ConfigurationError, match="KERNELWATCH_TRACK_PERIOD"):
            load_settings({**home, "KERNELWATCH_TRACK_PERIOD": bad})


def test_the_beat_schedule_has_one_expiring_tick_per_branch_on_the_detect_queue() -> None:
    tracked = (TrackedBranch("/a", "main"), TrackedBranch("https://h.example/b.git", "dev", "h200"))
    schedule = beat_schedule(tracked, 600)
    assert schedule == {
        "track /a@main@cpu": {"task": RUN_TRACKED_TASK, "schedule": 600.0, "args": ("/a", "main", "cpu"),
                              "options": {"queue": "detect", "expires": 600.0}},
        "track https://h.example/b.git@dev@h200": {
            "task": RUN_TRACKED_TASK, "schedule": 600.0, "args": ("https://h.example/b.git", "dev", "h200"),
            "options": {"queue": "detect", "expires": 600.0}},
    }
    assert beat_schedule((), 600) == {}


def test_the_celery_app_carries_the_schedule(tmp_path: Any) -> None:
    from service.tasks import make_celery

    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_REDIS_URL": "redis://127.0.0.1:1/0",
                              "KERNELWATCH_TRACK": "/a@main", "KERNELWATCH_TRACK_PERIOD": "60"})
    app = make_celery(settings)
    assert list(app.conf.beat_schedule) == ["track /a@main@cpu", "parse sweep"]
    assert RUN_TRACKED_TASK in app.tasks


def test_a_tip_on_a_hardware_has_one_task_id() -> None:
    sha = "a" * 40
    assert scheduled_task_id("/a", sha, "cpu") == scheduled_task_id("/a", sha, "cpu")
    assert len({scheduled_task_id("/a", sha, "cpu"), scheduled_task_id("/a", sha, "h200"),
                scheduled_task_id("/a", "b" * 40, "cpu"), scheduled_task_id("/b", sha, "cpu")}) == 4
    assert queued_mark_ttl_s(3600, 3600) == 3 * 3600
    assert queued_mark_ttl_s(60, 3600) == 2 * 3600


class FakeMarks:
    def __init__(self) -> None:
        self.marked: dict[str, int] = {}
        self.failed: dict[str, tuple[str, int]] = {}

    def mark(self, task_id: str, ttl_s: int) -> bool:
        if task_id in self.marked:
            return False
        self.marked[task_id] = ttl_s
        return True

    def clear(self, task_id: str) -> None:
        self.marked.pop(task_id, None)

    def failure(self, task_id: str) -> tuple[str, int] | None:
        return self.failed.get(task_id)


class Tips:
    def __init__(self, **tips: str) -> None:
        self.tips = tips

    def __call__(self, repo: str, branch: str) -> str:
        return self.tips[branch]


def test_a_tip_is_queued_once_then_skipped_while_queued_and_once_stored() -> None:
    sent: list[tuple[str, str, dict[str, Any]]] = []
    stored: set[str] = set()
    marks = FakeMarks()
    tips = Tips(main="1" * 40)
    branch = TrackedBranch("/srv/k", "main", "h200")

    def run() -> str:
        return tick(branch, tips, stored.__contains__, marks, lambda *a: sent.append(a), 99).action

    assert run() == "queued"
    [(queue, task_id, kwargs)] = sent
    assert queue == "runner.h200" and task_id == scheduled_task_id("/srv/k", "1" * 40, "h200")
    assert kwargs["commit"] == "1" * 40 and kwargs["trigger"] == "schedule" and kwargs["branch"] == "main"
    assert kwargs["repo"] == "/srv/k" and kwargs["suite"] == "*" and not kwargs["quick"]
    assert marks.marked == {task_id: 99}

    assert run() == "already-queued" and len(sent) == 1
    stored.add(task_id)
    marks.marked.clear()  # the mark expired; the run is in the database now
    assert run() == "stored" and len(sent) == 1

    tips.tips["main"] = "2" * 40  # the branch moved: its new tip is queued
    assert run() == "queued" and len(sent) == 2 and sent[1][2]["commit"] == "2" * 40

    # Its run fails before storing anything: while the mark lasts the tip reads failed, with the runner's reason.
    marks.failed[sent[1][1]] = ("no suite", 42)
    outcome = tick(branch, tips, stored.__contains__, marks, lambda *a: sent.append(a), 99)
    assert (outcome.action, outcome.failure, outcome.retry_in_s) == ("failed", "no suite", 42) and len(sent) == 2


def test_a_send_that_fails_leaves_the_tip_unmarked_for_the_retry() -> None:
    marks = FakeMarks()

    def broken_send(*_: Any) -> None:
        raise ConnectionError("broker gone")

    with pytest.raises(Transient, match="broker gone"):
        tick(TrackedBranch("/k", "main"), Tips(main="3" * 40), lambda _: False, marks, broken_send, 10)
    assert marks.marked == {}
