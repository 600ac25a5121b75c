"""A comparison as a text table that reads like benchstat, and as JSON. PURE: a report in, text or a dict out.

One table per environment, metric and unit; per benchmark each side's centre (the geometric mean of its runs'
medians) with the half-width of its 95 % interval in percent, the delta with the run-level test's p-value and
the run counts (``~`` when the change is not significant), and the verdict (``?`` when the data cannot decide,
with the reason in a footnote); a geomean row closes each table. A table whose rows carry
roofline figures gains a column of each side's achieved fraction of the roofline (``12% → 9%``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from service.detect.compare import (
    MAX_RUNS_NEEDED,
    VERDICTS,
    BenchmarkKey,
    CompareParams,
    Comparison,
    ComparisonReport,
    Geomean,
    MedianEstimate,
    SideResult,
    Verdict,
)
from service.model.result_roofline import roof_fraction_text
from service.report.compare_view import is_speed

JSON_FORMAT = "kernelwatch.compare"
JSON_VERSION = 2  # 2: run-level statistics (runs per side, the test made, the inconclusive verdict)
COLUMNS = ("base", "head", "delta", "verdict")
ROOFLINE_COLUMN = "of roofline"
_SI = ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p"))
_NO_INTERVAL, _SMALL_EFFECT, _NOISY = "¹", "²", "³"
_REASON_MARKS = "⁴⁵⁶⁷⁸⁹"
SIGNALS_HEADING = "numerics and static signals"


@dataclass(frozen=True)
class SideLabel:
    """What one side of a comparison is: the user's reference resolved to a commit and its runs."""

    ref: str
    repository: str
    commit: str
    subject: str = ""
    runs: tuple[str, ...] = ()

    def text(self) -> str:
        runs = f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''}"
        subject = f' "{self.subject}"' if self.subject else ""
        return f"{self.repository}@{self.commit[:12]}{subject} ({runs})"


def format_value(value: float, unit: str) -> str:
    """Four significant digits; seconds get an SI prefix (``1.234ms``), other units are left to the header."""
    if unit == "s" and value != 0 and math.isfinite(value):
        for scale, prefix in _SI:
            if abs(value) >= scale * 0.99995 or scale == _SI[-1][0]:
                return f"{value / scale:.4g}{prefix}s"
    return f"{value:.4g}"


def estimate_cell(side: SideResult | None, unit: str) -> str:
    if side is None:
        return "-"
    if side.estimate is None:
        return side.status
    e: MedianEstimate = side.estimate
    value = format_value(e.median, unit)
    if e.low is None or e.high is None:
        return f"{value} ± ∞ {_NO_INTERVAL}"
    if e.median == 0:
        return f"{value} ± {format_value(max(e.high - e.median, e.median - e.low), unit)}"
    spread = relative_spread(e)
    assert spread is not None  # both ends known, the median not zero
    return f"{value} ± {spread_text(spread)}"


# Past this, a half-width in percent says nothing a reader can use: two runs a side (a t quantile of 12.7 on one
# degree of freedom) put the upper end of a log-scale interval hundreds of times above the median, which read as
# "± 64661%". Beyond it the interval is said to be wider than the value itself; the JSON keeps both ends.
SPREAD_SHOWN_UP_TO = 100.0


def spread_text(spread: float, whole_percent_from: float = 1.0) -> str:
    """An interval's half-width in percent of its median: one decimal below ``whole_percent_from``, whole above,
    ``>100%`` past :data:`SPREAD_SHOWN_UP_TO`."""
    if spread > SPREAD_SHOWN_UP_TO:
        return f">{SPREAD_SHOWN_UP_TO:.0f}%"
    return f"{spread:.1f}%" if spread < whole_percent_from else f"{spread:.0f}%"


def relative_spread(e: MedianEstimate) -> float | None:
    """The half-width of the median's 95 % interval in percent of it; None without an interval or at zero."""
    if e.low is None or e.high is None or e.median == 0:
        return None
    return max(e.high - e.median, e.median - e.low) / abs(e.median) * 100


