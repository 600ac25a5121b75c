"""A pull request's comparison as GitHub markdown: the one comment the hook keeps up to date, and the check run's
output. PURE: a report and its labels in, text out (golden-file tested).

The changed benchmarks (regressions, head failures, improvements) are tabled up front, with each side's achieved
fraction of the roofline where the results carry one, the rest folded into <details>; a body that would pass
GitHub's limit (65,536 characters for a comment and for a check's summary) loses table rows from the end, and says
how many and where to see them all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlencode

from service.detect.compare import VERDICTS, Comparison, ComparisonReport, SideResult
from service.report.compare_table import (
    QUIET_CLAUSE,
    SMALL_EFFECT_CLAUSE,
    SideLabel,
    any_quiet,
    delta_cell,
    format_value,
    fraction_cell,
    has_fractions,
    markdown_cell,
    median_cell,
    tests_text,
)

MARKER = "<!-- kernelwatch:pr-comment -->"
RUN_COMMAND = "/kernelwatch run"  # the comment that schedules a pull request's runs again
GITHUB_LIMIT = 65_536
Conclusion = Literal["failure", "success", "neutral"]
_ICONS = {"failure": "❌", "success": "✅", "neutral": "⚪"}
_CHANGED = ("regression", "failed", "improvement")  # tabled first, in this order
_HEADER = "| benchmark | metric | base | head | delta | verdict |\n|---|---|---|---|---|---|"
_ROOFLINE_HEADER = ("| benchmark | metric | base | head | delta | verdict | of roofline |\n"
                    "|---|---|---|---|---|---|---|")
_PLURAL = {"regression": "regressions", "improvement": "improvements"}


@dataclass(frozen=True)
class CommentContext:
    """What the comparison is of, and where the dashboard shows it."""

    base: SideLabel
    head: SideLabel
    public_url: str = ""  # the dashboard's root; "" leaves links out
    notes: tuple[str, ...] = ()
    # Why there is no report, when there is none (no run of the merge-base, environments that differ...).
    missing_baseline: str = ""
    # Hardware whose runs could not be made, each with the runner's message, beside the hardware that did run
    # (KERNELWATCH_PR_HARDWARE=cpu,h200, the H200's checkout failing).
    unmeasured: tuple[tuple[str, str], ...] = ()


def compare_url(public_url: str, base: str, head: str, repository: str = "", verdict: str = "") -> str:
    """The dashboard's comparison page of two commits, optionally filtered to one verdict."""
    if not public_url:
        return ""
    query = {"base": base, "head": head, **({"repo": repository} if repository else {}),
             **({"verdict": verdict} if verdict else {})}
    return f"{public_url.rstrip('/')}/compare?{urlencode(query)}"


def conclusion(report: ComparisonReport | None) -> Conclusion:
    """failure: a regression, or a benchmark the head broke; neutral: nothing could be decided (no baseline, or
    every comparison inconclusive); success otherwise."""
    if report is None:
        return "neutral"
    if report.has_regression or any(_head_failed(row) for row in report.rows):
        return "failure"
    if not any(report.count(v) for v in ("regression", "improvement", "unchanged")):
        return "neutral"
    return "success"


def _head_failed(row: Comparison) -> bool:
    return row.verdict == "failed" and row.head is not None and row.head.estimate is None


def _base_failed(row: Comparison) -> bool:
    """Failed at the merge-base alone: a benchmark (or a suite) the pull request adds, which the merge-base
    cannot import."""
    return (row.verdict == "failed" and row.head is not None and row.head.estimate is not None
            and (row.base is None or row.base.estimate is None))


def overall(report: ComparisonReport | None, ctx: CommentContext) -> Conclusion:
    """The check's conclusion: a failure where a hardware's runs could not be made, whatever the others found (a
    success on the CPU's rows would pass a pull request whose H200 build broke)."""
    return "failure" if ctx.unmeasured else conclusion(report)


def headline(report: ComparisonReport | None, ctx: CommentContext) -> str:
    if ctx.unmeasured:
        hardware = ", ".join(name for name, _ in ctx.unmeasured)
        return f"not measured on {hardware}: its runs could not be made; " + _measured_headline(report, ctx)
    return _measured_headline(report, ctx)


