"""Which head fusion is which base fusion: paired by what they compute, not by the number XLA gave them.

XLA renumbers fusions (``fusion.3``, ``loop_fusion.1``, ``ynn_fusion.2``) whenever the graph around them
changes, so a name on one side may be another computation on the other. Each fusion is described by its
structure (:class:`FusionShape`): ``fingerprint`` is the parser's hash of its kind, result shape and the canonical
text of its fused computation (instruction and computation names replaced by their order, metadata dropped; the
computation's parameters carry the operand shapes), and ``source`` the ``file:line`` its metadata points at.

The pairing, per module (modules by name), in this order, each step among what the earlier ones left:

1-2. ``same`` (the same name) or ``renamed`` (another name: the same fusion, renumbered): the same fingerprint.
   Where a fingerprint has several candidates on a side (two identical dots), pairs with the same source line go
   first, then those with the same name, then those whose names share a stem (the name without its ``.N``),
   then by name: deterministic. So an identical computation XLA gave an old number to, written elsewhere, is
   not taken for the one that had that number.
3. ``changed``: the same name, a different fingerprint, and the same kind and op (the jax op its metadata names,
   where both sides name one): the fusion whose computation changed.
4. ``changed`` too: another name, a different fingerprint, but the same kind, op and source line (both known):
   renumbered and changed. Candidates are taken in name order.
5. ``changed`` too: another name, a different fingerprint, the same kind, op, source file and function, on
   another line (an edit above it moved it: ``multiply_add_fusion`` became ``add_add_fusion`` one line down),
   where that site is one fusion's on each side and the two produce the same result shape (where both records
   name one): a layernorm's scale-and-shift ``f32[512,512]`` that fused away and a sum of three dots
   ``f32[512,256]`` that appeared, both an ``add`` of one function, read as one fusion "renumbered".
6. what is left is ``removed`` (base only) or ``added`` (head only).

A fusion without a fingerprint (a record parsed before fingerprints were stored) pairs by name alone: ``same``
where its kind and instruction count agree, else ``changed``; it never pairs structurally.

The program's other ops (``ProgramOp`` of the HLO parser: sorts, convolutions, custom calls, loops), which XLA
renumbers too, pair the same way among themselves (their ``kind`` is the opcode); :meth:`FusionPairing.merged`
joins the two pairings for an op table, where fusions and other ops are rows alike.

PURE: records in, a typed pairing out.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

PairStatus = Literal["same", "renamed", "changed", "added", "removed"]
UNCHANGED: frozenset[str] = frozenset({"same", "renamed"})  # statuses whose computation is the same

_SUFFIX = re.compile(r"\.\d+$")


def name_stem(name: str) -> str:
    """``ynn_fusion.12`` → ``ynn_fusion``: the name without XLA's numeric suffix."""
    return _SUFFIX.sub("", name)


@dataclass(frozen=True)
class FusionShape:
    """One fusion of one side, as stored: its name and what identifies its computation."""

    module: str
    name: str
    fingerprint: str | None  # None: not known (parsed before fingerprints were stored)
    kind: str | None = None
    instructions: int | None = None
    op_name: str | None = None  # the metadata op_name, e.g. "jit(f)/reduce_sum"
    source: str | None = None  # "file:line", None where the metadata names none
    function: str | None = None  # the Python function the metadata names (``softmax.<locals>.step``)
    shape: str | None = None  # its result shape (None: not known, records parsed before it was stored)

    @property
    def site(self) -> tuple[str, str, str, str] | None:
        """Where in the program it comes from, lines aside: kind, op, file and function (None where one is not
        known). An edit above a fusion's line moves the line, not this."""
        if self.kind is None or self.op_name is None or self.source is None or self.function is None:
            return None
        return (self.kind, self.op_name, self.source.rpartition(":")[0], self.function)


