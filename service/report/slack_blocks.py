"""Slack Block Kit messages about an alert: the one top-level message, and the thread replies that follow it.

Pure: plain records in (an ``AlertView``, hardware names, bisection verdicts), JSON-ready dicts out; checked
against golden files. Every message stays inside Slack's limits whatever it is given (an alert with a thousand
findings, a 20,000-character note): at most 50 blocks, 3,000 characters of section text, 150 of header. Past
those Slack refuses the whole message (``invalid_blocks``), and a refused message is an alert nobody sees.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from service.report.alert_views import change_word, worst_finding

if TYPE_CHECKING:
    from service.report.alert_views import AlertNoteView, AlertView

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
MAX_FIELD_TEXT = 2000
MAX_CONTEXT_TEXT = 2000
MAX_BUTTON_TEXT = 75
MAX_FALLBACK_TEXT = 3000  # Slack takes 40,000, but this is what notifications and screen readers show
MAX_SUBJECT = 300  # a commit subject that runs on is its body pasted in: the first lines say enough
FINDINGS_LISTED = 15  # the worst ones; the rest are one link away
NOTE_SECTIONS = 20  # a longer note is cut: the thread is a pointer to the alert, not its archive
SHORT_SHA = 12

_KIND_TITLE = {"regression": "Regression", "improvement": "Improvement", "mixed": "Mixed change"}
_PARTIAL_ENTITY = re.compile(r"&[a-z]*$")


@dataclass(frozen=True)
class SlackFinding:
    benchmark: str
    metric: str
    hardware: str
    direction: str  # regression | improvement
    magnitude: float  # relative change, after/before - 1
    noise_units: float  # the step in units of the series' noise (a time finding's; the stored "confidence")
    exact: bool = False  # a static finding: a count that changed, with no noise to measure it in
    unit: str = ""


@dataclass(frozen=True)
class SlackVerdict:
    """How a bisection or confirmation of one of the alert's series ended."""

    job_id: int
    purpose: str  # bisect | confirm
    state: str  # done | failed
    benchmark: str
    culprit_sha: str | None
    message: str


@dataclass(frozen=True)
class SlackAlert:
    id: int
    repository: str
    commit_sha: str
    commit_subject: str
    previous_sha: str | None
    state: str
    kind: str
    finding_count: int
    findings: tuple[SlackFinding, ...]  # worst first
    hardware: tuple[str, ...] = ()
    verdicts: tuple[SlackVerdict, ...] = ()
    url: str | None = None  # the alert on the dashboard; no button without one


@dataclass(frozen=True)
class SlackMessage:
    text: str  # the plain fallback: notifications, and clients that cannot draw blocks
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"text": self.text, "blocks": self.blocks}


def slack_alert(view: AlertView, hardware_of_series: Mapping[int, str], verdicts: Sequence[SlackVerdict] = (),
                url: str | None = None, hardware: Sequence[str] | None = None) -> SlackAlert:
    """The alert as the messages need it: ``view``'s findings (worst first) with the hardware of their series.
    ``hardware`` is every device kind of the alert, when ``view`` lists only its worst findings."""
    findings = tuple(
        SlackFinding(benchmark=f.benchmark, metric=f.metric, hardware=hardware_of_series.get(f.series_id, "?"),
                     direction=f.direction, magnitude=f.magnitude, noise_units=f.confidence,
                     exact=f.code, unit=f.unit)
        for f in view.findings)
    return SlackAlert(id=view.id, repository=view.repository, commit_sha=view.commit_sha,
                      commit_subject=view.commit_subject, previous_sha=view.previous_sha, state=view.state,
                      kind=view.kind, finding_count=view.finding_count, findings=findings,
                      hardware=tuple(sorted(set(hardware) if hardware is not None else {f.hardware for f in findings})),
                      verdicts=tuple(verdicts), url=url)