def median_cell(side: SideResult | None, value: Callable[[float], str], plus_minus: str = " ± ",
                whole_percent_from: float = 1.0) -> str:
    """A side's median (as ``value`` writes it) and, where it has an interval, the interval's half-width in
    percent: one decimal below ``whole_percent_from``, whole above. ``–`` for no side, its status for no
    estimate. The PR comment's and the web page's cells; the text table's own (:func:`estimate_cell`) marks a
    missing interval instead."""
    if side is None:
        return "–"
    e = side.estimate
    if e is None:
        return side.status
    text = value(e.median)
    spread = relative_spread(e)
    if spread is None:
        return text
    return f"{text}{plus_minus}{spread_text(spread, whole_percent_from)}"


def fraction_text(value: float | None) -> str:
    """An achieved fraction of the roofline as a table cell shows it (service/model/result_roofline.py
    roof_fraction_text): whole percent, "on the roof" within the roof's noise, "above roof" past it."""
    return roof_fraction_text(value, above="above roof")


def fraction_cell(row: Comparison) -> str:
    """``12% → 9%``: each side's achieved fraction of the roofline; empty where neither side has one."""
    if row.base_fraction is None and row.head_fraction is None:
        return ""
    return f"{fraction_text(row.base_fraction)} → {fraction_text(row.head_fraction)}"


def has_fractions(rows: Sequence[Comparison]) -> bool:
    """Whether a table of these rows needs the roofline column."""
    return any(row.base_fraction is not None or row.head_fraction is not None for row in rows)


