"""The Slack messages of an alert, against golden files, and inside Slack's limits whatever the alert holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from service.report.alert_views import AlertFindingView, AlertNoteView, AlertView
from service.report.slack_blocks import (
    MAX_BLOCKS,
    MAX_FALLBACK_TEXT,
    SlackMessage,
    SlackVerdict,
    alert_message,
    escape,
    note_reply,
    slack_alert,
    trim,
    verdict_reply,
)
from tests.fake_slack import limit_errors
from tests.golden import assert_golden

AT = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def finding(i: int, magnitude: float, direction: str = "regression", series_id: int | None = None,
            benchmark: str | None = None) -> AlertFindingView:
    return AlertFindingView(id=i, series_id=series_id if series_id is not None else i,
                            benchmark=benchmark or f"softmax/rows[cols=4096,rows={256 * i}]", metric="wall_time",
                            unit="s", direction=direction, magnitude=magnitude, confidence=12.5 + i, p_value=1e-4,
                            detector="edivisive")


def view(findings: list[AlertFindingView], state: str = "untriaged", kind: str = "regression",
         subject: str = "Fuse the softmax reduction", count: int | None = None) -> AlertView:
    return AlertView(id=42, repository="kernels", commit_sha="1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
                     commit_subject=subject, previous_sha="0f9e8d7c6b5a49382716051f2e3d4c5b6a798081",
                     previous_subject="Tidy", state=state, kind=kind, created_at=AT, updated_at=AT,
                     findings=findings, notes=[], finding_count=len(findings) if count is None else count)


def dump(message: SlackMessage) -> str:
    return json.dumps(message.as_json(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def assert_within_limits(message: SlackMessage) -> None:
    assert limit_errors(message.blocks) == []
    assert len(message.blocks) <= MAX_BLOCKS
    assert 0 < len(message.text) <= MAX_FALLBACK_TEXT


HARDWARE = {1: "cpu", 2: "TPU v5 lite", 3: "cpu"}
URL = "https://kernelwatch.example.com/?after=43#alert-42"


def test_new_alert_message() -> None:
    alert = slack_alert(view([finding(1, 0.52), finding(2, 0.31), finding(3, -0.12, "improvement")],
                             kind="mixed"), HARDWARE, url=URL)
    message = alert_message(alert)
    assert_within_limits(message)
    assert_golden("slack_alert_new.json", dump(message))


def test_alert_message_after_triage_and_bisection() -> None:
    verdicts = [SlackVerdict(job_id=7, purpose="bisect", state="done", benchmark="softmax/rows[cols=4096,rows=256]",
                             culprit_sha="1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
                             message="isolated 1a2b3c4d5e6f (Fuse the softmax reduction) after 3 runs"),
                SlackVerdict(job_id=8, purpose="confirm", state="failed", benchmark="softmax/rows[cols=4096,rows=512]",
                             culprit_sha=None, message="the confirm run could not be made: no runner")]
    alert = slack_alert(view([finding(1, 0.52), finding(2, 0.31)], state="fixed"), HARDWARE, verdicts, URL)
    message = alert_message(alert)
    assert_within_limits(message)
    assert message.blocks[0]["text"]["text"].startswith("[fixed] Regression: 2 findings")
    assert_golden("slack_alert_fixed.json", dump(message))


def test_an_alert_of_hundreds_of_findings_stays_within_the_limits() -> None:
    many = [finding(i, 0.01 * i, benchmark=f"suite/{'very_long_kernel_name_' * 12}{i}[rows={i}]")
            for i in range(600, 0, -1)]
    subject = "<script> & friends: " + "a very long subject " * 400
    alert = slack_alert(view(many, subject=subject), {i: f"gpu-{i % 7}" for i in range(601)}, url=URL)
    message = alert_message(alert)
    assert_within_limits(message)
    assert "<script>" not in json.dumps(message.blocks)  # escaped: Slack would read it as markup
    assert "…and 585 more findings on the dashboard" in json.dumps(message.blocks, ensure_ascii=False)
    assert_golden("slack_alert_many.json", dump(message))


def test_verdicts_past_the_sections_shown_are_counted() -> None:
    """Five sections of verdicts at most: the rest were dropped without a word."""
    verdicts = [SlackVerdict(job_id=i, purpose="confirm", state="done", benchmark=f"softmax/rows[rows={i}]",
                             culprit_sha=None, message=f"run {i}: " + "the spread between runs was wide " * 50)
                for i in range(12)]
    message = alert_message(slack_alert(view([finding(1, 0.52)]), HARDWARE, verdicts, URL))
    assert_within_limits(message)
    text = json.dumps(message.blocks, ensure_ascii=False)
    shown = sum(f"rows={i}]" in text for i in range(12))
    assert 0 < shown < 12 and f"…and {12 - shown} more verdicts on the dashboard" in text


def test_an_alert_without_a_page_has_no_button_and_an_emptied_one_says_so() -> None:
    message = alert_message(slack_alert(view([], count=0), {}))
    assert_within_limits(message)
    assert not [b for b in message.blocks if b["type"] == "actions"]
    assert "no findings left" in json.dumps(message.blocks)


def test_note_replies() -> None:
    change = AlertNoteView(author="ada", text="Looking at the <fusion> & its tiling.", state_from="untriaged",
                           state_to="investigating", created_at=AT)
    assert_golden("slack_reply_triage.json", dump(note_reply(change)))
    only_note = note_reply(AlertNoteView(author="kernelwatch", text="no findings left: they moved to alert 43",
                                         state_from="investigating", state_to=None, created_at=AT))
    assert only_note.blocks[0]["text"]["text"] == "*kernelwatch* noted"
    assert_within_limits(only_note)


def test_a_long_note_is_split_into_sections_then_cut() -> None:
    text = "\n".join(f"line {i}: " + "x" * 90 for i in range(2000))  # about 200,000 characters
    message = note_reply(AlertNoteView(author="ada", text=text, state_from="untriaged", state_to=None,
                                       created_at=AT))
    assert_within_limits(message)
    assert 2 < len(message.blocks) <= 21 and message.blocks[-1]["text"]["text"].endswith("…")
    assert message.blocks[1]["text"]["text"].startswith("line 0: ")
    medium = note_reply(AlertNoteView(author="ada", text="&" * 7000, state_from="untriaged", state_to=None,
                                      created_at=AT))
    assert_within_limits(medium)
    sections = [b["text"]["text"] for b in medium.blocks[1:]]
    assert "".join(sections) == "&amp;" * 7000  # split between entities, never inside one


def test_verdict_reply() -> None:
    verdict = SlackVerdict(job_id=7, purpose="bisect", state="done", benchmark="softmax/rows[rows=256]",
                           culprit_sha="1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
                           message="isolated 1a2b3c4d5e6f (Fuse) after 3 runs; it follows 0f9e8d7c6b5a")
    assert_golden("slack_reply_verdict.json", dump(verdict_reply(verdict)))


def test_trim_and_escape() -> None:
    assert trim("abcdef", 4) == "abc…" and trim("abc", 4) == "abc"
    assert trim(escape("a&b"), 4) == "a…"  # never half an entity
    assert escape("<@U123> & <!channel>") == "&lt;@U123&gt; &amp; &lt;!channel&gt;"


def test_a_static_finding_is_exact_not_in_units_of_noise() -> None:
    """Static findings are counts that changed: no noise to measure them in (their stored confidence is 1.0), so
    neither the Slack line nor the CLI's says "× noise"; they say the count is exact and in what unit."""
    from dataclasses import replace

    from service.report.alerts_text import alerts_to_text

    static = replace(finding(1, 0.25), metric="instructions", unit="instructions", confidence=1.0, p_value=None,
                     detector="static-diff")
    timed = finding(2, 0.3)
    alert = slack_alert(view([static, timed]), HARDWARE)
    text = json.dumps(alert_message(alert).as_json(), ensure_ascii=False)
    assert "instructions on cpu (exact, in instructions)" in text and "1.0× noise" not in text
    assert "14.5× noise" in text  # the time finding keeps its noise units
    listed = alerts_to_text([view([static, timed])])
    assert "(exact, in instructions, static-diff)" in listed and "1.0 x noise" not in listed
    assert "14.5 x noise, p=0.0001, edivisive" in listed