def _measured_headline(report: ComparisonReport | None, ctx: CommentContext) -> str:
    if report is None:
        return "no baseline to compare with"
    regressions, failed = report.count("regression"), sum(1 for r in report.rows if _head_failed(r))
    total = len(report.rows)
    # A row is a benchmark's metric in one environment: the counts are of rows, the "in" of benchmarks.
    benchmarks = len({row.key.label for row in report.rows})
    of = f" in {benchmarks} benchmark{'s' if benchmarks != 1 else ''}" + (
        f" ({total} comparisons)" if total != benchmarks else "")
    if regressions or failed:
        parts = [_counted(regressions, "regression")] if regressions else []
        parts += [f"{failed} failed"] if failed else []
        return " and ".join(parts) + of
    undecided = report.count("inconclusive")
    # Benchmarks the pull request adds, or that failed at the merge-base alone: listed, so the headline says so.
    alone = sum(1 for row in report.rows if row.verdict == "new" or _base_failed(row))
    if conclusion(report) == "neutral":
        if undecided:
            return f"undecided: {undecided} inconclusive{of}"
        # The pull request that adds benchmarks (or the whole suite): the merge-base could not run them.
        if total and alone == total:
            return f"no baseline: the merge-base ran none of the {total} benchmark{'s' if total != 1 else ''}"
        return f"no baseline: {alone} of {total} benchmarks ran at the head alone" if alone else "nothing to compare"
    improvements = report.count("improvement")
    said = f"{_counted(improvements, 'improvement')}, no regression" if improvements else "no change"
    aside = [f"{undecided} inconclusive"] * bool(undecided) + [f"{alone} at the head alone"] * bool(alone)
    return said + of + (f" ({', '.join(aside)})" if aside else "")


def unmeasured_lines(ctx: CommentContext) -> list[str]:
    """Each hardware whose runs could not be made, with the runner's reason fenced as code (a fence longer than
    any run of backticks in it, so the reason cannot close it), and how to run them again."""
    lines: list[str] = []
    for name, message in ctx.unmeasured:
        shown, fence = public_reason(message)
        lines += ["", f"**Not measured on {markdown_cell(name)}**: its runs could not be made:", "",
                  fence, shown, fence]
    if lines:
        lines += ["", f"Comment `{RUN_COMMAND}` to run them again once that is fixed (the runner's log has the "
                      "whole error)."]
    return lines


def public_reason(message: str) -> tuple[str, str]:
    """A runner's failure as a pull request shows it, and the code fence that holds it (longer than any run of
    backticks in it, so the message cannot close it). The last line alone, short: the comment and the check run are
    public, and a build's or git's whole output may hold the runner's paths and hosts (its log keeps all of it)."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    shown = (lines[-1] if lines else "no message")[:500]
    return shown, "`" * max(3, max((len(run) for run in re.findall("`+", shown)), default=0) + 1)


def _counted(n: int, verdict: str) -> str:
    return f"{n} {_PLURAL.get(verdict, verdict) if n != 1 else verdict}"



def _side_cell(side: SideResult | None, unit: str) -> str:
    return median_cell(side, lambda v: format_value(v, unit))


def _delta_cell(row: Comparison, alpha: float) -> str:
    """The delta as `compare` prints it (with its p and runs B+H, which the notes refer to), a regression's change
    in bold; a failed row's first line of its error."""
    if row.verdict == "failed":
        failed = row.head if row.head is not None and row.head.estimate is None else row.base
        first = ((failed.message if failed else "") or "").strip().splitlines()[:1]
        return markdown_cell(first[0][:120]) if first else ""
    if row.p_value is None or row.q_value is None:
        return delta_cell(row, alpha)  # an untested row's change, said untested, or nothing
    change, _, detail = delta_cell(row, alpha).partition(" ")
    return f"**{change}** {detail}" if row.verdict == "regression" else f"{change} {detail}"


def _verdict_cell(row: Comparison) -> str:
    cell = {"regression": "🔴 regression", "improvement": "🟢 improvement", "failed": "⚠️ failed",
            "unchanged": "~", "inconclusive": "❔ inconclusive"}.get(row.verdict, row.verdict)
    return cell + (" (noisy host)" if row.noisy_runs else "")