@dataclass(frozen=True)
class FusionPair:
    status: PairStatus
    base: FusionShape | None
    head: FusionShape | None
    structural: bool = True  # False: paired by name alone, a side had no fingerprint (its status is a guess)

    @property
    def module(self) -> str:
        side = self.head or self.base
        assert side is not None
        return side.module

    @property
    def name(self) -> str:
        """The head's name where there is a head, else the base's."""
        side = self.head or self.base
        assert side is not None
        return side.name

    @property
    def base_name(self) -> str | None:
        return self.base.name if self.base is not None else None

    @property
    def head_name(self) -> str | None:
        return self.head.name if self.head is not None else None

    @property
    def unchanged(self) -> bool:
        """Known to be the same computation on both sides (under the same name or not)."""
        return self.structural and self.status in UNCHANGED

    def as_dict(self) -> dict[str, Any]:
        return {"module": self.module, "status": self.status, "base": self.base_name, "head": self.head_name,
                "structural": self.structural}


@dataclass(frozen=True)
class FusionPairing:
    """Every fusion of both sides, each in exactly one pair; ``pairs`` in (module, name) order."""

    pairs: tuple[FusionPair, ...]

    def of_base(self, name: str, module: str | None = None) -> FusionPair | None:
        """The pair holding the base fusion ``name`` (in ``module``, or in any module: the first)."""
        return next((p for p in self.pairs if p.base is not None and p.base.name == name
                     and (module is None or p.base.module == module)), None)

    def of_head(self, name: str, module: str | None = None) -> FusionPair | None:
        return next((p for p in self.pairs if p.head is not None and p.head.name == name
                     and (module is None or p.head.module == module)), None)

    def find(self, name: str) -> FusionPair | None:
        """The pair a name given without a side means: a head fusion of that name, else a base one."""
        return self.of_head(name) or self.of_base(name)

    def base_to_head(self) -> dict[str, str]:
        """Base name → head name for every fusion present on both sides (module-free, as kernels are named;
        a name in several modules keeps its first pair)."""
        out: dict[str, str] = {}
        for p in self.pairs:
            if p.base is not None and p.head is not None:
                out.setdefault(p.base.name, p.head.name)
        return out

    @property
    def renamed(self) -> tuple[FusionPair, ...]:
        return tuple(p for p in self.pairs if p.base is not None and p.head is not None
                     and p.base.name != p.head.name)

    def reused_names(self) -> frozenset[str]:
        """The names of added and removed fusions that the other side gives to another computation: the head's new
        ``ynn_fusion`` where the base's ``ynn_fusion`` was renumbered ``ynn_fusion.1`` (paired with that), or a base
        fusion gone whose name a head fusion of another computation took. The Diff page says so beside them, so
        that two rows of one name do not read as one op measured twice."""
        base_names = {p.base.name for p in self.pairs if p.base is not None}
        head_names = {p.head.name for p in self.pairs if p.head is not None}
        return frozenset({p.head.name for p in self.pairs if p.status == "added" and p.head is not None
                          and p.head.name in base_names}
                         | {p.base.name for p in self.pairs if p.status == "removed" and p.base is not None
                            and p.base.name in head_names})

    def merged(self, other: FusionPairing | None) -> FusionPairing:
        """This pairing and another of different names (the fusions' and the other ops'), as one."""
        if other is None:
            return self
        return FusionPairing(tuple(sorted(self.pairs + other.pairs, key=_pair_order)))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for p in self.pairs:
            out[p.status] += 1
        return dict(out)

    def as_dict(self) -> dict[str, Any]:
        """``{"counts": {status: n}, "renamed": [{"module", "status", "base", "head"}], "changed": [...],
        "added": [...], "removed": [...]}``: every pair but the ``same`` ones, which are counted only."""
        return {"counts": self.counts(),
                "renamed": [p.as_dict() for p in self.renamed],
                **{status: [p.as_dict() for p in self.pairs if p.status == status]
                   for status in ("changed", "added", "removed")}}


def _pair_order(p: FusionPair) -> tuple[str, str, str]:
    """The order of a pairing's pairs: (module, name, base name)."""
    return (p.module, p.name, p.base_name or "")


def _key(f: FusionShape) -> tuple[str, str]:
    return (f.module, f.name)


