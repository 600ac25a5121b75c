"""Findings at one commit range become one alert; an alert's triage states and the changes allowed between them.

Pure: plain records in, plain records out. The pipeline (``service.pipeline.alerts``) reads and writes them.

Triage rules, decided here once:

- The states are ``STATES``. Any state may change to any other, ``untriaged`` included (a person reopens an
  alert), so a wrong triage is always undone by another one.
- Changing to the state an alert is already in is not a change: with a note it records the note alone, without
  one there is nothing to do and it is refused.
- ``improvement`` is set by grouping (an alert whose findings are all improvements starts there) or by a person
  (who may know that a "regression" of a metric is the intended trade-off). Grouping never changes a state a
  person has set: until then the state follows the findings (``initial_state``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from kernelwatch.vocabulary import AlertKind, AlertState, ChangeKind

STATES: tuple[AlertState, ...] = tuple(AlertState)


class TriageError(ValueError):
    """A state change that cannot be made; the message says why, in one line."""


@dataclass(frozen=True)
class GroupableFinding:
    id: int
    repository_id: int
    commit_id: int  # first commit of the new level
    previous_commit_id: int | None  # last commit of the old level
    direction: str  # a ChangeKind: regression | improvement
    code: bool = False  # a static finding (the generated code changed): evidence, see alert_kind


RangeKey = tuple[int, int | None, int]  # repository, previous commit, commit


@dataclass(frozen=True)
class AlertGroup:
    repository_id: int
    previous_commit_id: int | None
    commit_id: int
    finding_ids: tuple[int, ...]
    kind: AlertKind

    @property
    def key(self) -> RangeKey:
        return (self.repository_id, self.previous_commit_id, self.commit_id)

    @property
    def initial_state(self) -> AlertState:
        return initial_state(self.kind)


def alert_kind(directions: Iterable[str], code_directions: Iterable[str] = ()) -> AlertKind:
    """regression or improvement when every finding agrees, else mixed; no findings at all count as a
    regression, so that an empty alert is never quietly taken for good news.

    ``code_directions``: the static findings' (their code grew or shrank), which decide only an alert that has no
    other finding. Code size is evidence of a change, not its worth: a commit whose kernel got 6x slower while its
    counted code shrank (the work moved into a library call) was an "improvement" alert, kept from triage, until
    its time finding came, and then a "mixed" one."""
    seen = set(directions) or set(code_directions)
    if seen == {ChangeKind.IMPROVEMENT}:
        return AlertKind.IMPROVEMENT
    if seen <= {ChangeKind.REGRESSION}:
        return AlertKind.REGRESSION
    return AlertKind.MIXED


def initial_state(kind: str) -> AlertState:
    """The state grouping gives an alert nobody has triaged: improvements need no one's attention."""
    return AlertState.IMPROVEMENT if kind == AlertKind.IMPROVEMENT else AlertState.UNTRIAGED


def group(findings: Iterable[GroupableFinding]) -> list[AlertGroup]:
    """One group per (repository, previous commit, commit), in a stable order, finding ids sorted."""
    by_range: dict[RangeKey, list[GroupableFinding]] = defaultdict(list)
    for f in findings:
        by_range[(f.repository_id, f.previous_commit_id, f.commit_id)].append(f)
    groups = [
        AlertGroup(repository_id=repo, previous_commit_id=prev, commit_id=commit,
                   finding_ids=tuple(sorted(f.id for f in members)),
                   kind=alert_kind([f.direction for f in members if not f.code],
                                   [f.direction for f in members if f.code]))
        for (repo, prev, commit), members in by_range.items()
    ]
    return sorted(groups, key=lambda g: (g.repository_id, g.commit_id, -1 if g.previous_commit_id is None
                                         else g.previous_commit_id))


def check_transition(current: str, target: str, has_note: bool) -> AlertState | None:
    """The state to record for a triage of an alert in ``current`` to ``target``: ``target``, or None when the
    triage is a note only. Raises TriageError for an unknown state or a triage that changes nothing."""
    if target not in STATES:
        raise TriageError(f"unknown alert state {target!r}; one of: {', '.join(STATES)}")
    if target == current:
        if not has_note:
            raise TriageError(f"the alert is already {current}; give a note to comment on it")
        return None
    return AlertState(target)
