"""A comparison as a text table that reads like benchstat, and as JSON. PURE: a report in, text or a dict out.

One table per environment, metric and unit; per benchmark the median of each side with the half-width of its
95 % interval in percent, the delta of the medians with the Mann-Whitney p-value and the sample counts (``~``
when the change is not significant), and the verdict; a geomean row closes each table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from service.detect.compare import (
    VERDICTS,
    BenchmarkKey,
    CompareParams,
    Comparison,
    ComparisonReport,
    Geomean,
    MedianEstimate,
    SideResult,
    Verdict,
    min_samples_for_interval,
)

JSON_FORMAT = "kernelwatch.compare"
JSON_VERSION = 1
COLUMNS = ("base", "head", "delta", "verdict")
_SI = ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p"))
_NO_INTERVAL, _SMALL_EFFECT = "¹", "²"


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


def _estimate_cell(side: SideResult | None, unit: str) -> str:
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
    spread = max(e.high - e.median, e.median - e.low) / abs(e.median) * 100
    return f"{value} ± {spread:.1f}%" if spread < 1 else f"{value} ± {spread:.0f}%"


def _percent(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def _delta_cell(row: Comparison, alpha: float) -> str:
    if row.p_value is None or row.q_value is None:
        return ""
    assert row.base is not None and row.base.estimate is not None
    assert row.head is not None and row.head.estimate is not None
    detail = f"(p={row.p_value:.3f} n={row.base.estimate.n}+{row.head.estimate.n})"
    if row.q_value >= alpha:
        return f"~ {detail}"
    change = _percent(row.ratio) if row.ratio is not None else ("+inf" if row.head.estimate.median > 0 else "0")
    return f"{change} {detail}"


def _verdict_cell(row: Comparison) -> str:
    if row.verdict == "unchanged":
        return f"~ {_SMALL_EFFECT}" if row.below_min_effect else "~"
    return row.verdict


def _geomean_cells(g: Geomean) -> list[str]:
    delta = _percent(g.ratio)
    if g.low is not None and g.high is not None:
        delta += f" [{_percent(g.low)}, {_percent(g.high)}]"
    return ["geomean", format_value(g.base, g.unit), format_value(g.head, g.unit), f"{delta} (n={g.count})", ""]


def _groups(report: ComparisonReport) -> list[tuple[tuple[str, str, str], list[Comparison]]]:
    groups: dict[tuple[str, str, str], list[Comparison]] = {}
    for row in report.rows:
        groups.setdefault((row.key.environment, row.key.metric, row.key.unit), []).append(row)
    return list(groups.items())


def _layout(lines: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart; rows of one cell (titles, blank lines) are kept as they are."""
    widths = [0] * max(len(cells) for cells in lines)
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


def format_text(report: ComparisonReport, base: SideLabel, head: SideLabel, notes: Sequence[str] = ()) -> str:
    groups = _groups(report)
    environments = sorted({env for (env, _, _), _ in groups})
    header = [[f"base: {base.text()}"], [f"head: {head.text()}"]]
    if len(environments) == 1 and environments[0]:
        header.append([f"environment: {environments[0]}"])
    table: list[list[str]] = []
    for (environment, metric, unit), rows in groups:
        title = f"{metric} ({unit})" if unit else metric
        if len(environments) > 1:
            title += f" on {environment}"
        table.append([""])
        table.append([title, *COLUMNS])
        for row in sorted(rows, key=lambda r: r.key.label):
            table.append([row.key.label, _estimate_cell(row.base, unit), _estimate_cell(row.head, unit),
                          _delta_cell(row, report.params.alpha), _verdict_cell(row)])
        for g in report.geomeans:
            if (g.environment, g.metric, g.unit) == (environment, metric, unit):
                table.append(_geomean_cells(g))
    lines = [cells[0] for cells in header] + _layout(table)
    lines += ["", _summary(report)]
    p = report.params
    lines.append(f"significant: Benjamini-Hochberg q < {p.alpha:g} over {report.tests} test"
                 f"{'s' if report.tests != 1 else ''} and |delta| >= {p.min_effect * 100:g}%")
    if any(_NO_INTERVAL in cell for cells in table for cell in cells):
        lines.append(f"{_NO_INTERVAL} need >= {min_samples_for_interval(p.confidence)} samples for a "
                     f"{p.confidence * 100:g}% confidence interval")
    if any(row.below_min_effect for row in report.rows):
        lines.append(f"{_SMALL_EFFECT} significant, but smaller than the minimum effect")
    for row in report.rows:
        for name, side in (("base", row.base), ("head", row.head)):
            if side is not None and side.estimate is None:
                first = (side.message or "").strip().splitlines()[0:1]
                reason = first[0][:160] if first else "no reason given"
                lines.append(f"{row.key.label} ({row.key.metric}) failed in {name}: {reason}")
    lines += [f"note: {note}" for note in notes]
    return "\n".join(lines) + "\n"


