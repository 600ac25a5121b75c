"""Slack's settings, the notify tasks and beat entry they bring, and the bounded 429 handler."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwatch.errors import ConfigurationError
from service.celery_app import notify_schedule
from service.integrations.slack import BoundedRateLimitRetryHandler
from service.pipeline.notify import alert_url, backoff_s
from service.settings import load_settings
from service.task_names import NOTIFY_ALERT_TASK, NOTIFY_DUE_TASK
from service.tasks import make_celery


def settings(tmp_path: Path, **env: str):  # type: ignore[no-untyped-def]
    return load_settings({"KERNELWATCH_HOME": str(tmp_path), **{f"KERNELWATCH_{k}": v for k, v in env.items()}})


def test_slack_is_off_without_a_token(tmp_path: Path) -> None:
    s = settings(tmp_path)
    assert not s.slack_enabled and s.slack_api_url == "https://slack.com/api/" and s.public_url is None
    assert notify_schedule(s) == {}


def test_slack_settings_are_read_and_the_token_kept_out_of_repr(tmp_path: Path) -> None:
    s = settings(tmp_path, SLACK_TOKEN="xoxb-secret", SLACK_CHANNEL="#perf", SLACK_API_URL="http://127.0.0.1:9/api",
                 PUBLIC_URL="https://kw.example.com/")
    assert s.slack_enabled and s.slack_channel == "#perf"
    assert s.slack_api_url == "http://127.0.0.1:9/api/"  # slack-sdk appends the method name to it
    assert s.public_url == "https://kw.example.com"
    assert "xoxb-secret" not in repr(s)


@pytest.mark.parametrize("env, names", [
    ({"SLACK_TOKEN": "xoxb-1"}, "KERNELWATCH_SLACK_CHANNEL"),
    ({"SLACK_TOKEN": "xoxb-1", "SLACK_CHANNEL": "#perf", "SLACK_API_URL": "slack.com/api"},
     "KERNELWATCH_SLACK_API_URL"),
    ({"PUBLIC_URL": "ftp://kw"}, "KERNELWATCH_PUBLIC_URL"),
])
def test_wrong_slack_settings_name_the_variable(tmp_path: Path, env: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigurationError, match=names):
        settings(tmp_path, **env)


def test_the_notify_tasks_and_the_sweep_on_beat(tmp_path: Path) -> None:
    s = settings(tmp_path, REDIS_URL="redis://127.0.0.1:6379/15", SLACK_TOKEN="xoxb-1", SLACK_CHANNEL="#perf")
    app = make_celery(s)  # builds the app only: nothing connects until a task is sent
    assert {NOTIFY_ALERT_TASK, NOTIFY_DUE_TASK} <= set(app.tasks)
    [entry] = [e for e in app.conf.beat_schedule.values() if e["task"] == NOTIFY_DUE_TASK]
    assert entry["options"]["queue"] == "notify"


def test_backoff_grows_and_is_capped() -> None:
    assert [backoff_s(n) for n in (1, 2, 3)] == [30, 60, 120]
    assert backoff_s(30) == 3600


def test_the_alert_link_opens_the_inbox_at_the_alert() -> None:
    assert alert_url(None, 7) is None
    assert alert_url("https://kw.example.com", 7) == "https://kw.example.com/?after=8#alert-7"


class _Response:
    def __init__(self, status: int, retry_after: str | None) -> None:
        self.status_code = status
        self.headers = {"Retry-After": [retry_after]} if retry_after is not None else {}


def test_the_429_handler_waits_only_for_a_short_retry_after() -> None:
    from slack_sdk.http_retry.request import HttpRequest
    from slack_sdk.http_retry.state import RetryState

    handler = BoundedRateLimitRetryHandler(max_retry_count=3, max_wait_s=30)
    request = HttpRequest(method="POST", url="http://127.0.0.1/api/chat.postMessage", headers={})

    def can_retry(status: int, retry_after: str | None, attempt: int = 0) -> bool:
        state = RetryState(current_attempt=attempt)
        return handler.can_retry(state=state, request=request, response=_Response(status, retry_after))  # type: ignore[arg-type]

    assert can_retry(429, "1") and can_retry(429, "30") and can_retry(429, None)
    assert not can_retry(429, "31")  # left to a later attempt, not slept through in a worker
    assert not can_retry(500, "1")
    assert not can_retry(429, "1", attempt=3)  # a burst longer than the handler's count surfaces as transient