def escape(text: str) -> str:
    """Slack's mrkdwn treats these three as markup (``<url|label>``, ``<@user>``): a commit subject is text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def trim(text: str, limit: int) -> str:
    """At most ``limit`` characters, ending in an ellipsis when cut (and never inside an escaped entity)."""
    if len(text) <= limit:
        return text
    return _PARTIAL_ENTITY.sub("", text[: limit - 1]) + "…"


def short(sha: str | None) -> str:
    return sha[:SHORT_SHA] if sha else "(start)"


def alert_message(alert: SlackAlert) -> SlackMessage:
    """The alert's top-level message: posted once, then edited in place as its state and verdicts change."""
    blocks: list[dict[str, Any]] = [_header(_title(alert))]
    blocks.append({"type": "section", "fields": [
        _mrkdwn(f"*Commit*\n`{short(alert.commit_sha)}` {trim(escape(alert.commit_subject), MAX_SUBJECT)}"),
        _mrkdwn(trim(f"*Hardware*\n{escape(', '.join(alert.hardware)) or 'unknown'}", MAX_FIELD_TEXT)),
        _mrkdwn(trim(f"*Repository*\n{escape(alert.repository)}  `{short(alert.previous_sha)}.."
                     f"{short(alert.commit_sha)}`", MAX_FIELD_TEXT)),
        _mrkdwn(f"*State*\n{_state_text(alert)}"),
    ]})
    if alert.findings:
        blocks += _findings_sections(alert)
    if alert.verdicts:
        lines = [_verdict_line(v) for v in alert.verdicts]
        blocks += _sections(lines, MAX_SECTION_TEXT, limit=5, noun="verdict",
                            where=" on the dashboard" * bool(alert.url))
    if alert.url:
        blocks.append({"type": "actions", "elements": [{
            "type": "button", "text": _plain(trim(f"Open alert {alert.id}", MAX_BUTTON_TEXT)), "url": alert.url,
            "action_id": "open_alert"}]})
    return SlackMessage(text=trim(escape(_fallback(alert)), MAX_FALLBACK_TEXT), blocks=_fit(blocks))


def note_reply(note: AlertNoteView) -> SlackMessage:
    """A thread reply for a triage: the state change, the note, or both."""
    author = escape(note.author)
    if note.state_to is not None:
        head = f"*{author}* set the state to *{escape(note.state_to)}* (was {escape(note.state_from)})"
        plain = f"{note.author} set the state to {note.state_to} (was {note.state_from})"
    else:
        head = f"*{author}* noted"
        plain = f"{note.author} noted"
    blocks = [_section(trim(head, MAX_SECTION_TEXT))]
    if note.text.strip():
        blocks += _split_text(escape(note.text.strip()), NOTE_SECTIONS)
        plain += ": " + note.text.strip()
    # The fallback text is what notifications show, and Slack reads it as mrkdwn too: a note's `<!channel>` would
    # ping the channel from it while the blocks above show it escaped.
    return SlackMessage(text=trim(escape(plain), MAX_FALLBACK_TEXT), blocks=_fit(blocks))


def verdict_reply(verdict: SlackVerdict) -> SlackMessage:
    """A thread reply when a bisection or confirmation of one of the alert's series ended."""
    line = _verdict_line(verdict)
    return SlackMessage(text=trim(line.replace("*", "").replace("`", ""), MAX_FALLBACK_TEXT),
                        blocks=[_section(trim(line, MAX_SECTION_TEXT))])


def _title(alert: SlackAlert) -> str:
    kind = _KIND_TITLE.get(alert.kind, alert.kind.capitalize())
    count = f"{alert.finding_count} finding{'s' if alert.finding_count != 1 else ''}"
    title = f"{kind}: {count} at {short(alert.commit_sha)} in {alert.repository}"
    if alert.state in ("fixed", "invalid", "wontfix"):
        title = f"[{alert.state}] {title}"
    return title


def _state_text(alert: SlackAlert) -> str:
    if alert.finding_count == 0:
        return f"{escape(alert.state)} (no findings left at this range)"
    return escape(alert.state)


