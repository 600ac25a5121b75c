"""The Diff page: two results side by side — op tables, HLO fusions, and one kernel's code aligned line by line.

``/diff?base=<result>&head=<result>[&kernel=<name>][&isa=<isa>][&full=1]``; ``/findings/<id>/diff`` resolves a
finding to its two results and the fusion/kernel its attribution ranked first and redirects there, so a link
from a finding stays right when attribution is recomputed. The diffs themselves are pure functions of
``service/report``; this module loads, chooses and renders. Everything shown from dumps is autoescaped text.

Two results of different benchmarks, metrics or hardware are compared as asked, under a warning: a fused and an
unfused variant side by side is a fair question, and only the URL asks it (findings always link one series'
two results). Malformed ids are 400, unknown results, findings or kernels 404, each a page that says which.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from kernelwatch.digits import is_whole
from runners.artifacts import ArtifactStore
from service.detect.attribution import reconcile
from service.detect.fusion_pairing import FusionPairing, FusionShape, pair_program_ops, source_function, source_text
from service.report.code_list_diff import KernelChoice, diff_fusion_lists, kernel_choices, pair_fusion_lists
from service.report.listing_diff import (
    CountDelta,
    ListingDiff,
    count_deltas,
    diff_listings,
    fold,
    format_count_deltas,
    hlo_align_key,
    hlo_coarse_key,
    op_mnemonic,
)
from service.report.op_table_diff import diff_op_tables
from service.store.diff_queries import FindingFigures, finding_diff_target, finding_figures, profiled_calls
from service.store.drilldown import (
    FusionRow,
    HloView,
    KernelListing,
    ResultHeader,
    hlo_view,
    kernel_listing,
    kernels,
    op_table,
    result_header,
)
from service.store.traces import TraceUnavailable, choose_trace, trace_timeline
from web.charts.timeline import TimelineSide, timeline_figure
from web.pages import add_filters, link_args, service_stores
from web.units import format_ns, format_share, format_value

bp = Blueprint("diff", __name__, template_folder="templates")

FOLD_CONTEXT = 6  # unchanged lines kept around each change when the listing is folded


def _signed_ns(value: float | None) -> str:
    if value is None:
        return "–"
    if value == 0:
        return "±0"
    return ("+" if value > 0 else "−") + format_ns(abs(value))


def _signed_points(value: float | None) -> str:
    """A change of share in percentage points."""
    return "–" if value is None else f"{value * 100:+.1f} pp"


def _signed(value: float | None, digits: int = 0) -> str:
    """A signed count: ``digits`` decimals where it has a fraction (a per-call average), none where it is whole
    ("+32", not "+32.00", beside the "1 → 33" it is the change of)."""
    if value is None:
        return "–"
    return f"{value:+,.{digits}f}" if digits and value != round(value) else f"{value:+,.0f}"


add_filters(bp, {"ns": format_ns, "share": format_share, "value": format_value, "signed_ns": _signed_ns,
                 "signed_points": _signed_points, "signed": _signed})


class DiffQueryError(Exception):
    """A query the page cannot answer; ``status`` is what it becomes (400: malformed, 404: unknown)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _result_id(name: str) -> int:
    raw = (request.args.get(name) or "").strip()
    if not raw:
        raise DiffQueryError(400, f"The {name} result is missing: give ?base=<result id>&head=<result id>.")
    if not is_whole(raw) or len(raw) > 18:  # 18 digits stay inside a BIGINT
        raise DiffQueryError(400, f"The {name} result must be a result id (a positive integer), not {raw[:40]!r}.")
    return int(raw)


@dataclass(frozen=True)
class CodeView:
    """The chosen fusion/kernel: its listing diff with the count deltas on top."""

    name: str
    isa: str | None  # None: an HLO fusion body, not compiled code
    base: KernelListing | None
    head: KernelListing | None
    diff: ListingDiff
    rows: list[Any]  # ListingRow | Fold, folded unless the page asked for everything
    base_addresses: list[str]
    head_addresses: list[str]
    class_deltas: list[CountDelta]
    mnemonic_deltas: list[CountDelta]
    notes: list[str]

    @property
    def summary(self) -> str:
        return format_count_deltas(self.mnemonic_deltas or self.class_deltas)


