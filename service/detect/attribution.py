"""Attribution of a finding: which ops moved, what changed in the HLO, and how the changed kernels' code differs.

Inputs are one :class:`Side` per commit (the op table of its profiled calls, and its static records) and,
optionally, a function that returns a kernel's disassembly. Output is a JSON-able dict (schema below).

What is comparable. An op table sums a profiled pass of ``calls`` benchmark calls, and the two commits need not
have the same number of calls (another sample count, several runs pooled), so raw totals are not comparable.
Everything is divided by the calls of its own side: *self time per call* is what an op adds to one call of the
benchmark, the quantity whose sum moved when the finding's time moved, so ops are ranked by its delta.
Occurrences per call are shown beside it (a loop that runs its body more often changes them, a slower body does
not), and so is self time per occurrence (the op's own speed). Where the calls are unknown they are estimated per
module as the most common occurrence count of its ops (most ops run once per call; ties to the smaller).

Fusions are paired by structure (``service.detect.fusion_pairing``: the fingerprint of the fused computation,
then its source line), never by name alone: XLA renumbers fusions when the graph changes, and a renumbered fusion
is the same fusion, a new one is new. The op table, the HLO and the kernels use that one pairing: an op that is a
fusion joins the op of its paired fusion (its ``base_op`` says the base's name where it differs), a kernel named
after a fusion (XLA CPU) joins its paired fusion's kernel. The program's other ops (sorts, convolutions, custom
calls, loops) are paired by structure the same way where both sides' records hold them (parser 3 on), else by
(module, op name). An op whose name is a kernel's symbol links the layers.

The summary leads with the highest ranked op that moved and whose HLO is not known to be unchanged (a fusion
paired ``same`` or ``renamed`` computes what it did); only when no other op moved does it name such an op, and
then says so ("with the same HLO"). ``ops.reconciliation`` compares the op table's summed self-time change per
call with the finding's own time change per call, unclamped (a share above 1 is said as it is).

Schema (``schema`` 2). ``C`` is ``{"before": x, "after": y, "delta": y - x}``; an absent side is ``null`` and
counts as 0 in the delta (an op that appeared, a kernel that was added)::

    {"schema": 2,
     "summary": "broadcast_add_fusion self time +41% (+12.0 µs/call); 3 more vfmadd231ps",
     "direction": "regression" | "improvement" | null,          # the finding's, which orders the ranking
     "ops": null | {                                             # null unless both sides have an op table
        "calls": {"before": n, "after": n}, "calls_estimated": bool,
        "self_ns_per_call": C,                                   # every op together
        "reconciliation": null | {"wall_ns_per_call": C,         # the finding's time per call, where it is one
                                  "op_self_ns_delta": float, "explained_share": float | null,  # op delta / wall delta
                                  "note": str},                                                # said in words
        "rows": [{"rank": 1, "module", "op", "category",
                  "base_op": null | str,                                # the base's name of a renumbered fusion
                  "structure": null | "same" | "renamed" | "changed" | "added" | "removed",  # null: not a fusion
                  "status": "appeared" | "vanished" | "grown" | "shrunk" | "unchanged",
                  "self_ns_per_call": C, "relative": float | null,      # after / before - 1
                  "share": float | null,                                # of the total per-call delta
                  "occurrences_per_call": C, "self_ns_per_occurrence": C}],
        "omitted": int},                                         # rows left off past the cap
     "static": null | <StaticDiff.as_dict(), see service/detect/static_diff.py>,   # null unless both sides
                                                                                  # have static records
     "fusions": [{"name", "base_name": null | str, "structure": null | <as in rows>,
                  "reasons": ["self time grew" | "self time shrank" | "self time unchanged" |
                              "appeared" | "vanished" | "code changed" | "hlo changed"],
                  "op": null | {"rank", "module", "self_ns_per_call": C, "relative"},
                  "hlo": null | {"module", "status": "added" | "removed" | "changed" | "unchanged",
                                 "structure", "names": {"before", "after"},
                                 "kind": {"before", "after"}, "instructions": C},
                  "kernels": [{"isa", "status": "added" | "removed" | "changed" | "unchanged" | "unknown",
                               "instructions": C, "bundles": C, "spills": C, "mix": {class: delta},
                               "mnemonics": null | {mnemonic: delta},        # from the disassembly
                               "text_diff": null | {"lines": [unified diff lines], "truncated": bool,
                                                    "omitted_lines": int}}]}]}

``fusions`` lists, at most ``max_fusions``, those whose HLO or code changed (or that appeared or vanished) first:
the ops that moved (appeared, vanished, or moved in the finding's
direction by at least ``explain_share`` of the total per-call delta) and have a kernel or an HLO fusion of their
name, in rank order; then the kernels the static diff found changed, largest change first. Text diffs and
mnemonic counts are given for kernels whose code changed, where the disassembly is at hand.

The pipeline adds ``"basis"`` (the commits and results it read), so a re-run can tell when nothing changed.
A truncated text diff ends with the line ``"... truncated: N more diff lines"``.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kernelwatch.vocabulary import ChangeKind
from service.detect.fusion_pairing import UNCHANGED, FusionPair, FusionPairing, join_ops
from service.detect.static_diff import KernelInfo, StaticDiff, StaticRecords, diff_static

# The rule a stored attribution was computed by: raised whenever what ``attribute`` returns for the same records
# changes (the pairing above all), so that `kernelwatch db upgrade` recomputes what an older rule stored
# (service/pipeline/attribution.py: refresh_stale_attributions); a finding whose series gets no new run is never
# attributed again otherwise. 2: fusions paired by structure, the op table reconciled; 3: the program's other ops
# paired, a renamed fusion whose computation and line both moved paired by kind, op and site (2026-12-03..07);
# 4: a kernel whose symbol moved between identical fusions (the same bytes) is no change, and a fusion paired by
# its site alone (pairing step 5) has the same result shape.
ATTRIBUTION_SCHEMA = 4

SideName = Literal["before", "after"]
# (side, isa, kernel name) → that kernel's disassembly, one instruction a line; None where not available.
DisassemblyFn = Callable[[SideName, str, str], Sequence[str] | None]


@dataclass(frozen=True)
class OpRecord:
    module: str
    op: str
    category: str
    occurrences: int
    self_ns: float
    total_ns: float = 0.0


@dataclass(frozen=True)
class OpTable:
    """The op statistics of ``calls`` profiled benchmark calls (pooled: the sums over several results)."""

    ops: Sequence[OpRecord]
    calls: int | None = None  # None: estimated per module from the occurrence counts


@dataclass(frozen=True)
class Side:
    ops: OpTable | None = None
    static: StaticRecords | None = None


@dataclass(frozen=True)
class AttributionParams:
    max_ops: int = 25  # op rows kept
    max_fusions: int = 5  # fusions explained with their code
    explain_share: float = 0.05  # an op is explained when it moved at least this share of the total delta
    max_diff_lines: int = 200  # text diff lines kept per kernel
    max_line_chars: int = 160
    max_input_lines: int = 20_000  # disassembly lines read per side (difflib is quadratic at worst)
    context_lines: int = 2


DEFAULT_PARAMS = AttributionParams()

_ADDRESS = re.compile(r"^\s*(?:0x[0-9a-fA-F]+:?|[0-9a-fA-F]+:)\s+")
_COMMENT = re.compile(r"/\*.*?\*/")
_MNEMONIC = re.compile(r"^[A-Za-z_][\w.]*$")


def normalise_line(line: str) -> str:
    """An instruction without its address or encoding comments, whitespace collapsed: what a diff should align."""
    text = _ADDRESS.sub("", _COMMENT.sub(" ", line))
    text = " ".join(text.split())
    return text[:-2] if text.endswith(" ;") else text.rstrip(";")


def mnemonic(line: str) -> str | None:
    for token in normalise_line(line).split(" "):
        if token.startswith("@") or not token:  # a SASS predicate guards the instruction that follows
            continue
        return token if _MNEMONIC.match(token) else None
    return None


def mnemonic_counts(lines: Sequence[str]) -> Counter[str]:
    return Counter(m for m in (mnemonic(line) for line in lines) if m is not None)


def text_diff(before: Sequence[str], after: Sequence[str], params: AttributionParams = DEFAULT_PARAMS,
              labels: tuple[str, str] = ("before", "after")) -> dict[str, Any]:
    """A unified diff of two disassemblies, addresses stripped, capped at ``max_diff_lines`` lines."""
    a = [normalise_line(x) for x in before[: params.max_input_lines]]
    b = [normalise_line(x) for x in after[: params.max_input_lines]]
    lines = [line.rstrip("\n") for line in difflib.unified_diff(a, b, labels[0], labels[1], n=params.context_lines,
                                                               lineterm="")]
    clipped = len(before) > params.max_input_lines or len(after) > params.max_input_lines
    kept = [x if len(x) <= params.max_line_chars else x[: params.max_line_chars - 1] + "…"
            for x in lines[: params.max_diff_lines]]
    omitted = max(0, len(lines) - params.max_diff_lines)
    if omitted:
        kept.append(f"... truncated: {omitted} more diff lines")
    if clipped:
        kept.append(f"... truncated: only the first {params.max_input_lines} instructions of each side compared")
    return {"lines": kept, "truncated": bool(omitted or clipped), "omitted_lines": omitted}


def _c(before: float | None, after: float | None) -> dict[str, Any]:
    delta = (after if after is not None else 0.0) - (before if before is not None else 0.0)
    return {"before": before, "after": after, "delta": delta if before is not None or after is not None else None}


def _estimated_calls(ops: Sequence[OpRecord]) -> dict[str, int]:
    by_module: dict[str, Counter[int]] = {}
    for op in ops:
        by_module.setdefault(op.module, Counter())[op.occurrences] += 1
    return {m: min(c for c, n in counts.items() if n == max(counts.values())) or 1 for m, counts in by_module.items()}


@dataclass(frozen=True)
class _PerCall:
    category: str
    self_ns: float
    occurrences: float
    per_occurrence: float


def _per_call(table: OpTable) -> tuple[dict[tuple[str, str], _PerCall], int | None]:
    estimated = _estimated_calls(table.ops) if not table.calls else {}
    out = {}
    for op in table.ops:
        calls = table.calls or estimated.get(op.module) or 1
        out[(op.module, op.op)] = _PerCall(op.category, op.self_ns / calls, op.occurrences / calls,
                                           op.self_ns / op.occurrences if op.occurrences else 0.0)
    return out, table.calls or (max(estimated.values()) if estimated else None)


def _rank_key(direction: ChangeKind | None) -> Callable[[dict[str, Any]], tuple[float, str, str]]:
    def key(row: dict[str, Any]) -> tuple[float, str, str]:
        delta = row["self_ns_per_call"]["delta"]
        order = (-delta if direction == ChangeKind.REGRESSION else delta if direction == ChangeKind.IMPROVEMENT
                 else -abs(delta))
        return (order, row["module"], row["op"])
    return key


def op_rows(before: OpTable | None, after: OpTable | None, direction: ChangeKind | None,
            params: AttributionParams = DEFAULT_PARAMS, pairing: FusionPairing | None = None,
            wall_ns_per_call: tuple[float, float] | None = None) -> dict[str, Any] | None:
    """The op tables before and after, per call, ranked by self-time delta in the finding's direction (growth
    first for a regression, shrinkage first for an improvement, the largest either way without a direction).
    None unless both sides have an op table: half a comparison would call every op "appeared". Ops that are
    fusions join through ``pairing`` (see ``join_ops``); ``wall_ns_per_call`` (before, after) is the finding's
    own time per call, against which the op table's total delta is reconciled."""
    if before is None or after is None:
        return None
    b, calls_b = _per_call(before)
    a, calls_a = _per_call(after)
    total_b = sum(p.self_ns for p in b.values())
    total_a = sum(p.self_ns for p in a.values())
    total_delta = total_a - total_b
    rows = []
    for key_b, key_a in join_ops(list(b), list(a), pairing):
        pb, pa = b.get(key_b) if key_b else None, a.get(key_a) if key_a else None
        key = key_a or key_b
        assert key is not None
        pair = None if pairing is None else (pairing.of_head(key_a[1]) if key_a else
                                             pairing.of_base(key_b[1]) if key_b else None)
        sb = pb.self_ns if pb is not None else 0.0
        sa = pa.self_ns if pa is not None else 0.0
        delta = sa - sb
        if pb is None:
            status = "appeared"
        elif pa is None:
            status = "vanished"
        else:
            status = "grown" if delta > 0 else "shrunk" if delta < 0 else "unchanged"
        category = pa.category if pa is not None else pb.category if pb is not None else "other"
        rows.append({
            "module": key[0], "op": key[1], "category": category, "status": status,
            "base_op": key_b[1] if key_b is not None and key_b != key else None,
            "structure": pair.status if pair is not None and pair.structural else None,
            "self_ns_per_call": _c(sb if pb is not None else None, sa if pa is not None else None),
            "relative": sa / sb - 1.0 if pb is not None and pa is not None and sb else None,
            "share": delta / total_delta if total_delta else None,
            "occurrences_per_call": _c(pb.occurrences if pb else None, pa.occurrences if pa else None),
            "self_ns_per_occurrence": _c(pb.per_occurrence if pb else None, pa.per_occurrence if pa else None),
        })
    rows.sort(key=_rank_key(direction))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return {"calls": {"before": calls_b, "after": calls_a}, "calls_estimated": not (before.calls and after.calls),
            "self_ns_per_call": _c(total_b, total_a),
            "reconciliation": reconcile(total_delta, wall_ns_per_call, (total_b, total_a)),
            "rows": rows[: params.max_ops], "omitted": max(0, len(rows) - params.max_ops), "_all": rows}