def _summary(report: ComparisonReport) -> str:
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
    return {"status": side.status, "message": side.message, "n": e.n if e else 0,
            "median": _num(e.median) if e else None, "ci_low": _num(e.low) if e else None,
            "ci_high": _num(e.high) if e else None}


def to_json(report: ComparisonReport, base: SideLabel, head: SideLabel, notes: Sequence[str] = (),
            rows: Sequence[int] | None = None) -> dict[str, Any]:
    """``rows``: the benchmarks to list (indices into the report's rows, in the order to list them), all when
    None; the summary and the geomeans always cover the whole comparison."""
    p = report.params
    listed = report.rows if rows is None else [report.rows[i] for i in rows]
    return {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "base": {"ref": base.ref, "repository": base.repository, "commit": base.commit, "runs": list(base.runs)},
        "head": {"ref": head.ref, "repository": head.repository, "commit": head.commit, "runs": list(head.runs)},
        "parameters": {"alpha": p.alpha, "min_effect": p.min_effect, "confidence": p.confidence,
                       "resamples": p.resamples, "seed": p.seed, "tests": report.tests},
        "summary": {v: report.count(v) for v in VERDICTS},
        "benchmarks": [
            {"suite": r.key.suite, "name": r.key.name, "params": dict(r.key.params), "metric": r.key.metric,
             "unit": r.key.unit, "direction": r.key.direction, "environment": r.key.environment,
             "verdict": r.verdict, "base": _side_json(r.base), "head": _side_json(r.head),
             "ratio": _num(r.ratio), "ratio_ci_low": _num(r.ratio_low), "ratio_ci_high": _num(r.ratio_high),
             "p_value": _num(r.p_value), "q_value": _num(r.q_value), "below_min_effect": r.below_min_effect}
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
        estimate = MedianEstimate(side["n"], side["median"], side["ci_low"], side["ci_high"])
    return SideResult(side["status"], side["message"], estimate)


def from_json(document: dict[str, Any]) -> tuple[ComparisonReport, tuple[str, ...]]:
    """The report and notes of a ``to_json`` document (a stored comparison), to the twelve significant digits
    it keeps: ``to_json`` of what this returns is the document again."""
    if document.get("format") != JSON_FORMAT or document.get("version") != JSON_VERSION:
        raise ValueError(f"not a {JSON_FORMAT} document of version {JSON_VERSION}")
    p = document["parameters"]
    params = CompareParams(alpha=p["alpha"], min_effect=p["min_effect"], confidence=p["confidence"],
                           resamples=p["resamples"], seed=p["seed"])
    rows = []
    for r in document["benchmarks"]:
        key = BenchmarkKey(suite=r["suite"], name=r["name"], params=tuple(r["params"].items()), metric=r["metric"],
                           unit=r["unit"], direction=r["direction"], environment=r["environment"])
        verdict: Verdict = r["verdict"]
        rows.append(Comparison(key, verdict, _side_from_json(r["base"]), _side_from_json(r["head"]),
                               ratio=r["ratio"], ratio_low=r["ratio_ci_low"], ratio_high=r["ratio_ci_high"],
                               p_value=r["p_value"], q_value=r["q_value"], below_min_effect=r["below_min_effect"]))
    geomeans = tuple(Geomean(g["environment"], g["metric"], g["unit"], g["count"], g["base"], g["head"], g["ratio"],
                             g["ratio_ci_low"], g["ratio_ci_high"]) for g in document["geomeans"])
    report = ComparisonReport(params=params, rows=tuple(rows), geomeans=geomeans, tests=p["tests"])
    return report, tuple(document["notes"])