def _op_counts(listing: KernelListing | None) -> Counter[str]:
    """Mnemonics of a listing: one per x86/SASS row, one per op of an LLO bundle."""
    counts: Counter[str] = Counter()
    for row in listing.rows if listing is not None else ():
        if row.opcode:
            counts[row.opcode] += 1
        for cell in row.slots:
            counts.update(m for m in (op_mnemonic(op) for op in cell) if m is not None)
    return counts


def _address(listing: KernelListing, address: int) -> str:
    return str(address) if listing.is_bundled else f"{address:#06x}"


def _kernel_view(name: str, isa: str, base: KernelListing | None, head: KernelListing | None,
                 full: bool) -> CodeView:
    lines_b = [r.text for r in base.rows] if base is not None else []
    lines_h = [r.text for r in head.rows] if head is not None else []
    diff = diff_listings(lines_b, lines_h)
    notes = [f"{side}: {listing.note}" for side, listing in (("base", base), ("head", head))
             if listing is not None and listing.note]
    for side, listing in (("base", base), ("head", head)):
        if listing is None:
            notes.append(f"the {side} result has no kernel of this name: every line is "
                         f"{'inserted' if side == 'base' else 'deleted'}")
        elif listing.total_rows > len(listing.rows):
            notes.append(f"{side}: only the first {len(listing.rows):,} of {listing.total_rows:,} rows compared")
    return CodeView(
        name=name, isa=isa, base=base, head=head, diff=diff,
        rows=list(diff.rows) if full else fold(diff.rows, FOLD_CONTEXT),
        base_addresses=[_address(base, r.address) for r in base.rows] if base is not None else [],
        head_addresses=[_address(head, r.address) for r in head.rows] if head is not None else [],
        class_deltas=count_deltas(base.mix if base else {}, head.mix if head else {}),
        mnemonic_deltas=count_deltas(_op_counts(base), _op_counts(head)), notes=notes)


def _fusions(view: HloView | None) -> dict[str, list[FusionRow]]:
    return {m.name: m.fusions for m in view.modules} if view is not None else {}


def _op_pairing(base: HloView | None, head: HloView | None) -> FusionPairing | None:
    """The program's other ops of both sides paired by structure (``pair_program_ops``)."""
    if base is None or head is None:
        return None

    def shapes(view: HloView) -> list[list[FusionShape] | None]:
        return [None if m.program_ops is None else
                [FusionShape(m.name, o.name, o.fingerprint, o.opcode, None, o.op_name, source_text(o.source),
                             source_function(o.source), o.shape)
                 for o in m.program_ops] for m in view.modules]
    return pair_program_ops(shapes(base), shapes(head))


def _fusion_named(view: HloView | None, name: str | None) -> FusionRow | None:
    return next((f for fs in _fusions(view).values() for f in fs if f.name == name), None)


def _paired_names(pairing: FusionPairing, name: str) -> tuple[str | None, str | None]:
    """The base's and the head's name of the fusion ``name`` means (a head name first); ``name`` on both sides
    where it is no fusion's."""
    pair = pairing.find(name)
    return (pair.base_name, pair.head_name) if pair is not None else (name, name)