# How far a side's op self time per call may stand from its time per call for the two to be compared: past it the
# table does not measure what the time does (below).
COMPARABLE = 1.25


def reconcile(op_delta_ns: float, wall_ns_per_call: tuple[float, float] | None,
              op_ns_per_call: tuple[float, float] | None = None) -> dict[str, Any] | None:
    """What share of the finding's time change per call the op table's summed self-time change explains.

    Nothing is clamped: a share above 1 (the ops moved more than the benchmark's time) is reported as it is, with
    a note, since it means the two are not measuring the same thing (ops that overlap on threads, a profiled
    pass that ran slower than the timed samples, per-call division of a table whose call count is estimated).
    Where a side's summed self time per call (``op_ns_per_call``) is off its time per call by more than COMPARABLE
    either way, no share is given: the table measures something else there (on the demo's CPU host the ops of a
    softmax summed 8.8 ms a call over threads against a 3.0 ms median, and the page said the table explained 57 %
    of the change). None without the finding's times."""
    if wall_ns_per_call is None:
        return None
    wall_b, wall_a = wall_ns_per_call
    wall_delta = wall_a - wall_b
    share = op_delta_ns / wall_delta if wall_delta else None
    sides = zip(("base", "head"), op_ns_per_call, (wall_b, wall_a), strict=True) if op_ns_per_call else iter(())
    apart = [(side, ops, wall) for side, ops, wall in sides
             if wall > 0 and not 1 / COMPARABLE <= ops / wall <= COMPARABLE]
    if apart:
        side, ops, wall = apart[0]
        share = None
        note = (f"the op table's self time is {ops / wall:.2g}x the {side}'s time per call ({ops / 1e6:.3g} against "
                f"{wall / 1e6:.3g} ms: ops overlapping on threads, or a profiled pass slower than the timed one), so "
                "it says which ops moved, not what share of the time change they explain")
    elif share is None:
        note = "the finding's time did not change"
    elif share > 1.0:
        note = f"op table explains >100 % ({share:.0%}): its ops moved more than the benchmark's time did"
    elif share < 0.0:
        note = f"op table moved the other way ({share:.0%} of the time change)"
    else:
        note = f"op table explains {share:.0%} of the time change"
    return {"wall_ns_per_call": _c(wall_b, wall_a), "op_self_ns_delta": op_delta_ns, "explained_share": share,
            "note": note}


