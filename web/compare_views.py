"""The commit page (``/commits/<sha>``: every benchmark of a commit against its measured parent) and the compare
page (``/compare?base=..&head=..``: any two commits or runs), benchstat style.

Both list a page of the comparison (``?page=``, ``limit``, ``sort``, ``verdict``) through the same helpers as
GET /api/v1/compare (``service.pipeline.compare_page``): every row is tested, a page lists some. What a user
names is resolved as the CLI resolves it; an unknown or ambiguous name is a 400 or 404 page that says which.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, current_app, render_template, request, url_for
from plotly.utils import PlotlyJSONEncoder
from sqlalchemy.orm import Session

from kernelwatch.digits import is_whole
from kernelwatch.errors import InvalidInput, NotComparable
from service.detect.compare import VERDICTS, CompareParams, Comparison, SideResult
from service.pipeline.compare import ResolvedSide, comparable_parent, resolve
from service.pipeline.compare_page import DEFAULT_LIMIT, SORTS, compare_page_for, parse_verdicts
from service.report.compare_table import (
    QUIET_CLAUSE,
    SMALL_EFFECT_CLAUSE,
    format_value,
    fraction_cell,
    has_fractions,
    median_cell,
    p_text,
    runs_needed_text,
)
from service.store.commit_compare import (
    KernelCountChange,
    commit_info,
    count_changes,
    kernel_counts,
)
from web.charts.compare import ratio_figure, row_label
from web.pages import add_filters, link_args

bp = Blueprint("compare", __name__, template_folder="templates")
MAX_PAGE_LIMIT = 1000  # rows a page lists (the API allows more; a browser table of 5,000 rows helps nobody)
KERNEL_ROWS = 20000  # kernel count rows read per side for the static diff; past it the diff says it is partial
STATIC_SHOWN = 200  # kernel count changes listed


@bp.app_context_processor
def _legend_words() -> dict[str, object]:
    """The legend's words for rows tested with their samples' spread, as every other face says them."""
    return {"quiet_clause": QUIET_CLAUSE, "small_effect_clause": SMALL_EFFECT_CLAUSE}


@dataclass(frozen=True)
class TableArgs:
    verdicts: set[str] | None
    sort: str
    page: int  # 1-based
    limit: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.limit


@dataclass(frozen=True)
class StaticDiff:
    changes: list[KernelCountChange]  # the first STATIC_SHOWN
    total: int
    kernels: int  # kernels seen on either side
    partial: bool  # a side had more kernel rows than were read



def _sessions() -> Any:
    return current_app.extensions["kernelwatch"].sessions


def _int(name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name) or ""
    if not raw:
        return default
    if not is_whole(raw) or not low <= int(raw) <= high:
        raise InvalidInput(f"{name} is a whole number from {low} to {high}, got {raw[:40]!r}")
    return int(raw)


def table_args() -> TableArgs:
    sort = request.args.get("sort") or "change"
    if sort not in SORTS:
        raise InvalidInput(f"sort is one of {', '.join(SORTS)}, got {sort[:80]!r}")
    return TableArgs(verdicts=parse_verdicts(request.args.get("verdict")), sort=sort,
                     page=_int("page", 1, 1, 10**6), limit=_int("limit", DEFAULT_LIMIT, 1, MAX_PAGE_LIMIT))


def _static_diff(session: Session, base: ResolvedSide, head: ResolvedSide) -> StaticDiff:
    base_counts = kernel_counts(session, base.run_ids, KERNEL_ROWS)
    head_counts = kernel_counts(session, head.run_ids, KERNEL_ROWS)
    changes = count_changes(base_counts, head_counts)
    kernels = len({(k.benchmark, k.isa, k.kernel) for k in [*base_counts, *head_counts]})
    return StaticDiff(changes=changes[:STATIC_SHOWN], total=len(changes), kernels=kernels,
                      partial=KERNEL_ROWS in (len(base_counts), len(head_counts)))


def _link(**changes: Any) -> str:
    """This page's URL with some arguments changed (None drops one); a new order or filter starts at page 1."""
    assert request.endpoint is not None and request.view_args is not None
    path_args = request.view_args
    # An argument named like a path part (?sha=) would clash with it: the path wins.
    args: dict[str, Any] = link_args(request.args, drop=path_args)
    args.update(changes)
    if "page" not in changes:
        args.pop("page", None)
    return url_for(request.endpoint, **path_args, **{k: v for k, v in args.items() if v is not None})


