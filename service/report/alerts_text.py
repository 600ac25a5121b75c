"""Alerts as the plain text `kernelwatch alerts list` prints, and as its JSON document. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from service.report.compare_table import terminal_text

if TYPE_CHECKING:
    from service.report.alert_views import AlertView


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "(start)"


def alerts_to_text(alerts: Sequence[AlertView]) -> str:
    if not alerts:
        return "no alerts\n"
    lines: list[str] = []
    for a in alerts:
        lines.append(f"alert {a.id}  {a.state}  {a.kind}  {a.repository}  "
                     f"{_short(a.previous_sha)}..{_short(a.commit_sha)}  {a.commit_subject}")
        for f in a.findings:
            p = f", p={f.p_value:.2g}" if f.p_value is not None else ""
            how = f"exact, in {f.unit}" if f.code else f"{f.confidence:.1f} x noise{p}"
            lines.append(f"  {f.magnitude:+8.1%}  {f.change_word:<11}  {f.benchmark}  {f.metric}  "
                         f"({how}, {f.detector})")
        if a.finding_count > len(a.findings):  # the listing was capped: say so rather than look complete
            lines.append(f"  ... {a.finding_count - len(a.findings)} more finding(s)")
        for n in a.notes:
            change = f"{n.state_from} -> {n.state_to}" if n.state_to else "note"
            # A note's own lines are indented under it: at the margin, one could pass for another dated entry.
            text = (": " + n.text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\n      ")
                    if n.text else "")
            lines.append(f"  [{n.created_at:%Y-%m-%d %H:%M}] {n.author} {change}{text}")
    # Stored text (a commit subject, a note, a benchmark's name) may hold a terminal's escape sequences.
    return terminal_text("\n".join(lines)) + "\n"


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def alerts_to_json(alerts: Sequence[AlertView]) -> dict[str, Any]:
    return {"alerts": [_jsonable(dataclasses.asdict(a)) for a in alerts]}