def _moved(row: dict[str, Any], direction: ChangeKind | None, total_delta: float, share: float) -> bool:
    delta = row["self_ns_per_call"]["delta"] or 0.0
    if row["status"] in ("appeared", "vanished"):
        return True
    if (direction == ChangeKind.REGRESSION and delta <= 0 or direction == ChangeKind.IMPROVEMENT and delta >= 0
            or delta == 0):
        return False
    return abs(delta) >= share * abs(total_delta) if total_delta else True


def _kernels_named(records: StaticRecords | None, name: str | None) -> dict[str, KernelInfo]:
    if records is None or name is None:
        return {}
    return {k.isa: k for k in (records.kernels or ()) if k.name == name}


@dataclass(frozen=True)
class _Target:
    """One fusion to explain: its base and head names (None: absent on that side) and its pair, if paired."""

    base: str | None
    head: str | None
    pair: FusionPair | None

    @property
    def name(self) -> str:
        name = self.head or self.base
        assert name is not None
        return name


def _target(base: str | None, head: str | None, pairing: FusionPairing | None) -> _Target:
    pair = None
    if pairing is not None:
        pair = (pairing.of_head(head) if head is not None else None) or (
            pairing.of_base(base) if base is not None else None)
    if pair is not None:
        return _Target(pair.base_name, pair.head_name, pair)
    return _Target(base or head, head or base, None)  # not a known fusion: by name, on both sides