def _row_line(row: Comparison, report: ComparisonReport, ctx: CommentContext, roofline: bool = False) -> str:
    """``roofline``: with the cell of each side's achieved fraction of the roofline."""
    label = markdown_cell(row.key.label)
    where = f" ({markdown_cell(row.key.environment)})" if _environments(report) > 1 else ""
    link = compare_url(ctx.public_url, ctx.base.commit, ctx.head.commit, ctx.head.repository,
                       row.verdict if row.verdict in _CHANGED else "")
    name = f"[{label}]({link}){where}" if link else f"{label}{where}"
    return (f"| {name} | {markdown_cell(row.key.metric)} | {_side_cell(row.base, row.key.unit)} | "
            f"{_side_cell(row.head, row.key.unit)} | {_delta_cell(row, report.params.alpha)} | {_verdict_cell(row)} |"
            + (f" {fraction_cell(row)} |" if roofline else ""))


def _environments(report: ComparisonReport) -> int:
    return len({row.key.environment for row in report.rows})


def _changed_order(row: Comparison) -> tuple[int, float, str]:
    rank = _CHANGED.index(row.verdict)
    size = abs(math.log(row.ratio)) if row.ratio and row.ratio > 0 and math.isfinite(row.ratio) else 0.0
    return (rank, -size, row.key.label)


SUBJECT_CHARACTERS = 72  # a commit subject's conventional width


def _commit(label: SideLabel) -> str:
    return f"`{label.commit[:12]}`" + (f" {markdown_cell(_subject(label.subject))}" if label.subject else "")


def _subject(subject: str) -> str:
    """A subject cut to SUBJECT_CHARACTERS, with no code span left open by the cut (an odd backtick would make
    code of the rest of the line)."""
    if len(subject) <= SUBJECT_CHARACTERS:
        return subject
    cut = subject[:SUBJECT_CHARACTERS - 1]
    if cut.count("`") % 2:
        cut = cut[:cut.rindex("`")]
    return cut.rstrip() + "…"


def format_comment(report: ComparisonReport | None, ctx: CommentContext, limit: int = GITHUB_LIMIT,
                   marker: bool = True) -> str:
    """The comment's markdown (``marker``: with the hidden line that finds it again, and the footer saying it is
    updated in place; without it, the check run's summary, which each push makes anew), at most ``limit``
    characters."""
    verdict = overall(report, ctx)
    full = compare_url(ctx.public_url, ctx.base.commit, ctx.head.commit, ctx.head.repository)
    top = [MARKER] if marker else []
    top.append(f"### {_ICONS[verdict]} KernelWatch: {headline(report, ctx)}")
    top.append("")
    top.append(f"Head {_commit(ctx.head)} against merge-base {_commit(ctx.base)}"
               + (f" · [full comparison]({full})" if full else ""))
    top += unmeasured_lines(ctx)
    if report is None:
        top += ["", f"No comparison: {markdown_cell(ctx.missing_baseline or 'the merge-base has no runs')}."]
        top += [f"> {markdown_cell(note)}" for note in ctx.notes]
        return _fit("\n".join(top) + "\n", limit)
    counts = [(v, report.count(v)) for v in VERDICTS]
    top += ["", "| " + " | ".join(_PLURAL.get(v, v) for v, _ in counts) + " |",
            "|" + "---|" * len(counts), "| " + " | ".join(str(n) for _, n in counts) + " |"]
    changed = sorted((r for r in report.rows if r.verdict in _CHANGED), key=_changed_order)
    rest = sorted((r for r in report.rows if r.verdict not in _CHANGED),
                  key=lambda r: (VERDICTS.index(r.verdict), r.key.label, r.key.metric))
    roofline = has_fractions(changed)
    changed_lines = [_row_line(r, report, ctx, roofline) for r in changed]
    rest_lines = [_row_line(r, report, ctx) for r in rest]
    tail = _footer(report, ctx, in_place=marker)
    # Rows are what can be cut; the head, counts and footer always stay, and changed rows go before the rest.
    # The headings and notes around the tables take a little room of their own: leave more until it fits.
    spare = 0 if len(report.rows) < 50 else 2000
    while True:
        budget = limit - sum(len(x) + 1 for x in [*top, *tail]) - spare
        text = _tables(report, top, tail, changed_lines, rest_lines, budget, full, roofline)
        if len(text) <= limit or budget <= 0:
            return _fit(text, limit)
        spare = spare * 2 + 1000