def test_the_fallback_text_escapes_what_slack_would_read_as_markup() -> None:
    """The fallback text is what a notification shows, and Slack parses it as mrkdwn: a note or subject saying
    `<!channel>` pinged the channel from it while the blocks showed it escaped."""
    note = note_reply(AlertNoteView(author="<@U123>", text="see <!channel> & <https://x|here>",
                                    state_from="untriaged", state_to=None, created_at=AT))
    alert = alert_message(slack_alert(view([finding(1, 0.5)], subject="<!here> fuse & tile"), HARDWARE, url=URL))
    for message in (note, alert):
        assert "<" not in message.text and ">" not in message.text, message.text
    assert "&lt;!channel&gt; &amp; &lt;https://x|here&gt;" in note.text and "&lt;!here&gt; fuse" in alert.text


def test_the_notification_text_names_the_worst_regression_as_the_inbox_does() -> None:
    """Slack's notification text took the largest change: a speed-up in a mixed alert, an instruction count beside
    the time it explains. It names what the inbox's 'worst change' does (web/views.py InboxEntry.worst)."""
    code = AlertFindingView(id=9, series_id=9, benchmark="softmax/rows[cols=4096,rows=1024]", metric="wall_time",
                            unit="s", direction="regression", magnitude=7.9, confidence=0.0, p_value=None,
                            detector="static-diff")
    mixed = alert_message(slack_alert(view([code, finding(1, -0.6, "improvement"), finding(2, 0.2)], kind="mixed"),
                                      HARDWARE, url=URL))
    assert "worst +20.0% softmax/rows[cols=4096,rows=512] wall_time" in mixed.text, mixed.text
    improvements = alert_message(slack_alert(view([finding(1, -0.6, "improvement")], kind="improvement"),
                                             HARDWARE, url=URL))
    assert "worst -60.0%" in improvements.text  # an improvement's alert: its largest change