def _percent(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def p_text(value: float) -> str:
    """A p-value as every face prints it: three decimals, and "<0.001" rather than a p of zero."""
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def tests_text(tests: int) -> str:
    """The Benjamini-Hochberg family as the legends say it: "over 3 tests"; where no row had the runs to be tested
    (one run a side and no stored spread) there was no family, and "over 0 tests" read as a defect."""
    if tests == 0:
        return "over the rows tested (none here: no row had runs enough)"
    return f"over {tests} test{'s' if tests != 1 else ''}"


def pq_text(row: Comparison) -> str:
    """``p=0.049 q=0.098``: a tested row's p, and its Benjamini-Hochberg q where that reads otherwise: a p under
    alpha beside "?" is explained by the q the verdict was decided on (p=0.049 of two rows is q=0.098)."""
    assert row.p_value is not None
    text = f"p{'' if row.p_value < 0.001 else '='}{p_text(row.p_value)}"
    if row.q_value is not None and p_text(row.q_value) != p_text(row.p_value):
        text += f" q{'' if row.q_value < 0.001 else '='}{p_text(row.q_value)}"
    return text


def runs_needed_text(row: Comparison) -> str | None:
    """``≈14 runs a side to decide``: an inconclusive row's estimate of the runs that would settle it
    (``compare.runs_needed``), as every face says it; None where it has none."""
    if row.runs_needed is None:
        return None
    if row.runs_needed > MAX_RUNS_NEEDED:
        return f"over {MAX_RUNS_NEEDED} runs a side to decide"
    return f"≈{row.runs_needed} runs a side to decide"


def delta_cell(row: Comparison, alpha: float) -> str:
    if row.p_value is None or row.q_value is None:
        # Undecided for want of runs (one a side, no stored spread): the change measured is still worth reading,
        # said untested (a 7x slowdown's cell was blank); the verdict's footnote says why.
        if row.verdict == "inconclusive" and row.ratio is not None and math.isfinite(row.ratio):
            return f"{_percent(row.ratio)} (not tested)"
        return ""
    assert row.base is not None and row.base.estimate is not None
    assert row.head is not None and row.head.estimate is not None
    needed = runs_needed_text(row)
    detail = (f"({pq_text(row)} runs={row.base.estimate.runs}+{row.head.estimate.runs}"
              + (f"; {needed})" if needed else ")"))
    if row.verdict not in ("regression", "improvement") and not row.below_min_effect:
        # "~" is what the legend says it is, unchanged (the interval within the equivalence bound); an inconclusive
        # row's change is unknown, not nil, and reads "?" here as in its verdict and the PR comment's delta.
        return f"{'?' if row.verdict == 'inconclusive' else '~'} {detail}"
    change = _percent(row.ratio) if row.ratio is not None else ("+inf" if row.head.estimate.median > 0 else "0")
    return f"{change} {detail}"


def reason_marks(report: ComparisonReport) -> dict[str, str]:
    """A footnote mark per distinct reason an inconclusive verdict gives, in the order the rows give them."""
    reasons = dict.fromkeys(row.reason for row in report.rows if row.verdict == "inconclusive" and row.reason)
    return {reason: _REASON_MARKS[min(i, len(_REASON_MARKS) - 1)] for i, reason in enumerate(reasons)}


def verdict_cell(row: Comparison, marks: dict[str, str] | None = None) -> str:
    noisy = f" {_NOISY}" if row.noisy_runs else ""
    if row.verdict == "unchanged":
        return (f"~ {_SMALL_EFFECT}" if row.below_min_effect else "~") + noisy
    if row.verdict == "inconclusive":
        mark = (marks or {}).get(row.reason or "", "")
        return f"? {mark}".rstrip() + noisy
    return row.verdict + noisy


def geomean_cells(g: Geomean) -> list[str]:
    delta = _percent(g.ratio)
    if g.low is not None and g.high is not None:
        delta += f" [{_percent(g.low)}, {_percent(g.high)}]"
    return ["geomean", format_value(g.base, g.unit), format_value(g.head, g.unit), f"{delta} (n={g.count})", ""]


Group = tuple[tuple[str, str, str], list[Comparison]]


def groups(report: ComparisonReport, rows: Sequence[int] | None = None) -> tuple[list[Group], list[Group]]:
    """The tables to print, as (environment, metric, unit) and their rows: speed metrics first, then the
    numerics and static signals apart. ``rows``: the rows to list in that order (``compare_view.listing``),
    every row by label when None; a table with no row listed is left out."""
    order: dict[tuple[str, str, str], list[Comparison]] = {}
    for row in report.rows:  # tables in the report's order, which puts wall time first
        order.setdefault((row.key.environment, row.key.metric, row.key.unit), [])
    if rows is None:
        listed = sorted(report.rows, key=lambda r: r.key.label)
    else:
        listed = [report.rows[i] for i in rows]
    for row in listed:
        order[(row.key.environment, row.key.metric, row.key.unit)].append(row)
    kept = [(key, members) for key, members in order.items() if members]
    return ([g for g in kept if is_speed(g[0][1])], [g for g in kept if not is_speed(g[0][1])])


def geomean_of(report: ComparisonReport, group: tuple[str, str, str]) -> Geomean | None:
    return next((g for g in report.geomeans if (g.environment, g.metric, g.unit) == group), None)


def shown_line(report: ComparisonReport, rows: Sequence[int] | None) -> str | None:
    """Says that rows were hidden, so that a short table is not read as a short comparison."""
    if rows is None or len(rows) == len(report.rows):
        return None
    return f"showing {len(rows)} of {len(report.rows)} benchmark results (the summary counts all of them)"


def _layout(lines: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart; rows of one cell (titles, blank lines) are kept as they are."""
    widths = [0] * max((len(cells) for cells in lines), default=0)  # no line: a filter that listed nothing
    for cells in lines:
        if len(cells) > 1:
            for i, cell in enumerate(cells):
                widths[i] = max(widths[i], len(cell))
    out = []
    for cells in lines:
        if len(cells) <= 1:
            out.append("".join(cells))
        else:
            out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip())
    return out


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """Text as a terminal may print it: every control character (a commit subject's escape sequence could retitle
    the window or clear the screen) shown as ``\\xNN`` instead."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def terminal_text(text: str) -> str:
    """Several lines of text made safe as ``terminal_safe`` makes one: the line breaks kept, every other control
    character shown as ``\\xNN``."""
    return "\n".join(terminal_safe(line) for line in text.split("\n"))


def markdown_cell(text: str) -> str:
    """Stored text in a markdown table cell: a pipe would end the cell, a newline the row, and angle brackets
    could open HTML (the step summary and the PR comment render it)."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", " "))


def format_text(report: ComparisonReport, base: SideLabel, head: SideLabel, notes: Sequence[str] = (),
                rows: Sequence[int] | None = None) -> str:
    """``rows``: the rows to list, in that order (``compare_view.listing``); every row, by label, when None."""
    speed, signals = groups(report, rows)
    environments = sorted({row.key.environment for row in report.rows})
    header = [[f"base: {base.text()}"], [f"head: {head.text()}"]]
    if len(environments) == 1 and environments[0]:
        header.append([f"environment: {environments[0]}"])
    table: list[list[str]] = []
    marks = reason_marks(report)
    for section, members in (("", speed), (SIGNALS_HEADING, signals)):
        if section and members:
            table += [[""], [f"== {section} =="]]
        for (environment, metric, unit), listed in members:
            title = f"{metric} ({unit})" if unit else metric
            if len(environments) > 1:
                title += f" on {environment}"
            roofline = has_fractions(listed)
            table.append([""])
            table.append([title, *COLUMNS, *([ROOFLINE_COLUMN] if roofline else [])])
            for row in listed:
                table.append([row.key.label, estimate_cell(row.base, unit), estimate_cell(row.head, unit),
                              delta_cell(row, report.params.alpha), verdict_cell(row, marks),
                              *([fraction_cell(row)] if roofline else [])])
            g = geomean_of(report, (environment, metric, unit))
            if g is not None:
                table.append(geomean_cells(g) + ([""] if roofline else []))
    lines = [cells[0] for cells in header] + _layout(table)
    lines += ["", summary_line(report)]
    shown = shown_line(report, rows)
    if shown:
        lines.append(shown)
    lines.append(significance_line(report))
    lines += footnote_lines(report, any(_NO_INTERVAL in cell for cells in table for cell in cells), rows)
    lines += failure_lines(report)
    lines += [f"note: {note}" for note in notes]
    return "\n".join(terminal_safe(line) for line in lines) + "\n"


# Rows tested with their samples' spread (run_stats: runs as quiet as their samples; method "quiet" in the JSON and
# CSV) are said to be, once, in every face's legend (text, markdown, the PR comment, the compare page).
QUIET_CLAUSE = "where runs were as quiet as their samples, with the samples' spread too"
# What "unchanged" also holds where a row is one (every face's legend says it the same way).
SMALL_EFFECT_CLAUSE = "a significant change smaller than the minimum effect"


def any_quiet(report: ComparisonReport) -> bool:
    return any(row.method == "quiet" for row in report.rows)


def significance_line(report: ComparisonReport) -> str:
    """How the verdicts were reached, in one line: the test, the bars, and what "unchanged" promises."""
    p = report.params
    quiet = f"; {QUIET_CLAUSE}" if any_quiet(report) else ""
    return (f"runs are the replicates (t-test on log run medians{quiet}); significant: Benjamini-Hochberg q < "
            f"{p.alpha:g} "
            f"{tests_text(report.tests)} and |delta| >= {p.min_effect * 100:g}%; "
            f"~ unchanged: the {p.confidence * 100:g}% interval within ±{p.equivalence * 100:g}%"
            + (f" (or {_SMALL_EFFECT}: {SMALL_EFFECT_CLAUSE})"
               if any(row.below_min_effect for row in report.rows) else "") + "; ? inconclusive")


def footnote_lines(report: ComparisonReport, no_interval_shown: bool, rows: Sequence[int] | None = None) -> list[str]:
    """What the marks in the cells mean, for the marks that were printed: those of the ``rows`` listed (every row
    when None; `--only-changed` and `--filter` list fewer, and footnoted marks no listed row carried)."""
    p = report.params
    shown = report.rows if rows is None else [report.rows[i] for i in rows]
    lines = []
    if no_interval_shown:
        lines.append(f"{_NO_INTERVAL} one run and no stored spread between runs: no {p.confidence * 100:g}% "
                     "interval")
    if any(row.below_min_effect for row in shown):
        lines.append(f"{_SMALL_EFFECT} significant, but smaller than the minimum effect")
    if any(row.noisy_runs for row in shown):
        lines.append(f"{_NOISY} rests on runs taken under heavy CPU steal (the host was busy elsewhere): "
                     "measure again on a quieter host")
    reasons = {row.reason for row in shown if row.verdict == "inconclusive"}
    lines += [f"{mark} {reason}" for reason, mark in reason_marks(report).items() if reason in reasons]
    return lines


def failure_lines(report: ComparisonReport) -> list[str]:
    """Why each failed side failed: the first line of its message, cut short."""
    lines = []
    for row in report.rows:
        for name, side in (("base", row.base), ("head", row.head)):
            if side is not None and side.estimate is None:
                first = (side.message or "").strip().splitlines()[0:1]
                reason = first[0][:160] if first else "no reason given"
                lines.append(f"{row.key.label} ({row.key.metric}) failed in {name}: {reason}")
    return lines


def summary_line(report: ComparisonReport) -> str:
    plural = {"regression": "regressions", "improvement": "improvements"}
    parts = [f"{n} {plural.get(v, v) if n != 1 else v}" for v in VERDICTS if (n := report.count(v))]
    return ", ".join(parts) if parts else "nothing to compare"


def _num(value: float | None) -> float | None:
    # Twelve significant digits: exact enough for any reader, and free of last-bit noise between platforms.
    return None if value is None else float(f"{value:.12g}")


def _side_json(side: SideResult | None) -> dict[str, Any] | None:
    if side is None:
        return None
    e = side.estimate
    return {"status": side.status, "message": side.message, "n": e.n if e else 0, "runs": e.runs if e else 0,
            "noisy_runs": side.noisy_runs, "median": _num(e.median) if e else None,
            "ci_low": _num(e.low) if e else None, "ci_high": _num(e.high) if e else None}


def _label_json(label: SideLabel) -> dict[str, Any]:
    return {"ref": label.ref, "repository": label.repository, "commit": label.commit, "subject": label.subject,
            "runs": list(label.runs)}


def labels_from_json(document: dict[str, Any]) -> tuple[SideLabel, SideLabel]:
    """The two sides' labels of a ``to_json`` document (``subject`` is absent from documents stored before it
    was added: an empty one then)."""
    def label(side: dict[str, Any]) -> SideLabel:
        return SideLabel(ref=side["ref"], repository=side["repository"], commit=side["commit"],
                         subject=side.get("subject") or "", runs=tuple(side["runs"]))

    return label(document["base"]), label(document["head"])


def to_json(report: ComparisonReport, base: SideLabel, head: SideLabel, notes: Sequence[str] = (),
            rows: Sequence[int] | None = None) -> dict[str, Any]:
    """``rows``: the benchmarks to list (indices into the report's rows, in the order to list them), all when
    None; the summary and the geomeans always cover the whole comparison."""
    p = report.params
    listed = report.rows if rows is None else [report.rows[i] for i in rows]
    return {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "base": _label_json(base),
        "head": _label_json(head),
        "parameters": {"alpha": p.alpha, "min_effect": p.min_effect, "confidence": p.confidence,
                       "equivalence": p.equivalence, "tests": report.tests},
        "summary": {v: report.count(v) for v in VERDICTS},
        "benchmarks": [
            {"suite": r.key.suite, "name": r.key.name, "params": dict(r.key.params), "metric": r.key.metric,
             "unit": r.key.unit, "direction": r.key.direction, "environment": r.key.environment,
             "verdict": r.verdict, "base": _side_json(r.base), "head": _side_json(r.head),
             "ratio": _num(r.ratio), "ratio_ci_low": _num(r.ratio_low), "ratio_ci_high": _num(r.ratio_high),
             "p_value": _num(r.p_value), "q_value": _num(r.q_value), "below_min_effect": r.below_min_effect,
             "base_fraction": _num(r.base_fraction), "head_fraction": _num(r.head_fraction),
             "method": r.method, "df": _num(r.df), "reason": r.reason, "runs_needed": r.runs_needed}
            for r in listed
        ],
        "geomeans": [
            {"environment": g.environment, "metric": g.metric, "unit": g.unit, "count": g.count,
             "base": _num(g.base), "head": _num(g.head), "ratio": _num(g.ratio), "ratio_ci_low": _num(g.low),
             "ratio_ci_high": _num(g.high)}
            for g in report.geomeans
        ],
        "notes": list(notes),
    }


def _side_from_json(side: dict[str, Any] | None) -> SideResult | None:
    if side is None:
        return None
    estimate = None
    if side["median"] is not None:
        estimate = MedianEstimate(side["n"], side["median"], side["ci_low"], side["ci_high"], runs=side["runs"])
    return SideResult(side["status"], side["message"], estimate, side["noisy_runs"])


def comparison_from_json(r: dict[str, Any]) -> Comparison:
    """One benchmark of a ``to_json`` document (the fractions and the runs needed are absent from documents stored
    before they were added: none then)."""
    key = BenchmarkKey(suite=r["suite"], name=r["name"], params=tuple(r["params"].items()), metric=r["metric"],
                       unit=r["unit"], direction=r["direction"], environment=r["environment"])
    verdict: Verdict = r["verdict"]
    return Comparison(key, verdict, _side_from_json(r["base"]), _side_from_json(r["head"]),
                      ratio=r["ratio"], ratio_low=r["ratio_ci_low"], ratio_high=r["ratio_ci_high"],
                      p_value=r["p_value"], q_value=r["q_value"], below_min_effect=r["below_min_effect"],
                      base_fraction=r.get("base_fraction"), head_fraction=r.get("head_fraction"),
                      method=r["method"], df=r["df"], reason=r["reason"], runs_needed=r.get("runs_needed"))


def geomeans_from_json(document: dict[str, Any]) -> tuple[Geomean, ...]:
    return tuple(Geomean(g["environment"], g["metric"], g["unit"], g["count"], g["base"], g["head"], g["ratio"],
                         g["ratio_ci_low"], g["ratio_ci_high"]) for g in document["geomeans"])


def params_from_json(document: dict[str, Any]) -> CompareParams:
    p = document["parameters"]
    return CompareParams(alpha=p["alpha"], min_effect=p["min_effect"], confidence=p["confidence"],
                         equivalence=p["equivalence"])


def from_json(document: dict[str, Any]) -> tuple[ComparisonReport, tuple[str, ...]]:
    """The report and notes of a ``to_json`` document (a stored comparison), to the twelve significant digits
    it keeps: ``to_json`` of what this returns is the document again."""
    if document.get("format") != JSON_FORMAT or document.get("version") != JSON_VERSION:
        raise ValueError(f"not a {JSON_FORMAT} document of version {JSON_VERSION}")
    rows = [comparison_from_json(r) for r in document["benchmarks"]]
    report = ComparisonReport(params=params_from_json(document), rows=tuple(rows),
                              geomeans=geomeans_from_json(document), tests=document["parameters"]["tests"])
    return report, tuple(document["notes"])