def _tables(report: ComparisonReport, top: list[str], tail: list[str], changed_lines: list[str],
            rest_lines: list[str], budget: int, full: str, roofline: bool) -> str:
    kept_changed = _take(changed_lines, budget)
    kept_rest = _take(rest_lines, budget - sum(len(x) + 1 for x in kept_changed))
    body = list(top)
    if changed_lines:
        body += ["", "#### Changed", "", _ROOFLINE_HEADER if roofline else _HEADER, *kept_changed]
        body += _cut_note(len(changed_lines) - len(kept_changed), full)
    if rest_lines:
        summary = ", ".join(_counted(n, v) for v in VERDICTS if v not in _CHANGED and (n := report.count(v)))
        body += ["", f"<details><summary>{summary}</summary>", "", _HEADER, *kept_rest]
        body += _cut_note(len(rest_lines) - len(kept_rest), full)
        body += ["", "</details>"]
    return "\n".join([*body, *tail]) + "\n"


def _take(lines: Sequence[str], budget: int) -> list[str]:
    kept: list[str] = []
    used = 0
    for line in lines:
        used += len(line) + 1
        if used > budget:
            break
        kept.append(line)
    return kept


def _cut_note(cut: int, full: str) -> list[str]:
    if cut <= 0:
        return []
    where = f"[the full comparison]({full})" if full else "`kernelwatch compare`"
    return ["", f"*{cut} more row{'s' if cut != 1 else ''} left out to stay within GitHub's size limit: "
                f"see {where}.*"]


def _footer(report: ComparisonReport, ctx: CommentContext, in_place: bool) -> list[str]:
    p = report.params
    lines = [""]
    if report.geomeans:
        lines += ["<details><summary>geometric means</summary>", "",
                  "| environment | metric | benchmarks | base | head | delta |", "|---|---|---|---|---|---|"]
        for g in report.geomeans:
            delta = f"{(g.ratio - 1) * 100:+.1f}%"
            if g.low is not None and g.high is not None:
                delta += f" [{(g.low - 1) * 100:+.1f}%, {(g.high - 1) * 100:+.1f}%]"
            lines.append(f"| {markdown_cell(g.environment)} | {markdown_cell(g.metric)} | {g.count} | "
                         f"{format_value(g.base, g.unit)} | {format_value(g.head, g.unit)} | {delta} |")
        lines += ["", "</details>", ""]
    quiet = f"; {QUIET_CLAUSE}" if any_quiet(report) else ""
    lines.append(f"<sub>Runs are the replicates (t-test on log run medians{quiet}). Significant: Benjamini-Hochberg "
                 f"q < {p.alpha:g} {tests_text(report.tests)} and \\|delta\\| ≥ "
                 f"{p.min_effect * 100:g}%; `~` unchanged (interval within ±{p.equivalence * 100:g}%"
                 + (f", or {SMALL_EFFECT_CLAUSE}"
                    if any(r.below_min_effect for r in report.rows) else "") + "); "
                 "`?` inconclusive (more runs would decide)." + (" Updated in place on every push." * in_place)
                 + "</sub>")
    reasons = dict.fromkeys(r.reason for r in report.rows if r.verdict == "inconclusive" and r.reason)
    lines += [f"<sub>inconclusive: {markdown_cell(reason)}</sub>" for reason in reasons]
    if any(r.noisy_runs for r in report.rows):
        lines.append("<sub>noisy host: the verdict rests on runs taken under heavy CPU steal.</sub>")
    lines += [f"> {markdown_cell(note)}" for note in ctx.notes]
    return lines


def _fit(text: str, limit: int) -> str:
    """The last resort when even the fixed parts are too long (thousands of notes): cut, and say so."""
    if len(text) <= limit:
        return text
    note = "\n\n*…cut to stay within GitHub's size limit.*\n"
    return text[: limit - len(note)] + note


def check_output(report: ComparisonReport | None, ctx: CommentContext,
                 limit: int = GITHUB_LIMIT - 1) -> dict[str, str]:
    """The check run's output: its title is the headline, its summary the comment without the marker."""
    return {"title": headline(report, ctx)[:250], "summary": format_comment(report, ctx, limit, marker=False)}


def status_description(report: ComparisonReport | None, ctx: CommentContext) -> str:
    """A commit status carries 140 characters and no neutral state: the headline says the rest."""
    return headline(report, ctx)[:140]