def _fusion_view(name: str, base: FusionRow | None, head: FusionRow | None, full: bool) -> CodeView | None:
    """The HLO of one fusion (its call and called computation) on both sides; None when neither has text."""
    def lines(f: FusionRow | None) -> list[str]:
        if f is None:
            return []
        return ([f.call.text.strip()] if f.call else []) + [t.text for t in f.body]

    def numbers(f: FusionRow | None) -> list[str]:
        if f is None:
            return []
        return ([str(f.call.number)] if f.call else []) + [str(t.number) for t in f.body]

    lines_b, lines_h = lines(base), lines(head)
    if not lines_b and not lines_h:
        return None
    diff = diff_listings(lines_b, lines_h, key=hlo_align_key, coarse=hlo_coarse_key)
    opcodes_b = Counter(hlo_coarse_key(x) for x in lines_b if "=" in x)
    opcodes_h = Counter(hlo_coarse_key(x) for x in lines_h if "=" in x)
    return CodeView(name=name, isa=None, base=None, head=None, diff=diff,
                    rows=list(diff.rows) if full else fold(diff.rows, FOLD_CONTEXT),
                    base_addresses=numbers(base), head_addresses=numbers(head), class_deltas=[],
                    mnemonic_deltas=count_deltas(opcodes_b, opcodes_h), notes=[])


def _explained(ops: Any, base: Any, head: Any) -> dict[str, Any] | None:
    """The op table's self-time change per call against the two results' median change, where both are times
    per call (a time metric in seconds, the op table per call); None otherwise."""
    if not ops.rows or not ops.per_call or base.unit != "s" or head.unit != "s" or base.metric != head.metric \
            or base.median is None or head.median is None:
        return None
    return reconcile(ops.total_delta_ns, (base.median * 1e9, head.median * 1e9),
                     (ops.base_total_ns, ops.head_total_ns))


def _finding_context(sessions: Any) -> FindingFigures | None:
    """The finding the page was opened from (``finding=N``, which /findings/N/diff adds), where it still exists."""
    raw = (request.args.get("finding") or "").strip()
    if not is_whole(raw) or len(raw) > 18:
        return None
    with sessions() as session:
        return finding_figures(session, int(raw))


def _choose(choices: Sequence[KernelChoice], name: str | None, isa: str | None) -> KernelChoice | None:
    if name is None:  # nothing asked for: the kernel whose code changed most, if any did
        return next((c for c in choices if c.status != "same"), None)
    return next((c for c in choices if c.name == name and (isa is None or c.isa == isa)), None)


def _timelines(store: ArtifactStore, base: ResultHeader, head: ResultHeader, pairing: FusionPairing,
               selected: str | None) -> tuple[dict[str, Any] | None, list[str]]:
    """Base above head on one time axis (each from its own first op), the selected fusion highlighted under its
    name on each side; a side whose trace cannot be drawn is left out and said why."""
    names = _paired_names(pairing, selected) if selected is not None else (None, None)
    sides, notes = [], []
    for label, header, name in (("base", base, names[0]), ("head", head, names[1])):
        try:
            sides.append(TimelineSide(label, trace_timeline(store, choose_trace(header, None)), name))
        except TraceUnavailable as exc:
            notes.append(f"{label}: {exc}")
    return (timeline_figure(sides) if sides else None), notes


def _render_error(error: DiffQueryError) -> tuple[str, int]:
    return render_template("diff.html", error=error.message, status=error.status), error.status


@bp.get("/diff")
def diff() -> tuple[str, int] | str:
    try:
        return _diff_page()
    except DiffQueryError as error:
        return _render_error(error)