def _source_rank(b: FusionShape, h: FusionShape) -> int:
    """0: the same source line; 1: a side names none; 2: two different lines."""
    if b.source is None or h.source is None:
        return 1
    return 0 if b.source == h.source else 2


def _same_result(b: FusionShape, h: FusionShape) -> bool:
    """The same result shape, or one side's not known (records parsed before shapes were stored)."""
    return b.shape is None or h.shape is None or b.shape == h.shape


def _same_op(b: FusionShape, h: FusionShape) -> bool:
    return b.kind == h.kind and (b.op_name is None or h.op_name is None or b.op_name == h.op_name)


def _pair_module(base: list[FusionShape], head: list[FusionShape]) -> list[FusionPair]:
    pairs: list[FusionPair] = []
    left_b = {f.name: f for f in base}
    left_h = {f.name: f for f in head}

    def take(b: FusionShape, h: FusionShape, status: PairStatus, structural: bool = True) -> None:
        pairs.append(FusionPair(status, b, h, structural))
        del left_b[b.name], left_h[h.name]

    # 1. names alone where a side has no fingerprint (records parsed before fingerprints were stored)
    for name in sorted(set(left_b) & set(left_h)):
        b, h = left_b[name], left_h[name]
        if b.fingerprint is None or h.fingerprint is None:
            take(b, h, "same" if (b.kind, b.instructions) == (h.kind, h.instructions) else "changed", False)
    # 2. the same structure, under the same name or another: among several candidates of one fingerprint, the
    # same source line first, then the same name, then the same stem, then by name
    by_fp_b: dict[str, list[FusionShape]] = defaultdict(list)
    by_fp_h: dict[str, list[FusionShape]] = defaultdict(list)
    for f in left_b.values():
        if f.fingerprint is not None:
            by_fp_b[f.fingerprint].append(f)
    for f in left_h.values():
        if f.fingerprint is not None:
            by_fp_h[f.fingerprint].append(f)
    for fp in sorted(set(by_fp_b) & set(by_fp_h)):
        candidates = sorted(
            (_source_rank(b, h), b.name != h.name, name_stem(b.name) != name_stem(h.name), b.name, h.name)
            for b in by_fp_b[fp] for h in by_fp_h[fp])
        for _, _, _, bn, hn in candidates:
            if bn in left_b and hn in left_h:
                take(left_b[bn], left_h[hn], "same" if bn == hn else "renamed")
    # 3. the same name, another structure, the same kind and op
    for name in sorted(set(left_b) & set(left_h)):
        if _same_op(left_b[name], left_h[name]):
            take(left_b[name], left_h[name], "changed")
    # 4. another name, another structure, the same kind, op and source line
    for bn in sorted(left_b):
        b = left_b[bn]
        if b.source is None:
            continue
        match = next((h for hn, h in sorted(left_h.items()) if h.source == b.source and _same_op(b, h)
                      and b.op_name is not None and h.op_name is not None), None)
        if match is not None:
            take(b, match, "changed")
    # 5. another name, another structure, the same kind, op, file and function, the line moved (lines inserted
    # above it), where that site is one fusion's on each side: more than one, and which is which is a guess
    sites_b = Counter(f.site for f in left_b.values() if f.site is not None)
    sites_h = Counter(f.site for f in left_h.values() if f.site is not None)
    for bn in sorted(left_b):
        site = left_b[bn].site
        if site is not None and sites_b[site] == 1 and sites_h[site] == 1:
            match = next(h for h in left_h.values() if h.site == site)
            if _same_result(left_b[bn], match):
                take(left_b[bn], match, "changed")
    # 6. the rest
    pairs.extend(FusionPair("removed", f, None) for f in left_b.values())
    pairs.extend(FusionPair("added", None, f) for f in left_h.values())
    return pairs


