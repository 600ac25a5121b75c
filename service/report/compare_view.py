"""What a reader of a comparison asked to see, applied to a report: PURE, a report in, a report or row indices out.

``restrict`` keeps the benchmarks whose label matches a pattern and recomputes each group's geomean over them, so
that ``--filter attention/`` reads as a comparison of the attention benchmarks (its summary, geomeans and exit
code included). ``listing`` then only chooses which of the kept rows are printed and in what order
(``--only-changed``, ``--sort``): hiding the unchanged rows must not move a geomean. ``should_fail`` is the exit
status rule of ``--fail-on``, in one place for ``compare`` and ``ci``.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the CLI builds its parser from this module's constants: no numpy and scipy for that
    from service.detect.compare import BenchmarkKey, Comparison, ComparisonReport, Geomean

SortOrder = Literal["name", "delta"]
FailOn = Literal["regression", "any", "none"]
SORT_ORDERS: tuple[SortOrder, ...] = ("name", "delta")
FAIL_ON: tuple[FailOn, ...] = ("regression", "any", "none")

# Metrics that measure speed; every other metric (a kernel's numerical error, a recall, a static count stored as
# a series) is a signal of its own and is reported in a section apart, so that a table of times is not read as
# a table of errors.
SPEED_METRICS = frozenset({"wall_time", "device_time", "execution_time", "algbw"})
# Rows worth a reader's eye under --only-changed: a significant change, or a benchmark that cannot be compared.
CHANGED_VERDICTS = frozenset({"regression", "improvement", "failed", "new", "missing"})


def is_speed(metric: str) -> bool:
    return metric in SPEED_METRICS


def parse_threshold(text: str) -> float:
    """A minimum effect as ``5%`` (a percentage) or ``0.05`` (a fraction); a bare number of 1 or more is refused
    rather than guessed at, since ``5`` could mean 5 % or 500 %."""
    raw = text.strip()
    percent = raw.endswith("%")
    try:
        value = float(raw[:-1].strip() if percent else raw)
    except ValueError:
        raise ValueError(f"a threshold is a percentage (5%) or a fraction (0.05), got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"a threshold is a non-negative percentage or fraction, got {text!r}")
    if percent:
        return value / 100
    if value >= 1:
        raise ValueError(f"threshold {text!r} is ambiguous: write {raw}% for a percentage, or a fraction below 1")
    return value


def compile_filter(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None


def _positive_medians(row: Comparison) -> tuple[float, float] | None:
    b = row.base.estimate if row.base is not None else None
    h = row.head.estimate if row.head is not None else None
    if row.ratio is None or b is None or h is None or b.median <= 0 or h.median <= 0:
        return None
    return b.median, h.median


def _geomean(rows: list[Comparison], whole: Geomean | None) -> Geomean | None:
    """The geomean of a group's kept rows; the report's own (with its bounds) when every member was
    kept, else a point estimate without bounds."""
    from service.detect.compare import Geomean

    members = [m for m in (_positive_medians(r) for r in rows) if m is not None]
    if not members:
        return None
    if whole is not None and whole.count == len(members):
        return whole
    key = rows[0].key
    base = math.exp(sum(math.log(b) for b, _ in members) / len(members))
    head = math.exp(sum(math.log(h) for _, h in members) / len(members))
    return Geomean(key.environment, key.metric, key.unit, len(members), base, head, head / base, None, None)


def restrict(report: ComparisonReport, pattern: re.Pattern[str] | None) -> ComparisonReport:
    """The report of the benchmarks whose label (``suite/name k=v ...``, or ``suite/name[k=v,...]``) the pattern
    finds, with geomeans over them; the report itself when there is no pattern. q-values are kept as they were:
    they were corrected over every test made, and a narrower view does not make fewer tests."""
    if pattern is None:
        return report
    # Also the key as run and ci print it (``suite/name[k=v,...]``): a benchmark's name copied from a run's output.
    kept = [r for r in report.rows if pattern.search(r.key.label) or pattern.search(suite_key(r.key))]
    groups: dict[tuple[str, str, str], list[Comparison]] = {}
    for row in kept:
        groups.setdefault((row.key.environment, row.key.metric, row.key.unit), []).append(row)
    wholes = {(g.environment, g.metric, g.unit): g for g in report.geomeans}
    geomeans = [g for group, rows in groups.items() if (g := _geomean(rows, wholes.get(group))) is not None]
    # Counted afresh from the rows kept (a report read a page at a time carries totals of the whole).
    return replace(report, rows=tuple(kept), geomeans=tuple(geomeans), totals=None)


def suite_key(key: BenchmarkKey) -> str:
    """The key the suite runs a benchmark by (``suite/name[k=v,...]``, runners/suite.py) of a compared one."""
    return f"{key.suite}/{key.name}[{','.join(f'{k}={v}' for k, v in key.params)}]"


def _size(row: Comparison) -> float:
    return abs(math.log(row.ratio)) if row.ratio is not None and row.ratio > 0 else -1.0


def listing(report: ComparisonReport, only_changed: bool = False, sort: SortOrder = "name") -> list[int]:
    """Indices of the rows to print: by label, or by the size of the change either way (largest first; rows
    without a ratio, such as failed, new or missing ones, last)."""
    if sort not in SORT_ORDERS:
        raise ValueError(f"sort is one of {', '.join(SORT_ORDERS)}, got {sort!r}")
    rows = report.rows
    indices = [i for i, r in enumerate(rows) if not only_changed or r.verdict in CHANGED_VERDICTS]
    if sort == "delta":
        indices.sort(key=lambda i: (-_size(rows[i]), rows[i].key.label, rows[i].key.metric))
    else:
        indices.sort(key=lambda i: (rows[i].key.label, rows[i].key.metric))
    return indices


def broke(row: Comparison) -> bool:
    """Measured in base, failing in head: worse than any slowdown, so a regression for ``--fail-on``."""
    return (row.verdict == "failed" and row.base is not None and row.base.estimate is not None
            and row.head is not None and row.head.estimate is None)


def should_fail(report: ComparisonReport, fail_on: FailOn) -> bool:
    """``regression``: a benchmark regressed or broke in head; ``any``: any row that is not unchanged (an
    improvement, a new, missing or failed benchmark too); ``none``: never."""
    if fail_on == "none":
        return False
    if fail_on == "regression":
        return any(r.verdict == "regression" or broke(r) for r in report.rows)
    if fail_on == "any":
        return any(r.verdict in CHANGED_VERDICTS for r in report.rows)
    raise ValueError(f"fail-on is one of {', '.join(FAIL_ON)}, got {fail_on!r}")


def fail_reason(report: ComparisonReport, fail_on: FailOn) -> str | None:
    """Why ``should_fail`` says fail, in a few words (what to look for in the table), or None where it does not:
    a job that ends with exit status 1 and no word of why sends its reader through the whole table."""
    if not should_fail(report, fail_on):
        return None
    if fail_on == "regression":
        counts = {"regressed": sum(1 for r in report.rows if r.verdict == "regression"),
                  "broken in head": sum(1 for r in report.rows if broke(r))}
    else:
        counts = {}
        for row in report.rows:
            if row.verdict in CHANGED_VERDICTS:
                counts[row.verdict] = counts.get(row.verdict, 0) + 1
    return ", ".join(f"{n} {what}" for what, n in counts.items() if n) + f" (--fail-on {fail_on})"