def _page_context(session: Session, base: ResolvedSide, head: ResolvedSide, args: TableArgs) -> dict[str, Any]:
    page = compare_page_for(session, base, head, CompareParams(), args.verdicts, args.sort, args.offset, args.limit)
    figure = ratio_figure(page.listed, page.report.geomeans)
    # A stored comparison is read a page at a time: its environments are those of its geomeans and listed rows.
    environments = {g.environment for g in page.report.geomeans} | {row.key.environment for row in page.listed}
    return {"page": page, "args": args, "link": _link, "verdicts": VERDICTS, "notes": page.outcome.notes,
            "figure": json.loads(json.dumps(figure, cls=PlotlyJSONEncoder)), "environments": sorted(environments),
            "roofline": has_fractions(page.listed)}


@bp.get("/commits/<sha>")
def commit_page(sha: str) -> str:
    args = table_args()
    repository = request.args.get("repo") or None
    with _sessions()() as session:
        head = resolve(session, sha, repository)
        info = commit_info(session, head.label.repository, head.label.commit)
        assert info is not None  # resolve found it
        parent = comparable_parent(session, info, head)
        if parent is None:
            return render_template("commit.html", info=info, head=head.label, base=None, page=None)
        base = resolve(session, parent, head.label.repository)
        try:
            context = _page_context(session, base, head, args)
        except NotComparable as exc:  # the parent ran this hardware under several toolchains, none the commit's
            return render_template("commit.html", info=info, head=head.label, base=None, page=None,
                                   not_compared=str(exc))
        static = _static_diff(session, base, head)
    outcome = context["page"].outcome  # the runs compared, as `compare` and the API count them
    return render_template("commit.html", info=info, head=head.label, base=outcome.base, static=static, **context)


@bp.get("/compare")
def compare() -> str | tuple[str, int]:
    base_ref, head_ref = (request.args.get("base") or "").strip(), (request.args.get("head") or "").strip()
    repository = request.args.get("repo") or None
    if not base_ref and not head_ref:
        return render_template("compare.html", base_ref="", head_ref="", repo=repository or "", page=None)
    if not base_ref or not head_ref:
        raise InvalidInput("give both base and head: each a run id, a commit sha or a unique sha prefix")
    args = table_args()
    with _sessions()() as session:
        base = resolve(session, base_ref, repository)
        head = resolve(session, head_ref, repository)
        context = _page_context(session, base, head, args)
        static = _static_diff(session, base, head)
    # The sides as compared: runs made in sessions the other side was not measured in are left out of them (the
    # page's note says so), and the header counts what `kernelwatch compare` and the API count; it counted every
    # run of each commit (19 and 16 runs on the demo's planted commit, where the CLI said 12 and 12).
    outcome = context["page"].outcome
    return render_template("compare.html", base_ref=base_ref, head_ref=head_ref, repo=repository or "",
                           base=outcome.base, head=outcome.head, static=static, **context)


# ---- how a comparison's cells read ----------------------------------------------------------------------------

def _estimate(side: SideResult | None, unit: str) -> str:
    """``1.234ms ±0.8%``: the median and the half-width of its 95 % interval relative to it."""
    return median_cell(side, lambda v: _geo(v, unit), plus_minus=" ±", whole_percent_from=10)


def _change(row: Comparison) -> str:
    if row.ratio is None:
        return "–"
    return f"{(row.ratio - 1) * 100:+.1f}%"


def _interval(row: Comparison) -> str:
    if row.ratio_low is None or row.ratio_high is None:
        return ""
    return f"[{(row.ratio_low - 1) * 100:+.1f}%, {(row.ratio_high - 1) * 100:+.1f}%]"


def _p(value: float | None) -> str:
    return "" if value is None else p_text(value)


def _geo(value: float, unit: str) -> str:
    return format_value(value, unit) + ("" if unit in ("s", "", "1") else f" {unit}")


def _signed_count(value: int | None) -> str:
    return "–" if value is None else f"{value:+,d}"


FILTERS: dict[str, Callable[..., str]] = {
    "estimate": _estimate, "change": _change, "interval": _interval, "p": _p, "signed_count": _signed_count,
    "row_label": row_label, "geo": _geo, "fraction": fraction_cell,
    "runs_needed": lambda row: runs_needed_text(row) or "",
}
add_filters(bp, FILTERS, prefix="cmp_")