def _row_target(row: dict[str, Any], pairing: FusionPairing | None) -> _Target:
    head = row["op"] if row["status"] != "vanished" else None
    base = row.get("base_op") or (row["op"] if row["status"] != "appeared" else None)
    return _target(base, head, pairing)


def _hlo_fusion(before: StaticRecords | None, after: StaticRecords | None, target: _Target) -> dict[str, Any] | None:
    def find(records: StaticRecords | None, name: str | None) -> tuple[str, Any] | None:
        for module in (records.modules or ()) if records is not None and name is not None else ():
            for fusion in module.fusions:
                if fusion.name == name:
                    return module.name, fusion
        return None

    fb, fa = find(before, target.base), find(after, target.head)
    module = fa[0] if fa is not None else fb[0] if fb is not None else None
    if module is None:
        return None
    b, a = (fb[1] if fb else None), (fa[1] if fa else None)
    if b is None or a is None:
        status = "added" if b is None else "removed"
    elif target.pair is not None and target.pair.structural:
        status = "unchanged" if target.pair.unchanged else "changed"
    else:
        status = "changed" if (b.kind, b.instructions) != (a.kind, a.instructions) else "unchanged"
    structure = target.pair.status if target.pair is not None and target.pair.structural else None
    return {"module": module, "status": status, "structure": structure,
            "names": {"before": b.name if b else None, "after": a.name if a else None},
            "kind": {"before": b.kind if b else None, "after": a.kind if a else None},
            "instructions": _c(b.instructions if b else None, a.instructions if a else None)}


