"""Grouping findings into alerts and the triage rules: pure, on hand-made findings."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from service.detect.grouping import (
    STATES,
    GroupableFinding,
    TriageError,
    alert_kind,
    check_transition,
    group,
    initial_state,
)
from service.report.alert_views import AlertFindingView, AlertNoteView, AlertView
from service.report.alerts_text import alerts_to_json, alerts_to_text


def finding(id: int, commit: int = 5, previous: int | None = 4, direction: str = "regression",
            repository: int = 1) -> GroupableFinding:
    return GroupableFinding(id=id, repository_id=repository, commit_id=commit, previous_commit_id=previous,
                            direction=direction)


def test_findings_at_one_range_make_one_group() -> None:
    groups = group([finding(3), finding(1), finding(2, commit=7, previous=6), finding(4, previous=3)])
    assert [(g.key, g.finding_ids) for g in groups] == [
        ((1, 3, 5), (4,)),  # same first commit, another previous commit: another range
        ((1, 4, 5), (1, 3)),
        ((1, 6, 7), (2,)),
    ]


def test_repositories_never_share_a_group() -> None:
    groups = group([finding(1, repository=1), finding(2, repository=2)])
    assert [g.repository_id for g in groups] == [1, 2]


def test_a_range_without_previous_commit_groups_too() -> None:
    [g] = group([finding(1, previous=None), finding(2, previous=None)])
    assert g.key == (1, None, 5) and g.finding_ids == (1, 2)


def test_no_findings_no_groups() -> None:
    assert group([]) == []


@pytest.mark.parametrize("directions, kind, state", [
    (["regression"], "regression", "untriaged"),
    (["regression", "regression"], "regression", "untriaged"),
    (["improvement", "improvement"], "improvement", "improvement"),
    (["improvement", "regression"], "mixed", "untriaged"),
    ([], "regression", "untriaged"),
])
def test_kind_and_initial_state(directions: list[str], kind: str, state: str) -> None:
    assert alert_kind(directions) == kind
    assert initial_state(kind) == state


def test_group_carries_kind_and_initial_state() -> None:
    [g] = group([finding(1, direction="improvement"), finding(2, direction="improvement")])
    assert (g.kind, g.initial_state) == ("improvement", "improvement")


@pytest.mark.parametrize("current", STATES)
@pytest.mark.parametrize("target", STATES)
def test_any_state_may_change_to_any_other(current: str, target: str) -> None:
    if current == target:
        assert check_transition(current, target, has_note=True) is None  # a note, no state change
        with pytest.raises(TriageError, match="already"):
            check_transition(current, target, has_note=False)
    else:
        assert check_transition(current, target, has_note=False) == target


def test_an_unknown_state_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(TriageError, match="unknown alert state 'closed'; one of: untriaged, acknowledged"):
        check_transition("untriaged", "closed", has_note=True)


AT = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)


def sample_alert() -> AlertView:
    return AlertView(
        id=7, repository="demo", commit_sha="b" * 40, commit_subject="softmax: online normaliser",
        previous_sha="a" * 40, previous_subject="docs", state="acknowledged", kind="mixed", created_at=AT,
        updated_at=AT,
        findings=[
            AlertFindingView(id=1, series_id=2, benchmark="softmax/softmax_rows[cols=4096,rows=256]",
                             metric="wall_time", unit="s", direction="regression", magnitude=1.5231,
                             confidence=12.04, p_value=0.001, detector="median-steps"),
            AlertFindingView(id=3, series_id=4, benchmark="matmul/mm[m=8]", metric="wall_time", unit="s",
                             direction="improvement", magnitude=-0.0712, confidence=6.0, p_value=None,
                             detector="median-steps"),
        ],
        notes=[AlertNoteView(author="ada", text="looking", state_from="untriaged", state_to="acknowledged",
                             created_at=AT),
               AlertNoteView(author="bo", text="", state_from="acknowledged", state_to=None, created_at=AT)],
        finding_count=2,
    )


def test_alerts_as_text() -> None:
    assert alerts_to_text([sample_alert()]) == (
        "alert 7  acknowledged  mixed  demo  aaaaaaaaaaaa..bbbbbbbbbbbb  softmax: online normaliser\n"
        "   +152.3%  regression   softmax/softmax_rows[cols=4096,rows=256]  wall_time  "
        "(12.0 x noise, p=0.001, median-steps)\n"
        "     -7.1%  improvement  matmul/mm[m=8]  wall_time  (6.0 x noise, median-steps)\n"
        "  [2026-01-02 03:04] ada untriaged -> acknowledged: looking\n"
        "  [2026-01-02 03:04] bo note\n"
    )
    assert alerts_to_text([]) == "no alerts\n"
    # A note's own lines stay under it: at the margin one could pass for another dated entry.
    forged = dataclasses.replace(sample_alert(), notes=[dataclasses.replace(
        sample_alert().notes[0], text="ok\n  [2026-01-01 00:00] admin acknowledged -> resolved: fixed")])
    assert "\n  [2026-01-01 00:00] admin" not in alerts_to_text([forged])
    assert ": ok\n        [2026-01-01 00:00] admin" in alerts_to_text([forged])


def test_a_capped_alert_says_how_many_findings_it_left_out() -> None:
    capped = dataclasses.replace(sample_alert(), finding_count=5)
    assert "\n  ... 3 more finding(s)\n" in alerts_to_text([capped])
    assert "more finding" not in alerts_to_text([sample_alert()])


def test_alerts_as_json() -> None:
    doc = alerts_to_json([sample_alert()])
    [a] = doc["alerts"]
    assert a["id"] == 7 and a["created_at"] == "2026-01-02T03:04:00+00:00"
    assert a["findings"][0]["magnitude"] == 1.5231 and a["notes"][1]["state_to"] is None
    assert a["finding_count"] == 2


def test_code_findings_decide_an_alerts_kind_only_where_nothing_else_does() -> None:
    """A kernel 6x slower whose counted code shrank (its work moved into a library call): a regression, not a
    mixed alert; the code alone decides only an alert with no other finding (its time finding not in yet)."""
    assert alert_kind(["regression"], ["improvement"]) == "regression"
    assert alert_kind(["improvement"], ["regression"]) == "improvement"
    assert alert_kind([], ["improvement"]) == "improvement"
    assert alert_kind([], ["regression", "improvement"]) == "mixed"
    [g] = group([GroupableFinding(id=1, repository_id=1, commit_id=5, previous_commit_id=4, direction="improvement",
                                  code=True), finding(2, direction="regression")])
    assert (g.kind, g.initial_state) == ("regression", "untriaged")


def test_a_code_finding_reads_as_which_way_its_code_moved() -> None:
    from service.report.alert_views import change_word

    assert change_word("improvement", -0.341, code=True) == "code shrank"
    assert change_word("regression", 0.019, code=True) == "code grew"
    assert change_word("regression", 0.0, code=True) == "code changed"  # equal size, other code (or spills)
    assert change_word("improvement", -0.341, code=False) == "improvement"


def test_a_commit_is_flagged_as_its_alert_reads_it() -> None:
    """Code that grew beside a measured speed-up is no regression (the alert is an improvement): the commits page
    flagged it red. Code growth alone, with nothing measured to change, still flags it."""
    from datetime import UTC, datetime

    from service.store.queries import CommitView, FindingView

    def finding(kind: str, direction: str) -> FindingView:
        return FindingView(id=1, series_id=1, series_label="s", metric="wall_time", commit_sha="b" * 40,
                           commit_subject="", previous_sha="a" * 40, direction=direction, magnitude=0.1,
                           confidence=5.0, value_before=1.0, value_after=1.1, unit="s", detector="d",
                           detector_version=1, kind=kind)

    def commit(*findings: FindingView) -> CommitView:
        return CommitView("demo", "b" * 40, "", "", datetime.now(UTC), 1, 1, list(findings), len(findings))

    assert not commit(finding("static", "regression"), finding("time", "improvement")).flagged
    assert commit(finding("static", "regression")).flagged
    assert commit(finding("static", "improvement"), finding("time", "regression")).flagged
    assert not commit().flagged
