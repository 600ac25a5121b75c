"""Two results' op tables joined, with the deltas of time, share and occurrences. PURE.

Ops that are fusions join through the fusion pairing where one is given (``service.detect.fusion_pairing``:
by structure, so a fusion XLA renumbered joins its own op, and a new fusion that took an old number is new);
every other op joins by (module, op).

Times are per benchmark call where both sides say how many calls their profiled pass made (a result's profile
runs as many calls as it has samples, and two results need not have the same count), else the raw totals of
each trace. Shares are each side's own: an op's self time over the sum of self times of its table, so they add
up to 1 per side without counting a nested op twice. An op on one side only is ``added`` or ``removed``, and its
missing side counts as 0 in the deltas.

Rows come largest absolute self-time change first, so whatever moved the total is on top whichever way it went.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from service.detect.fusion_pairing import FusionPairing, join_ops

OpStatus = Literal["added", "removed", "common"]


class OpLike(Protocol):
    """What is read of an op row (``service.store.drilldown.OpRow`` is one)."""

    @property
    def module(self) -> str: ...
    @property
    def op(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def occurrences(self) -> int: ...
    @property
    def self_ns(self) -> float: ...


@dataclass(frozen=True)
class Side:
    self_ns: float
    share: float
    occurrences: float


@dataclass(frozen=True)
class OpDiffRow:
    module: str
    op: str
    category: str
    status: OpStatus
    base: Side | None
    head: Side | None
    base_op: str | None = None  # the base's name of a fusion XLA renumbered
    structure: str | None = None  # the fusion pair's status (same, renamed, changed, ...); None: not a fusion

    @property
    def self_ns_delta(self) -> float:
        return (self.head.self_ns if self.head else 0.0) - (self.base.self_ns if self.base else 0.0)

    @property
    def relative(self) -> float | None:
        """head / base - 1, where both sides timed the op."""
        if self.base is None or self.head is None or not self.base.self_ns:
            return None
        return self.head.self_ns / self.base.self_ns - 1.0

    @property
    def share_delta(self) -> float:
        return (self.head.share if self.head else 0.0) - (self.base.share if self.base else 0.0)

    @property
    def occurrences_delta(self) -> float:
        return (self.head.occurrences if self.head else 0.0) - (self.base.occurrences if self.base else 0.0)


@dataclass(frozen=True)
class OpTableDiff:
    rows: tuple[OpDiffRow, ...]
    per_call: bool  # times and occurrences are per benchmark call (else per trace)
    base_total_ns: float
    head_total_ns: float

    @property
    def total_delta_ns(self) -> float:
        return self.head_total_ns - self.base_total_ns

    @property
    def added(self) -> int:
        return sum(1 for r in self.rows if r.status == "added")

    @property
    def removed(self) -> int:
        return sum(1 for r in self.rows if r.status == "removed")


def _sides(ops: Sequence[OpLike], calls: int | None) -> tuple[dict[tuple[str, str], tuple[str, Side]], float]:
    divisor = calls or 1
    total = sum(o.self_ns for o in ops)
    out: dict[tuple[str, str], tuple[str, Side]] = {}
    for o in ops:
        key = (o.module, o.op)
        if key in out:  # one row per (module, op) is the store's rule; sum rather than drop if it is broken
            category, prev = out[key]
            out[key] = (category, Side(prev.self_ns + o.self_ns / divisor, prev.share + (o.self_ns / total if total
                                       else 0.0), prev.occurrences + o.occurrences / divisor))
            continue
        out[key] = (o.category, Side(o.self_ns / divisor, o.self_ns / total if total else 0.0,
                                     o.occurrences / divisor))
    return out, total / divisor


def diff_op_tables(base: Sequence[OpLike], head: Sequence[OpLike], base_calls: int | None = None,
                   head_calls: int | None = None, pairing: FusionPairing | None = None) -> OpTableDiff:
    """Join two op tables (see the module docstring); calls given on both sides make the times per call."""
    per_call = bool(base_calls and head_calls)
    b, base_total = _sides(base, base_calls if per_call else None)
    h, head_total = _sides(head, head_calls if per_call else None)
    rows = []
    for key_b, key_h in join_ops(list(b), list(h), pairing):
        bs, hs = b.get(key_b) if key_b else None, h.get(key_h) if key_h else None
        key = key_h or key_b
        assert key is not None
        pair = None if pairing is None else (pairing.of_head(key_h[1]) if key_h else
                                             pairing.of_base(key_b[1]) if key_b else None)
        status: OpStatus = "added" if bs is None else "removed" if hs is None else "common"
        category = hs[0] if hs is not None else bs[0] if bs is not None else ""
        rows.append(OpDiffRow(key[0], key[1], category, status, bs[1] if bs else None, hs[1] if hs else None,
                              key_b[1] if key_b is not None and key_b != key else None,
                              pair.status if pair is not None and pair.structural else None))
    rows.sort(key=lambda r: (-abs(r.self_ns_delta), r.module, r.op))
    return OpTableDiff(tuple(rows), per_call, base_total, head_total)