def _kernel_diff(diff: StaticDiff | None, isa: str, target: _Target) -> Any:
    if diff is None:
        return None
    return next((k for k in diff.kernels if k.isa == isa
                 and (k.before.name if k.before else None) in (None, target.base)
                 and (k.after.name if k.after else None) in (None, target.head)), None)


def _kernel_entry(target: _Target, isa: str, kb: KernelInfo | None, ka: KernelInfo | None, diff: StaticDiff | None,
                  disassembly: DisassemblyFn | None, params: AttributionParams) -> dict[str, Any]:
    kd = _kernel_diff(diff, isa, target)
    compared = diff is not None and diff.compared_kernels
    status = kd.status if kd is not None else "unchanged" if compared else "unknown"
    mix = dict(kd.mix) if kd is not None else {}
    mnemonics = None
    text = None
    if disassembly is not None and status in ("added", "removed", "changed"):
        lines_b = disassembly("before", isa, kb.name) if kb is not None else []
        lines_a = disassembly("after", isa, ka.name) if ka is not None else []
        if lines_b is not None and lines_a is not None:
            delta = mnemonic_counts(lines_a)
            delta.subtract(mnemonic_counts(lines_b))
            mnemonics = {m: d for m, d in sorted(delta.items(), key=lambda kv: (-abs(kv[1]), kv[0])) if d}
            text = text_diff(lines_b, lines_a, params, (f"{target.base or target.name} (before)",
                                                        f"{target.head or target.name} (after)"))
    return {"isa": isa, "status": status,
            "instructions": _c(kb.instructions if kb else None, ka.instructions if ka else None),
            "bundles": _c(kb.bundles if kb else None, ka.bundles if ka else None),
            "spills": _c(kb.spills if kb else None, ka.spills if ka else None),
            "mix": mix, "mnemonics": mnemonics, "text_diff": text}


