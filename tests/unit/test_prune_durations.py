"""`kernelwatch prune --older-than`: the durations it accepts, and what it says about the others."""

from __future__ import annotations

from datetime import timedelta

import pytest

from service.detect.grouping import STATES
from service.pipeline.prune import OPEN_ALERT_STATES, parse_duration


@pytest.mark.parametrize(("text", "expected"), [
    ("90d", timedelta(days=90)),
    ("12h", timedelta(hours=12)),
    ("30m", timedelta(minutes=30)),
    ("2w", timedelta(weeks=2)),
    ("1w3d", timedelta(days=10)),
    (" 7D ", timedelta(days=7)),
])
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "90", "d", "90 d", "-5d", "1.5d", "90y", "90s", "d90", "90d junk", "0d"])
def test_bad_durations_say_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_duration(text)
    message = str(caught.value)
    assert repr(text) in message
    if text != "0d":
        assert "90d" in message and "w (weeks)" in message
    else:
        assert "positive" in message


def test_an_enormous_duration_is_refused_plainly() -> None:
    with pytest.raises(ValueError, match="too long"):
        parse_duration("99999999999999w")


def test_open_states_are_alert_states_and_closed_ones_are_not_open() -> None:
    assert OPEN_ALERT_STATES <= set(STATES)
    assert {"invalid", "wontfix", "fixed", "improvement"} == set(STATES) - OPEN_ALERT_STATES