def _diff_page() -> str:
    base_id, head_id = _result_id("base"), _result_id("head")
    wanted = (request.args.get("kernel") or "").strip() or None
    wanted_isa = (request.args.get("isa") or "").strip() or None
    full = request.args.get("full") == "1"
    sessions, store = service_stores()
    with sessions() as session:
        base, head = result_header(session, base_id), result_header(session, head_id)
        missing = [f"{side} result {rid}" for side, rid, h in (("base", base_id, base), ("head", head_id, head))
                   if h is None]
        if base is None or head is None:
            raise DiffQueryError(404, f"No {' and no '.join(missing)}: it may have been deleted, or the link is wrong.")
        hlo_b, hlo_h = hlo_view(session, base_id, store), hlo_view(session, head_id, store)
        # One pairing of the two sides' fusions, by structure, for the op table, the kernels and the HLO alike.
        pairing = pair_fusion_lists(_fusions(hlo_b), _fusions(hlo_h))
        # The op table's rows are fusions and the program's other ops alike: both pairings.
        op_table_pairing = pairing.merged(_op_pairing(hlo_b, hlo_h))
        ops = diff_op_tables(op_table(session, base_id), op_table(session, head_id),
                             profiled_calls(session, base_id), profiled_calls(session, head_id), op_table_pairing)
        choices = kernel_choices(kernels(session, base_id), kernels(session, head_id), pairing)
        chosen = _choose(choices, wanted, wanted_isa)
        code = fusion_code = None
        if chosen is not None:
            base_name = chosen.base_name or chosen.name
            code = _kernel_view(chosen.name, chosen.isa,
                                kernel_listing(session, base_id, base_name, store, isa=chosen.isa)
                                if chosen.status != "added" else None,
                                kernel_listing(session, head_id, chosen.name, store, isa=chosen.isa)
                                if chosen.status != "removed" else None, full)
    selected = chosen.name if chosen is not None else wanted
    if selected is not None:
        name_b, name_h = _paired_names(pairing, selected)
        fusion_b, fusion_h = _fusion_named(hlo_b, name_b), _fusion_named(hlo_h, name_h)
        fusion_code = _fusion_view(selected, fusion_b, fusion_h, full)
        if chosen is None and fusion_b is None and fusion_h is None:
            raise DiffQueryError(404, f"Neither result has a kernel or an HLO fusion named {selected!r}"
                                  + (f" for ISA {wanted_isa!r}" if wanted_isa else "") + ".")
    warnings = []
    if base.label != head.label or base.metric != head.metric:
        warnings.append(f"These results measure different things ({base.label} {base.metric} vs "
                        f"{head.label} {head.metric}): the diff compares them as asked, but deltas are not a "
                        "regression of one benchmark.")
    if base.hardware != head.hardware:
        warnings.append(f"Different hardware: {base.hardware} vs {head.hardware}.")
    fusion_rows = diff_fusion_lists(_fusions(hlo_b), _fusions(hlo_h), pairing)
    explained = _explained(ops, base, head)
    finding = _finding_context(sessions)
    hlo_notes = [f"{side}: {v.note}" for side, v in (("base", hlo_b), ("head", hlo_h)) if v is not None and v.note]
    timelines, timeline_notes = _timelines(store, base, head, op_table_pairing, selected)
    return render_template(
        "diff.html", error=None, base=base, head=head, ops=ops, choices=choices, chosen=chosen, selected=selected,
        code=code, fusion_code=fusion_code, fusion_rows=fusion_rows, hlo_notes=hlo_notes, warnings=warnings,
        explained=explained, finding=finding, fusion_pairing=pairing, timelines=timelines,
        reused_op_names=op_table_pairing.reused_names(), reused_fusion_names=pairing.reused_names(),
        timeline_notes=timeline_notes, full=full, args=link_args(request.args, drop=("full",)))


@bp.get("/findings/<int:finding_id>/diff")
def finding_diff(finding_id: int) -> Response | tuple[str, int]:
    sessions, _ = service_stores()
    with sessions() as session:
        target = finding_diff_target(session, finding_id)
    if target is None:
        return _render_error(DiffQueryError(404, f"No finding {finding_id}."))
    if target.base_result_id is None or target.head_result_id is None:
        side = "previous commit" if target.base_result_id is None else "commit"
        return _render_error(DiffQueryError(404, f"Finding {finding_id} has no stored result at its {side} to "
                                             "compare with."))
    args: dict[str, Any] = {"base": target.base_result_id, "head": target.head_result_id, "finding": finding_id}
    if target.name is not None:
        args["kernel"] = target.name
        if target.isa is not None:
            args["isa"] = target.isa
    return redirect(url_for("diff.diff", **args))