def pair_fusions(base: Iterable[FusionShape], head: Iterable[FusionShape]) -> FusionPairing:
    """Pair two sides' fusions (see the module docstring). A name repeated within one module keeps its first."""
    by_module_b: dict[str, dict[str, FusionShape]] = defaultdict(dict)
    by_module_h: dict[str, dict[str, FusionShape]] = defaultdict(dict)
    for f in base:
        by_module_b[f.module].setdefault(f.name, f)
    for f in head:
        by_module_h[f.module].setdefault(f.name, f)
    pairs: list[FusionPair] = []
    for module in sorted(set(by_module_b) | set(by_module_h)):
        pairs.extend(_pair_module(list(by_module_b.get(module, {}).values()),
                                  list(by_module_h.get(module, {}).values())))
    pairs.sort(key=_pair_order)
    return FusionPairing(tuple(pairs))


def pair_program_ops(base: Sequence[Sequence[FusionShape] | None],
                     head: Sequence[Sequence[FusionShape] | None]) -> FusionPairing | None:
    """The program's other ops of two sides paired as fusions are, from each side's modules' op lists; None
    unless every module of both sides recorded them (one parsed before they were, a None, would have half a
    pairing call its every op new): then ops join by name."""
    if any(ops is None for ops in (*base, *head)):
        return None
    return pair_fusions([s for ops in base for s in ops or ()], [s for ops in head for s in ops or ()])


def join_ops(base: Sequence[tuple[str, str]], head: Sequence[tuple[str, str]],
             pairing: FusionPairing | None) -> list[tuple[tuple[str, str] | None, tuple[str, str] | None]]:
    """(module, op) keys of two op tables joined: an op that is a fusion through the fusion pairing (its base
    and head names may differ, and a head fusion new in the head has no base even where the base had an op of
    its name), any other op by name. Each key is in exactly one pair; sorted by (module, head name, base name)."""
    head_set = set(head)
    base_left = set(base)
    out: list[tuple[tuple[str, str] | None, tuple[str, str] | None]] = []
    claimed_base: set[tuple[str, str]] = set()
    for module, op in sorted(head_set):
        pair = pairing.of_head(op) if pairing is not None else None
        partner: tuple[str, str] | None
        if pair is None:  # not a fusion: by name, unless that base op is a fusion
            other = pairing.of_base(op) if pairing is not None else None
            partner = (module, op) if other is None else None
        elif pair.base is None:
            partner = None
        else:
            partner = (module, pair.base.name)
        if partner is not None and (partner not in base_left or partner in claimed_base):
            partner = None
        if partner is not None:
            claimed_base.add(partner)
        out.append((partner, (module, op)))
    out.extend((key, None) for key in sorted(base_left - claimed_base))
    return out


# A runner checks each commit out under a directory named by its sha (runners/gitrepo.py ``checkout``), so the
# same file has another absolute path at every commit: the part up to that directory is dropped.
_CHECKOUT_PREFIX = re.compile(r"^.*/[0-9a-f]{40}(?:[0-9a-f]{24})?/")


def source_text(source: Mapping[str, Any] | None) -> str | None:
    """A stored source location (``{"file", "line", ...}``) as ``file:line``, the file relative to the commit's
    checkout where its path shows one; None where it names no line."""
    if not isinstance(source, Mapping) or source.get("file") is None or source.get("line") is None:
        return None
    return f"{_CHECKOUT_PREFIX.sub('', str(source['file']))}:{source['line']}"


def source_function(source: Mapping[str, Any] | None) -> str | None:
    """A stored source location's Python function (``softmax.<locals>.step``); None where it names none."""
    function = source.get("function") if isinstance(source, Mapping) else None
    return str(function) if function else None


def shapes_from_records(module: str, fusions: Sequence[Mapping[str, Any]]) -> list[FusionShape]:
    """The shapes of a stored module record's fusion list (``hlo_module.fusions``: name, kind, instructions,
    source, op_name, fingerprint; the last two absent in records parsed before they were stored)."""
    return [FusionShape(module=module, name=str(f.get("name")), fingerprint=f.get("fingerprint") or None,
                        kind=f.get("kind"), instructions=int(f.get("instructions") or 0),
                        op_name=f.get("op_name"), source=source_text(f.get("source")),
                        function=source_function(f.get("source")), shape=f.get("shape"))
            for f in fusions]
