"""A comparison as GitHub-flavoured markdown (a CI job's step summary, a comment; a table whose rows carry roofline
figures gains the column of the achieved fractions) and as CSV (a spreadsheet, a script). PURE: a report in, text
out; the cells are the text table's (service/report/compare_table.py), so the three forms never disagree on a
number.

CSV has one row per benchmark result listed, under the stable columns of ``CSV_COLUMNS`` (README lists them):
numbers at twelve significant digits as in the JSON form, empty cells for what does not exist (a missing side, an
interval too few samples could give), params as ``k=v`` pairs joined by spaces.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

from service.detect.compare import Comparison, ComparisonReport, SideResult
from service.report.compare_table import (
    COLUMNS,
    ROOFLINE_COLUMN,
    SIGNALS_HEADING,
    SideLabel,
    delta_cell,
    estimate_cell,
    failure_lines,
    footnote_lines,
    fraction_cell,
    geomean_cells,
    geomean_of,
    groups,
    has_fractions,
    markdown_cell,
    reason_marks,
    shown_line,
    significance_line,
    summary_line,
    terminal_safe,
    verdict_cell,
)

CSV_COLUMNS = (
    "environment", "suite", "name", "params", "metric", "unit", "direction", "verdict",
    "base_status", "base_n", "base_median", "base_ci_low", "base_ci_high",
    "head_status", "head_n", "head_median", "head_ci_low", "head_ci_high",
    "ratio", "ratio_ci_low", "ratio_ci_high", "delta_percent", "p_value", "q_value", "below_min_effect",
    "base_roofline_fraction", "head_roofline_fraction",
    "base_runs", "head_runs", "method", "df", "reason", "runs_needed",
)
_VERDICT_MARK = {"regression": "🔴 regression", "improvement": "🟢 improvement", "failed": "❌ failed"}



def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(markdown_cell(c) for c in cells) + " |"


def _side_md(label: SideLabel) -> str:
    subject = f" {markdown_cell(label.subject)}" if label.subject else ""
    runs = f"{len(label.runs)} run{'s' if len(label.runs) != 1 else ''}"
    return f"`{label.repository}@{label.commit[:12]}`{subject} ({runs})"


def format_markdown(report: ComparisonReport, base: SideLabel, head: SideLabel, notes: Sequence[str] = (),
                    rows: Sequence[int] | None = None, title: str = "KernelWatch comparison") -> str:
    """A heading and summary, then one table per environment, metric and unit with its geomean row; metrics
    other than speed under a heading of their own."""
    speed, signals = groups(report, rows)
    marks = reason_marks(report)
    lines = [f"### {title}", "", f"**base** {_side_md(base)}  ", f"**head** {_side_md(head)}", "",
             f"**{summary_line(report)}**"]
    shown = shown_line(report, rows)
    if shown:
        lines += ["", f"_{shown}_"]
    for section, members in (("", speed), (SIGNALS_HEADING, signals)):
        if section and members:
            lines += ["", f"#### {section[0].upper()}{section[1:]}"]
        for (environment, metric, unit), listed in members:
            lines += ["", f"**{metric}**" + (f" ({unit})" if unit else "") + (f" on `{environment}`"
                                                                             if environment else ""), ""]
            roofline = has_fractions(listed)
            lines.append(_md_row(["benchmark", *COLUMNS, *([ROOFLINE_COLUMN] if roofline else [])]))
            lines.append("| --- | ---: | ---: | ---: | --- |" + (" ---: |" if roofline else ""))
            for row in listed:
                verdict = verdict_cell(row, marks)
                if row.verdict in _VERDICT_MARK:
                    verdict = _VERDICT_MARK[row.verdict] + verdict.removeprefix(row.verdict)
                lines.append(_md_row([f"`{row.key.label}`", estimate_cell(row.base, unit),
                                      estimate_cell(row.head, unit), delta_cell(row, report.params.alpha),
                                      verdict, *([fraction_cell(row)] if roofline else [])]))
            g = geomean_of(report, (environment, metric, unit))
            if g is not None:
                cells = geomean_cells(g)
                lines.append(_md_row([f"**{cells[0]}**", *cells[1:], *([""] if roofline else [])]))
    # Two trailing spaces, as each footnote line has: a hard line break, or CommonMark runs the first footnote on.
    lines += ["", markdown_cell(significance_line(report)) + ".  "]
    lines += [f"{markdown_cell(line)}  " for line in footnote_lines(report, any(" ± ∞ " in line for line in lines),
                                                                     rows)]
    failures = failure_lines(report)
    if failures:
        lines += ["", "<details><summary>Failures</summary>", ""]
        lines += [f"- {markdown_cell(line)}" for line in failures]
        lines += ["", "</details>"]
    if notes:
        lines.append("")
        lines += [f"> note: {markdown_cell(note)}  " for note in notes]
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.12g}"


def _delta_percent(ratio: float) -> str:
    """(ratio - 1) x 100 to the digits the ratio's own column gives (twelve significant, README), read from that
    column: a ratio near 1 leaves fewer of them to its change (1.0004158736 is +0.04158736 %), and reading it from
    the printed ratio makes the figure the same whether the report was made here or rebuilt from the service's
    JSON (`compare --url`). It was printed to six digits."""
    shown = float(_num(ratio))
    if shown == 0 or not math.isfinite(shown):
        return _num((shown - 1) * 100)
    decimals = max(0, 12 - (math.floor(math.log10(abs(shown))) + 1) - 2)
    return _num(round((shown - 1) * 100, decimals))


def _runs(side: SideResult | None) -> str:
    return str(side.estimate.runs) if side is not None and side.estimate is not None else "0"


def _side_cells(side: SideResult | None) -> list[str]:
    if side is None:
        return ["absent", "0", "", "", ""]
    e = side.estimate
    if e is None:
        return [side.status, "0", "", "", ""]
    return [side.status, str(e.n), _num(e.median), _num(e.low), _num(e.high)]


def _csv_row(row: Comparison) -> list[str]:
    k = row.key
    delta = "" if row.ratio is None else _delta_percent(row.ratio)
    return [k.environment, k.suite, k.name, " ".join(f"{name}={value}" for name, value in k.params), k.metric,
            k.unit, k.direction, row.verdict, *_side_cells(row.base), *_side_cells(row.head), _num(row.ratio),
            _num(row.ratio_low), _num(row.ratio_high), delta, _num(row.p_value), _num(row.q_value),
            "true" if row.below_min_effect else "false", _num(row.base_fraction), _num(row.head_fraction),
            _runs(row.base), _runs(row.head), row.method or "", _num(row.df), row.reason or "",
            "" if row.runs_needed is None else str(row.runs_needed)]


def format_csv(report: ComparisonReport, rows: Sequence[int] | None = None) -> str:
    """One line per benchmark result listed (every row, in the report's order, when None)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    listed = report.rows if rows is None else [report.rows[i] for i in rows]
    for row in listed:
        writer.writerow([terminal_safe(str(cell)) for cell in _csv_row(row)])
    return out.getvalue()