def _fusion_entry(target: _Target, row: dict[str, Any] | None, before: Side, after: Side, diff: StaticDiff | None,
                  disassembly: DisassemblyFn | None, params: AttributionParams) -> dict[str, Any]:
    reasons = []
    if row is not None:
        reasons.append({"appeared": "appeared", "vanished": "vanished", "grown": "self time grew",
                        "shrunk": "self time shrank"}.get(row["status"], "self time unchanged"))
    kb, ka = _kernels_named(before.static, target.base), _kernels_named(after.static, target.head)
    kernels = [_kernel_entry(target, isa, kb.get(isa), ka.get(isa), diff, disassembly, params)
               for isa in sorted(set(kb) | set(ka))]
    if any(k["status"] in ("added", "removed", "changed") for k in kernels):
        reasons.append("code changed")
    hlo = _hlo_fusion(before.static, after.static, target)
    if hlo is not None and hlo["status"] != "unchanged":
        reasons.append("hlo changed")
    op = None if row is None else {"rank": row["rank"], "module": row["module"],
                                   "self_ns_per_call": row["self_ns_per_call"], "relative": row["relative"]}
    return {"name": target.name, "base_name": target.base if target.base != target.name else None,
            "structure": target.pair.status if target.pair is not None and target.pair.structural else None,
            "reasons": reasons, "op": op, "hlo": hlo, "kernels": kernels}


_CHANGED_REASONS = frozenset({"appeared", "vanished", "code changed", "hlo changed"})


def format_ns(ns: float, signed: bool = False) -> str:
    """12034.0 → '12.0 µs' (with ``signed``: '+12.0 µs')."""
    size = abs(ns)
    value, unit = ((ns, "ns") if size < 1e3 else (ns / 1e3, "µs") if size < 1e6 else (ns / 1e6, "ms")
                   if size < 1e9 else (ns / 1e9, "s"))
    return f"{value:+.1f} {unit}" if signed else f"{value:.1f} {unit}"


def _code_phrase(kernel: dict[str, Any]) -> str | None:
    if kernel["mnemonics"]:
        m, d = next(iter(kernel["mnemonics"].items()))
        return f"{abs(d)} {'more' if d > 0 else 'fewer'} {m}"
    if kernel["mix"]:
        cls, d = sorted(kernel["mix"].items(), key=lambda kv: (-abs(kv[1]), kv[0]))[0]
        return f"{d:+d} {cls}"
    size = "bundles" if kernel["bundles"]["before"] is not None or kernel["bundles"]["after"] is not None \
        else "instructions"
    if kernel["status"] == "added":
        return f"new kernel ({kernel[size]['after']} {size})"
    if kernel["status"] == "removed":
        return f"kernel gone ({kernel[size]['before']} {size})"
    if kernel[size]["delta"]:
        return f"{kernel[size]['before']} → {kernel[size]['after']} {size}"
    return "code changed at equal size"


def _op_phrase(row: dict[str, Any]) -> str:
    change = row["self_ns_per_call"]
    name = f"{row['op']} (was {row['base_op']})" if row.get("base_op") else row["op"]
    if row["status"] == "appeared":
        return f"{name} appeared ({format_ns(change['after'])}/call)"
    if row["status"] == "vanished":
        return f"{name} vanished ({format_ns(-change['before'], signed=True)}/call)"
    relative = f"{row['relative']:+.0%} " if row["relative"] is not None else ""
    same = " with the same HLO" if row.get("structure") in UNCHANGED else ""
    return f"{name} self time {relative}({format_ns(change['delta'], signed=True)}/call){same}"


def _lead_row(ops: dict[str, Any] | None, direction: ChangeKind | None,
              params: AttributionParams) -> dict[str, Any] | None:
    """The op the summary leads with: the highest ranked one that moved and whose HLO is not known to be the
    same on both sides (a fusion paired ``same`` or ``renamed`` computes what it did: its time moving is not
    what changed); failing that, the top row, which the phrase then marks as having the same HLO."""
    if ops is None or not ops["_all"]:
        return None
    total = ops["self_ns_per_call"]["delta"] or 0.0
    for row in ops["_all"]:
        if row.get("structure") not in UNCHANGED and row["self_ns_per_call"]["delta"] \
                and _moved(row, direction, total, params.explain_share):
            return row
    top = ops["_all"][0]
    return top if top["self_ns_per_call"]["delta"] else None