def _finding_line(f: SlackFinding) -> str:
    how = f"exact, in {escape(f.unit)}" if f.exact else f"{f.noise_units:.1f}× noise"
    return (f"`{f.magnitude:+.1%}` {change_word(f.direction, f.magnitude, f.exact)}  {escape(f.benchmark)}  "
            f"{escape(f.metric)} on "
            f"{escape(f.hardware)} ({how})")


def _findings_sections(alert: SlackAlert) -> list[dict[str, Any]]:
    listed = alert.findings[:FINDINGS_LISTED]
    lines = ["*Largest changes*"] + [trim(_finding_line(f), 500) for f in listed]
    return _sections(lines, MAX_SECTION_TEXT, limit=3, noun="finding",
                     more=max(0, alert.finding_count - len(listed)), where=" on the dashboard" * bool(alert.url))


def _verdict_line(v: SlackVerdict) -> str:
    what = "Bisection" if v.purpose == "bisect" else "Confirmation"
    bench = escape(v.benchmark)
    if v.state == "failed":
        return trim(f"*{what}* of {bench} gave up: {escape(v.message)}", MAX_SECTION_TEXT)
    if v.culprit_sha:
        verb = "found the culprit" if v.purpose == "bisect" else "confirmed the change at"
        return trim(f"*{what}* of {bench} {verb} `{short(v.culprit_sha)}`: {escape(v.message)}", MAX_SECTION_TEXT)
    return trim(f"*{what}* of {bench}: {escape(v.message)}", MAX_SECTION_TEXT)


def _fallback(alert: SlackAlert) -> str:
    text = f"{_title(alert)} ({trim(alert.commit_subject, MAX_SUBJECT)}), {alert.state}"
    worst = worst_finding(alert.findings, lambda f: f.exact)
    if worst is not None:
        text += f"; worst {worst.magnitude:+.1%} {worst.benchmark} {worst.metric} on {worst.hardware}"
    return text


def _sections(lines: Sequence[str], limit_chars: int, limit: int, noun: str = "line",
              more: int = 0, where: str = "") -> list[dict[str, Any]]:
    """Lines packed into as few sections as fit ``limit_chars`` each, at most ``limit`` sections; the lines that do
    not fit, and ``more`` left out before, are counted in a context line ("…and 3 more verdicts" + ``where``)."""
    sections: list[list[str]] = []
    for line in (trim(line, limit_chars) for line in lines):
        if sections and len("\n".join([*sections[-1], line])) <= limit_chars:
            sections[-1].append(line)
        else:
            sections.append([line])
    left = more + sum(len(section) for section in sections[limit:])
    blocks = [_section("\n".join(section)) for section in sections[:limit]]
    if left:
        blocks.append({"type": "context", "elements": [_mrkdwn(
            f"…and {left} more {noun}{'s' if left != 1 else ''}{where}")]})
    return blocks


def _split_text(text: str, limit: int) -> list[dict[str, Any]]:
    """Long text in sections of at most MAX_SECTION_TEXT, cut at a line break or space where there is one."""
    chunks: list[str] = []
    rest = text
    while rest and len(chunks) < limit:
        if len(rest) <= MAX_SECTION_TEXT:
            chunks.append(rest)
            rest = ""
            break
        window = rest[:MAX_SECTION_TEXT]
        cut = max(window.rfind("\n"), window.rfind(" "))
        if cut < MAX_SECTION_TEXT // 2:
            cut = MAX_SECTION_TEXT
        cut = len(_PARTIAL_ENTITY.sub("", rest[:cut])) or cut  # never split an escaped "&amp;"
        chunks.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        chunks[-1] = trim(chunks[-1] + " " + rest, MAX_SECTION_TEXT)
    return [_section(c) for c in chunks if c]


def _fit(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most MAX_BLOCKS, the last one saying that something was left out (the builders above stay well
    under the limit; this is the guarantee should one of them grow)."""
    if len(blocks) <= MAX_BLOCKS:
        return blocks
    return [*blocks[: MAX_BLOCKS - 1], {"type": "context", "elements": [_mrkdwn("…(cut to fit Slack)")]}]


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": _plain(trim(text, MAX_HEADER_TEXT))}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text)}


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text}


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": False}
