"""A thin Slack transport over slack-sdk's ``WebClient``: post and update messages, errors sorted at the edge.

Slack's answers are sorted into the two errors the notifier acts on: ``SlackTransient`` (rate limited past what
is worth waiting for here, Slack down or unreachable; retried later) and ``SlackRejected`` (a bad token, a channel
the bot is not in, blocks Slack refuses; retrying the same call cannot help until someone changes something).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from kernelwatch.errors import InvalidInput, Transient

TIMEOUT_S = 10
# How many 429s in a row one call sits out, and the longest Retry-After it waits for in-process. Past either, the
# call fails as transient with Slack's Retry-After, and the task is retried that much later instead: a worker
# asleep for minutes would hold up the other alerts' messages on its queue.
RATE_LIMIT_RETRIES = 3
MAX_IN_PROCESS_WAIT_S = 30
# Slack's error codes that mean "later" rather than "never" (besides HTTP 429 and 5xx).
_TRANSIENT_CODES = frozenset({"ratelimited", "internal_error", "fatal_error", "service_unavailable",
                              "request_timeout"})


class SlackTransient(Transient):
    """Slack could not take the call now; ``retry_after_s`` is what Slack asked for, when it said."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class SlackRejected(InvalidInput):
    """Slack refused the call for a reason of ours (token, channel, payload): not retried on its own."""


@dataclass(frozen=True)
class Posted:
    channel_id: str  # chat.update needs the channel's id, which a post to "#name" answers with
    ts: str  # the message's id within its channel; a thread is addressed by its parent's ts


def _retry_after(headers: dict[str, Any]) -> float | None:
    for name, value in headers.items():
        if name.lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return float(raw)
            except (TypeError, ValueError):
                return None
    return None


class BoundedRateLimitRetryHandler(RateLimitErrorRetryHandler):
    """slack-sdk's 429 handler (sleeps for Retry-After, then resends the same request), except that a
    Retry-After longer than ``max_wait_s`` is not waited for here: the error goes up, and the caller retries
    later without holding a worker."""

    def __init__(self, max_retry_count: int = RATE_LIMIT_RETRIES, max_wait_s: float = MAX_IN_PROCESS_WAIT_S) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.max_wait_s = max_wait_s

    def _can_retry(self, *, state: RetryState, request: HttpRequest, response: HttpResponse | None = None,
                   error: Exception | None = None) -> bool:
        if not super()._can_retry(state=state, request=request, response=response, error=error):
            return False
        assert response is not None
        wait = _retry_after(dict(response.headers))
        return wait is None or wait <= self.max_wait_s


def retry_handlers(max_wait_s: float = MAX_IN_PROCESS_WAIT_S) -> list[RetryHandler]:
    # A refused or dropped connection is retried once at once, as slack-sdk does by default. A drop after Slack
    # took the post would repeat it (as any later retry would): delivery is at least once, never at most once.
    return [ConnectionErrorRetryHandler(max_retry_count=1), BoundedRateLimitRetryHandler(max_wait_s=max_wait_s)]


class SlackClient:
    """Posts and updates messages in Slack; every call has a timeout and a bounded number of retries."""

    def __init__(self, token: str, base_url: str = WebClient.BASE_URL, timeout_s: int = TIMEOUT_S,
                 max_wait_s: float = MAX_IN_PROCESS_WAIT_S) -> None:
        self._client = WebClient(token=token, base_url=base_url, timeout=timeout_s,
                                 retry_handlers=retry_handlers(max_wait_s))

    def post(self, channel: str, text: str, blocks: Sequence[dict[str, Any]], thread_ts: str | None = None) -> Posted:
        data = self._call("chat.postMessage", channel=channel, text=text, blocks=list(blocks), thread_ts=thread_ts,
                          unfurl_links=False, unfurl_media=False)
        return Posted(channel_id=str(data.get("channel") or channel), ts=str(data["ts"]))

    def update(self, channel_id: str, ts: str, text: str, blocks: Sequence[dict[str, Any]]) -> None:
        self._call("chat.update", channel=channel_id, ts=ts, text=text, blocks=list(blocks))

    def _call(self, method: str, **arguments: Any) -> dict[str, Any]:
        body = {k: v for k, v in arguments.items() if v is not None}
        started = time.monotonic()
        try:
            response = self._client.api_call(method, json=body)
        except SlackApiError as exc:
            raise _sorted(method, exc) from None
        except (SlackClientError, URLError, OSError, TimeoutError) as exc:
            # Never the request itself in the message: it carries the token in a header.
            raise SlackTransient(f"Slack unreachable on {method} after {time.monotonic() - started:.1f} s: "
                                 f"{type(exc).__name__}: {exc}") from None
        data = response.data
        if not isinstance(data, dict):
            raise SlackTransient(f"Slack answered {method} with a body that is not JSON")
        return data


def _sorted(method: str, exc: SlackApiError) -> SlackTransient | SlackRejected:
    response = exc.response
    status = response.status_code
    data = response.data if isinstance(response.data, dict) else {}
    code = str(data.get("error") or f"HTTP {status}")
    if status == 429 or status >= 500 or code in _TRANSIENT_CODES:
        return SlackTransient(f"Slack {method}: {code} (HTTP {status})", _retry_after(dict(response.headers)))
    return SlackRejected(f"Slack refused {method}: {code} (HTTP {status})")