def _summary(ops: dict[str, Any] | None, fusions: list[dict[str, Any]], diff: StaticDiff | None,
             static_first: bool, direction: ChangeKind | None = None,
             params: AttributionParams = DEFAULT_PARAMS) -> str:
    if static_first and diff is not None and diff.changed:
        changed = [k for f in fusions for k in f["kernels"] if k["mnemonics"]]
        phrase = _code_phrase(changed[0]) if changed else None
        return diff.summary() + (f"; {phrase}" if phrase else "")
    parts = []
    top = _lead_row(ops, direction, params)
    if top is not None:
        parts.append(_op_phrase(top))
    changed = [(f, k) for f in fusions for k in f["kernels"] if k["status"] in ("added", "removed", "changed")]
    own = [(f, k) for f, k in changed if top is not None and f["name"] == top["op"]]
    if own or changed:
        fusion, kernel = (own or changed)[0]
        phrase = _code_phrase(kernel)
        if phrase:
            parts.append(phrase if top is not None and fusion["name"] == top["op"] else f"{fusion['name']}: {phrase}")
    elif diff is not None and diff.changed:
        parts.append(diff.summary())
    if not parts:
        return "no op table or static change to attribute" if ops is None and (diff is None or not diff.changed) \
            else "no op moved and no static change"
    return "; ".join(parts)


def attribute(before: Side, after: Side, direction: ChangeKind | None = None,
              disassembly: DisassemblyFn | None = None,
              params: AttributionParams = DEFAULT_PARAMS, static_first: bool = False,
              wall_ns_per_call: tuple[float, float] | None = None) -> dict[str, Any]:
    """The attribution of a change between two commits (schema in the module docstring). ``static_first``: the
    summary leads with the static change (for a static finding) rather than with the op that moved most.
    ``wall_ns_per_call``: the finding's time per call (before, after), which the op table is reconciled with."""
    diff = diff_static(before.static, after.static) if before.static is not None and after.static is not None \
        else None
    pairing = diff.pairing if diff is not None else None
    ops = op_rows(before.ops, after.ops, direction, params, diff.op_table_pairing if diff is not None else None,
                  wall_ns_per_call)
    targets: list[tuple[_Target, dict[str, Any] | None]] = []
    rows_by_head: dict[str, dict[str, Any]] = {}
    rows_by_base: dict[str, dict[str, Any]] = {}
    if ops is not None:
        total = ops["self_ns_per_call"]["delta"] or 0.0
        for row in ops["_all"]:
            if row["status"] != "vanished":
                rows_by_head.setdefault(row["op"], row)
            if row["status"] != "appeared":
                rows_by_base.setdefault(row.get("base_op") or row["op"], row)
            if len(targets) < params.max_fusions and _moved(row, direction, total, params.explain_share):
                target = _row_target(row, pairing)
                if _kernels_named(before.static, target.base) or _kernels_named(after.static, target.head) \
                        or _hlo_fusion(before.static, after.static, target) is not None:
                    targets.append((target, row))
    if diff is not None:
        for kd in sorted(diff.kernels, key=lambda k: -abs(_size(k.after) - _size(k.before))):
            if len(targets) >= params.max_fusions:
                break
            target = _target(kd.before.name if kd.before else None, kd.after.name if kd.after else None, pairing)
            if all((t.base, t.head) != (target.base, target.head) for t, _ in targets):
                row = (rows_by_head.get(target.head) if target.head else None) or (
                    rows_by_base.get(target.base) if target.base else None)
                targets.append((target, row))
    fusions = [_fusion_entry(target, row, before, after, diff, disassembly, params) for target, row in targets]
    # What changed first (the Diff page opens the first): a fusion whose HLO or code is the same follows.
    fusions.sort(key=lambda f: not _CHANGED_REASONS.intersection(f["reasons"]))
    summary = _summary(ops, fusions, diff, static_first, direction, params)
    if ops is not None:
        del ops["_all"]
    return {"schema": ATTRIBUTION_SCHEMA, "summary": summary, "direction": direction, "ops": ops,
            "static": diff.as_dict() if diff is not None else None, "fusions": fusions}


def _size(k: KernelInfo | None) -> int:
    return 0 if k is None else int(k.bundles if k.bundles is not None else (k.instructions or 0))

