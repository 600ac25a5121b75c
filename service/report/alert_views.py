"""What the alert faces show of an alert (the inbox, `kernelwatch alerts list`, the API, Slack): plain data, made
by service/store/alerts.py from stored rows and read by the formatters (alerts_text.py, slack_blocks.py). Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from service.detect.static_diff import STATIC_DETECTOR


@dataclass(frozen=True)
class AlertFindingView:
    id: int
    series_id: int
    benchmark: str
    metric: str
    unit: str
    direction: str  # a ChangeKind: regression | improvement
    magnitude: float
    confidence: float  # noise units, not a confidence level: the stored column's and the API field's name
    p_value: float | None
    detector: str

    @property
    def code(self) -> bool:
        """A code (static) finding: its generated code changed."""
        return self.detector == STATIC_DETECTOR

    @property
    def change_word(self) -> str:
        return change_word(self.direction, self.magnitude, self.code)


@dataclass(frozen=True)
class AlertNoteView:
    author: str
    text: str
    state_from: str
    state_to: str | None
    created_at: datetime


@dataclass(frozen=True)
class AlertView:
    id: int
    repository: str
    commit_sha: str
    commit_subject: str
    previous_sha: str | None
    previous_subject: str | None
    state: str
    kind: str
    created_at: datetime
    updated_at: datetime
    findings: list[AlertFindingView]  # the largest changes, at most the findings_limit asked for
    notes: list[AlertNoteView]
    finding_count: int  # every finding of the alert (on the hardware asked for), listed or not


def change_word(direction: str, magnitude: float, code: bool) -> str:
    """What a finding's change reads as: its direction (regression, improvement), or for a code (static) finding
    which way its code moved. Code size is evidence of a change, not its worth: a slowdown whose counted code
    shrank read "code improvement -34.1 %" beside "+664.7 %"."""
    if not code:
        return direction
    return "code grew" if magnitude > 0 else "code shrank" if magnitude < 0 else "code changed"


class _Directed(Protocol):
    @property
    def direction(self) -> str: ...


F = TypeVar("F", bound=_Directed)


def worst_finding(findings: Sequence[F], code: Callable[[F], bool]) -> F | None:
    """The finding an alert is summed up by, of ``findings`` listed largest change first: the largest regression;
    the largest change where there is none (an improvement's alert). A code diff's stands in only for an alert of
    code diffs alone, as in the alert's kind: in a mixed alert neither a large speed-up nor an instruction count
    may stand in for the slow-down a person has to look at. The inbox and Slack's notification text both use it
    (Slack's named a +794 % instruction count where the inbox named the +234 % time)."""
    measured = [f for f in findings if not code(f)] or list(findings)
    regression = next((f for f in measured if f.direction == "regression"), None)
    return regression or (measured[0] if measured else None)
