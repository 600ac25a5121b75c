"""The exact difference between the static records of two results: HLO modules and generated kernel code.

Static signals (the optimized HLO's structure, per-fusion instruction and bundle counts, spills, the code's
digest) are deterministic for one toolchain and one set of flags, so any difference is exact: no statistics,
no noise model, no threshold. Series are keyed by the environment fingerprint, which includes the jax/jaxlib
(and libtpu, CUDA) versions, the XLA flags and the host ISA; a toolchain or flags change therefore starts a new
series, and such a change never yields a static finding inside a series. Inside a series a static change is a
change of the code under test.

A layer that was not captured, or whose artifacts are not parsed yet or failed to parse, is ``None`` on that
side, and is not compared: "unknown" never reads as "everything was removed".

Modules match by module name. Fusions are paired by structure (``service.detect.fusion_pairing``): XLA
renumbers fusions (``fusion.3`` becomes ``fusion.7``) when the graph around them changes, and a renumbered fusion
whose computation is the same is neither removed nor added nor changed (it is listed as ``renamed``). Kernels
match by (isa, symbol), the base's symbol read through that pairing where it is a fusion's name (XLA CPU names a
kernel after its fusion): a renumbered fusion's kernel is compared with its own kernel on the other side. XLA CPU
emits one kernel for identical fusions, named after one of them: a kernel removed and one added with the same code
bytes (digests) are that kernel under a moved symbol, no change.

A kernel changed only when what a finding reports of it changed: its instruction or bundle count, spills or mix.
Where both sides have a digest of the code bytes (x86) and the digests are equal, the code is the same and it
did not change, whatever the counts say (records parsed by two parser versions, or a parser that was not
deterministic, may count the same bytes differently); a digest alone differing, with every count equal, is no
finding either: there is no change to report. So too a module whose fingerprint alone differs (the order XLA
printed it in moved, every fusion the same computation): it is listed, and is no finding.

A finding measures code size, not the time series it sits on: ``StaticDiff.metric`` and ``unit`` say what its
before and after count (``kernel_instructions``/``instructions``, ``kernel_bundles``/``bundles``,
``hlo_instructions``/``instructions``), and are stored on the finding.

Pure: plain records in, a typed record out (``StaticDiff.as_dict()`` is the JSON stored on findings; its
schema is documented there).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kernelwatch.vocabulary import ChangeKind
from service.detect.fusion_pairing import FusionPairing, FusionShape, pair_fusions, pair_program_ops

# The detector name of static findings, as stored (Finding.detector): exact, so never in units of noise.
STATIC_DETECTOR = "static-diff"

DIFF_SCHEMA = 1


@dataclass(frozen=True)
class FusionInfo:
    name: str
    kind: str | None
    instructions: int
    fingerprint: str | None = None  # what it computes, names aside (the parser's); None: not stored
    op_name: str | None = None
    source: str | None = None  # "file:line"
    function: str | None = None  # the Python function the metadata names
    shape: str | None = None  # its result shape (None: parsed before it was stored)


@dataclass(frozen=True)
class HloModuleInfo:
    name: str
    fingerprint: str
    instructions: int
    opcodes: Mapping[str, int]
    fusions: Sequence[FusionInfo] = ()
    # The program's other ops (kind: the opcode); None where the record holds none (parsed before parser 3).
    ops: Sequence[FusionInfo] | None = None


@dataclass(frozen=True)
class KernelInfo:
    """One generated kernel: ``mix`` is counts by instruction class (x86, SASS) or slot family (TPU LLO)."""

    name: str
    isa: str
    instructions: int | None
    bundles: int | None = None
    mix: Mapping[str, int] = field(default_factory=dict)
    spills: int = 0
    digest: str | None = None  # a digest of the code bytes where the parser gives one (x86: code_sha256)


@dataclass(frozen=True)
class StaticRecords:
    """What one result's parsed artifacts say about its code; ``None``: that layer is unknown for this result."""

    modules: Sequence[HloModuleInfo] | None
    kernels: Sequence[KernelInfo] | None


def spills_of(details: Mapping[str, Any]) -> int:
    """Spill count from a kernel record's details, whatever the parser's spelling (SASS: spill_loads and
    spill_stores; LLO: a dict of spill kinds; x86 has none)."""
    total = 0
    spills = details.get("spills")
    if isinstance(spills, Mapping):
        total += sum(int(v) for v in spills.values() if isinstance(v, int | float))
    elif isinstance(spills, int | float):
        total += int(spills)
    for key in ("spill_loads", "spill_stores"):
        value = details.get(key)
        if isinstance(value, int | float):
            total += int(value)
    return total


def _change(before: float | None, after: float | None) -> dict[str, Any]:
    delta = after - before if before is not None and after is not None else None
    return {"before": before, "after": after, "delta": delta}


def _count_deltas(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    keys = sorted(set(before) | set(after))
    deltas = {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in keys}
    return {k: d for k, d in deltas.items() if d}


@dataclass(frozen=True)
class FusionChange:
    name: str  # the head's
    kind_before: str | None
    kind_after: str | None
    instructions_before: int
    instructions_after: int
    base_name: str | None = None  # where the base's fusion had another name


@dataclass(frozen=True)
class ModuleDiff:
    name: str
    status: Literal["added", "removed", "changed", "unchanged"]
    fingerprint_before: str | None
    fingerprint_after: str | None
    instructions_before: int | None
    instructions_after: int | None
    opcodes: Mapping[str, int]  # opcode → after - before, non-zero only
    fusions_added: Sequence[FusionInfo]
    fusions_removed: Sequence[FusionInfo]
    fusions_changed: Sequence[FusionChange]
    fusions_renamed: Sequence[tuple[str, str]] = ()  # (base name, head name): the same computation renumbered

    @property
    def counted(self) -> bool:
        """Whether something a finding reports of it changed: it came or went, or its instruction count, opcodes
        or fusions (added, removed, changed) moved. Its fingerprint alone differing is not: the canonical text
        follows the order XLA prints computations and instructions in, and a reorder of the source that left
        every fusion the same computation (renumbered) moved that order and nothing else."""
        return (self.status != "changed" or self.instructions_before != self.instructions_after
                or bool(self.opcodes or self.fusions_added or self.fusions_removed or self.fusions_changed))

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "status": self.status,
            "fingerprint": {"before": self.fingerprint_before, "after": self.fingerprint_after},
            "instructions": _change(self.instructions_before, self.instructions_after),
            "opcodes": dict(self.opcodes),
            "fusions": {
                "added": [_fusion_dict(f) for f in self.fusions_added],
                "removed": [_fusion_dict(f) for f in self.fusions_removed],
                "changed": [{"name": c.name, "base_name": c.base_name,
                             "kind": {"before": c.kind_before, "after": c.kind_after},
                             "instructions": _change(c.instructions_before, c.instructions_after)}
                            for c in self.fusions_changed],
                "renamed": [{"base": b, "head": h} for b, h in self.fusions_renamed],
            },
        }


def _fusion_dict(f: FusionInfo) -> dict[str, Any]:
    return {"name": f.name, "kind": f.kind, "instructions": f.instructions}


@dataclass(frozen=True)
class KernelDiff:
    name: str
    isa: str
    status: Literal["added", "removed", "changed"]
    before: KernelInfo | None
    after: KernelInfo | None
    mix: Mapping[str, int]  # class or slot family → after - before, non-zero only
    code_changed: bool  # what is reported of it differs (see the module docstring); True for added and removed
    base_name: str | None = None  # the base's symbol, where its fusion was renumbered

    def as_dict(self) -> dict[str, Any]:
        b, a = self.before, self.after
        return {
            "name": self.name, "base_name": self.base_name, "isa": self.isa, "status": self.status,
            "instructions": _change(b.instructions if b else None, a.instructions if a else None),
            "bundles": _change(b.bundles if b else None, a.bundles if a else None),
            "spills": _change(b.spills if b else None, a.spills if a else None),
            "mix": dict(self.mix),
            "code_changed": self.code_changed,
        }


Measure = Literal["bundles", "kernel_instructions", "hlo_instructions", "none"]
# measure → (metric, unit) of a finding on it; "none" (nothing sized the code) keeps the metric it is named by
MEASURE_METRICS: Mapping[str, tuple[str, str]] = {
    "bundles": ("kernel_bundles", "bundles"),
    "kernel_instructions": ("kernel_instructions", "instructions"),
    "hlo_instructions": ("hlo_instructions", "instructions"),
    "none": ("kernel_instructions", "instructions"),
}
COUNT_UNITS = frozenset(unit for _, unit in MEASURE_METRICS.values())  # units whose values are whole counts


@dataclass(frozen=True)
class StaticDiff:
    changed: bool
    compared_hlo: bool
    compared_kernels: bool
    modules: Sequence[ModuleDiff]  # added, removed or changed modules only
    kernels: Sequence[KernelDiff]  # added, removed or changed kernels only
    measure: Measure  # which total sizes the code: bundles (TPU), else kernel instructions, else HLO instructions
    value_before: float
    value_after: float
    spills_before: int
    spills_after: int
    hlo_instructions_before: int
    hlo_instructions_after: int
    pairing: FusionPairing | None = None  # the fusions paired by structure; None unless HLO was compared
    # The program's other ops paired the same way; None unless HLO was compared and both sides recorded them.
    op_pairing: FusionPairing | None = None

    @property
    def op_table_pairing(self) -> FusionPairing | None:
        """What an op table joins through: the fusions' pairing and the other ops' together."""
        return self.pairing.merged(self.op_pairing) if self.pairing is not None else None

    @property
    def magnitude(self) -> float:
        """Relative change of the measured total, after / before - 1 (before of 0 counts as 1)."""
        return (self.value_after - self.value_before) / max(self.value_before, 1.0)

    @property
    def grew(self) -> bool:
        """More code: the measured total grew, or (at equal size) spills or the HLO grew; also code that changed at
        the same size everywhere (another instruction mix), which a person looks at: read as an improvement, its
        alert was filed away untriaged for a change no count says is smaller."""
        if self.value_after != self.value_before:
            return self.value_after > self.value_before
        if self.spills_after != self.spills_before:
            return self.spills_after > self.spills_before
        return self.hlo_instructions_after >= self.hlo_instructions_before

    @property
    def direction(self) -> ChangeKind:
        return ChangeKind.REGRESSION if self.grew else ChangeKind.IMPROVEMENT

    @property
    def metric(self) -> str:
        """What ``value_before`` and ``value_after`` count, as a finding's metric."""
        return MEASURE_METRICS[self.measure][0]

    @property
    def unit(self) -> str:
        return MEASURE_METRICS[self.measure][1]

    def kernel(self, name: str, isa: str | None = None) -> KernelDiff | None:
        """The kernel diff of a head symbol (or a removed kernel's base symbol)."""
        return next((k for k in self.kernels if k.name == name and (isa is None or k.isa == isa)), None)

    def summary(self) -> str:
        """One line: the largest kernel change, then the first module change."""
        parts = []
        if self.kernels:
            k = max(self.kernels, key=lambda d: abs(_size(d.after) - _size(d.before)))
            ref = k.after or k.before
            unit = "bundles" if ref is not None and ref.bundles is not None else "instructions"
            if k.status == "added":
                parts.append(f"{k.name} added ({_size(k.after)} {unit})")
            elif k.status == "removed":
                parts.append(f"{k.name} removed ({_size(k.before)} {unit})")
            else:
                delta = _size(k.after) - _size(k.before)
                parts.append(f"{k.name} {_size(k.before)} → {_size(k.after)} {unit} ({delta:+d})" if delta
                             else f"{k.name} code changed at equal size")
            spills = (k.after.spills if k.after else 0) - (k.before.spills if k.before else 0)
            if spills:
                parts.append(f"{spills:+d} spills")
        for m in self.modules:
            if m.status != "changed":
                parts.append(f"HLO module {m.name} {m.status}")
            else:
                ops = sorted(m.opcodes.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:3]
                fusions = len(m.fusions_added) + len(m.fusions_removed) + len(m.fusions_changed)
                detail = ", ".join(f"{d:+d} {op}" for op, d in ops) or f"{fusions} fusion(s) differ"
                parts.append(f"HLO {m.name} changed ({detail})")
            break
        return "; ".join(parts) if parts else "no static change"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form::

            {"schema": 1, "changed": bool, "compared": {"hlo": bool, "kernels": bool}, "summary": str,
             "measure": "bundles" | "kernel_instructions" | "hlo_instructions" | "none",
             "totals": {"size": C, "spills": C, "hlo_instructions": C},       # C = {"before", "after", "delta"}
             "modules": [{"name", "status": "added"|"removed"|"changed", "fingerprint": {"before", "after"},
                          "instructions": C, "opcodes": {opcode: delta},
                          "fusions": {"added": [{"name", "kind", "instructions"}], "removed": [...],
                                      "changed": [{"name", "kind": {"before", "after"}, "instructions": C}]}}],
             "kernels": [{"name", "isa", "status": "added"|"removed"|"changed", "instructions": C, "bundles": C,
                          "spills": C, "mix": {class: delta}, "code_changed": bool}],
             "fusion_pairing": null | <FusionPairing.as_dict()>,
             "op_pairing": null | <the same, of the program's other ops>}

        Unchanged modules and kernels are left out; deltas are after - before and only non-zero ones listed.
        """
        return {
            "schema": DIFF_SCHEMA, "changed": self.changed,
            "compared": {"hlo": self.compared_hlo, "kernels": self.compared_kernels},
            "summary": self.summary(), "measure": self.measure,
            "totals": {"size": _change(self.value_before, self.value_after),
                       "spills": _change(self.spills_before, self.spills_after),
                       "hlo_instructions": _change(self.hlo_instructions_before, self.hlo_instructions_after)},
            "modules": [m.as_dict() for m in self.modules],
            "kernels": [k.as_dict() for k in self.kernels],
            "fusion_pairing": self.pairing.as_dict() if self.pairing is not None else None,
            "op_pairing": self.op_pairing.as_dict() if self.op_pairing is not None else None,
        }


def _size(k: KernelInfo | None) -> int:
    if k is None:
        return 0
    return int(k.bundles if k.bundles is not None else (k.instructions or 0))


def fusion_shapes(modules: Sequence[HloModuleInfo]) -> list[FusionShape]:
    return [FusionShape(m.name, f.name, f.fingerprint, f.kind, f.instructions, f.op_name, f.source, f.function,
                        f.shape)
            for m in modules for f in m.fusions]


def pair_module_fusions(before: Sequence[HloModuleInfo], after: Sequence[HloModuleInfo]) -> FusionPairing:
    """The fusions of two sides' modules paired by structure (``service.detect.fusion_pairing``)."""
    return pair_fusions(fusion_shapes(before), fusion_shapes(after))


def pair_module_ops(before: Sequence[HloModuleInfo], after: Sequence[HloModuleInfo]) -> FusionPairing | None:
    """The program's other ops of two sides' modules paired by structure (``pair_program_ops``)."""
    def shapes(m: HloModuleInfo) -> list[FusionShape] | None:
        return None if m.ops is None else [FusionShape(m.name, o.name, o.fingerprint, o.kind, None, o.op_name,
                                                       o.source, o.function, o.shape) for o in m.ops]
    return pair_program_ops([shapes(m) for m in before], [shapes(m) for m in after])


def diff_modules(before: Sequence[HloModuleInfo], after: Sequence[HloModuleInfo],
                 pairing: FusionPairing | None = None) -> list[ModuleDiff]:
    """Added, removed and changed modules (by name), in name order; fusions paired by structure."""
    old = {m.name: m for m in before}
    new = {m.name: m for m in after}
    pairing = pairing if pairing is not None else pair_module_fusions(before, after)
    out = []
    for name in sorted(set(old) | set(new)):
        b, a = old.get(name), new.get(name)
        b_fusions = {f.name: f for f in b.fusions} if b else {}
        a_fusions = {f.name: f for f in a.fusions} if a else {}
        pairs = [p for p in pairing.pairs if p.module == name]
        added = [a_fusions[p.head.name] for p in pairs if p.status == "added" and p.head is not None]
        removed = [b_fusions[p.base.name] for p in pairs if p.status == "removed" and p.base is not None]
        changed = []
        for p in pairs:
            if p.status != "changed" or p.base is None or p.head is None:
                continue
            fb, fa = b_fusions[p.base.name], a_fusions[p.head.name]
            changed.append(FusionChange(fa.name, fb.kind, fa.kind, fb.instructions, fa.instructions,
                                        fb.name if fb.name != fa.name else None))
        renamed = [(p.base.name, p.head.name) for p in pairs
                   if p.status == "renamed" and p.base is not None and p.head is not None]
        if b is None or a is None:
            status: Literal["added", "removed", "changed", "unchanged"] = "added" if b is None else "removed"
        elif b.fingerprint != a.fingerprint or added or removed or changed:
            status = "changed"
        else:
            status = "unchanged"
        if status == "unchanged":
            continue
        out.append(ModuleDiff(name=name, status=status, fingerprint_before=b.fingerprint if b else None,
                              fingerprint_after=a.fingerprint if a else None,
                              instructions_before=b.instructions if b else None,
                              instructions_after=a.instructions if a else None,
                              opcodes=_count_deltas(b.opcodes if b else {}, a.opcodes if a else {}),
                              fusions_added=added, fusions_removed=removed, fusions_changed=changed,
                              fusions_renamed=renamed))
    return out


def _same_code(before: KernelInfo, after: KernelInfo) -> bool:
    """Both digests known and equal: the same bytes, so any difference in their counts is the parsers'."""
    return before.digest is not None and before.digest == after.digest


def _keyed_before(before: Sequence[KernelInfo], rename: Mapping[str, str] | None,
                  after_names: set[str] | None = None) -> dict[tuple[str, str], KernelInfo]:
    """The base's kernels keyed by (isa, head name): a symbol ``rename`` maps (a fusion paired by structure)
    takes its head's name; another keeps its own unless a renamed kernel took it (then it stays apart)."""
    rename = rename or {}
    out: dict[tuple[str, str], KernelInfo] = {}
    for k in before:
        if k.name in rename:
            out[(k.isa, rename[k.name])] = k
    for k in before:
        if k.name not in rename:
            key = (k.isa, k.name)
            # The head's symbol of this name belongs to another base fusion, or to a new one: not this kernel.
            taken = key in out or k.name in set(rename.values()) or (after_names is not None
                                                                    and k.name in after_names)
            out[(k.isa, k.name + "\x00base") if taken else key] = k
    return out


def _as_counted_before(before: Sequence[KernelInfo], after: Sequence[KernelInfo],
                       rename: Mapping[str, str] | None = None,
                       unpaired: set[str] | None = None) -> list[KernelInfo]:
    """``after`` with each kernel whose bytes are those of its ``before`` counted as ``before`` counted them, so
    that the totals, like the kernel list, move only with the code."""
    old = _keyed_before(before, rename, unpaired)
    out = []
    for k in after:
        b = old.get((k.isa, k.name))
        out.append(replace(b, name=k.name) if b is not None and _same_code(b, k) else k)
    return out


def diff_kernels(before: Sequence[KernelInfo], after: Sequence[KernelInfo],
                 rename: Mapping[str, str] | None = None, unpaired: set[str] | None = None) -> list[KernelDiff]:
    """Added, removed and changed kernels (by isa and head name), in (isa, name) order. ``rename``: base symbol
    → head symbol of the fusions paired under another name; ``unpaired``: head symbols of fusions new in the head
    (a base kernel of that name is another computation, so the two are removed and added, not compared)."""
    old = _keyed_before(before, rename, unpaired)
    new = {(k.isa, k.name): k for k in after}
    out = []
    for key in sorted(set(old) | set(new)):
        b, a = old.get(key), new.get(key)
        name = key[1].removesuffix("\x00base")
        base_name = b.name if b is not None and b.name != name else None
        mix = _count_deltas(b.mix if b else {}, a.mix if a else {})
        if b is None or a is None:
            out.append(KernelDiff(name, key[0], "added" if b is None else "removed", b, a, mix, True, base_name))
            continue
        if _same_code(b, a):
            continue
        if (b.instructions, b.bundles, b.spills) != (a.instructions, a.bundles, a.spills) or mix:
            out.append(KernelDiff(name, key[0], "changed", b, a, mix, True, base_name))
    return _without_moved_symbols(out)


def _without_moved_symbols(diffs: list[KernelDiff]) -> list[KernelDiff]:
    """``diffs`` without the removed and added kernels of one isa whose code bytes are the same (equal digests,
    taken one for one): one kernel whose symbol moved, not a change. XLA CPU emits one kernel for identical
    fusions and names it after one of them, and which one can swap when they are renumbered: a reorder that left
    the program identical read as ``wrapped_convert`` removed (-93) and ``wrapped_convert.1`` added (+93), a
    code finding of +0.0 %."""
    added: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, d in enumerate(diffs):
        if d.status == "added" and d.after is not None and d.after.digest is not None:
            added[(d.isa, d.after.digest)].append(i)
    dropped: set[int] = set()
    for i, d in enumerate(diffs):
        if d.status == "removed" and d.before is not None and d.before.digest is not None:
            same = added.get((d.isa, d.before.digest))
            if same:
                dropped |= {i, same.pop(0)}
    return [d for i, d in enumerate(diffs) if i not in dropped]


def kernel_rename(pairing: FusionPairing | None) -> tuple[dict[str, str], set[str]]:
    """From a fusion pairing: base symbol → head symbol where they differ, and the head symbols of new fusions."""
    if pairing is None:
        return {}, set()
    rename = {b: h for b, h in pairing.base_to_head().items() if b != h}
    added = {p.head.name for p in pairing.pairs if p.status == "added" and p.head is not None}
    return rename, added


def _totals(kernels: Sequence[KernelInfo]) -> tuple[int, int, int, bool]:
    bundles = [k.bundles for k in kernels if k.bundles is not None]
    return (sum(k.instructions or 0 for k in kernels), sum(bundles), sum(k.spills for k in kernels), bool(bundles))


def diff_static(before: StaticRecords, after: StaticRecords) -> StaticDiff:
    """The exact difference of two results' static records; layers unknown on either side are not compared."""
    compared_hlo = before.modules is not None and after.modules is not None
    compared_kernels = before.kernels is not None and after.kernels is not None
    pairing = pair_module_fusions(before.modules or (), after.modules or ()) if compared_hlo else None
    rename, unpaired = kernel_rename(pairing)
    after_kernels = _as_counted_before(before.kernels or (), after.kernels or (), rename, unpaired)
    modules = diff_modules(before.modules or (), after.modules or (), pairing) if compared_hlo else []
    kernels = diff_kernels(before.kernels or (), after_kernels, rename, unpaired) if compared_kernels else []
    hlo_b = sum(m.instructions for m in before.modules or ()) if compared_hlo else 0
    hlo_a = sum(m.instructions for m in after.modules or ()) if compared_hlo else 0
    measure: Measure = "none"
    value_b = value_a = 0.0
    spills_b = spills_a = 0
    if compared_kernels:
        ins_b, bun_b, spills_b, has_b = _totals(before.kernels or ())
        ins_a, bun_a, spills_a, has_a = _totals(after_kernels)
        if has_b and has_a:
            measure, value_b, value_a = "bundles", float(bun_b), float(bun_a)
        elif ins_b or ins_a:
            measure, value_b, value_a = "kernel_instructions", float(ins_b), float(ins_a)
    if measure == "none" and compared_hlo:
        measure, value_b, value_a = "hlo_instructions", float(hlo_b), float(hlo_a)
    return StaticDiff(changed=bool(kernels) or any(m.counted for m in modules), compared_hlo=compared_hlo,
                      compared_kernels=compared_kernels,
                      modules=modules, kernels=kernels, measure=measure, value_before=value_b, value_after=value_a,
                      spills_before=spills_b, spills_after=spills_a, hlo_instructions_before=hlo_b,
                      hlo_instructions_after=hlo_a, pairing=pairing,
                      op_pairing=pair_module_ops(before.modules or (), after.modules or ()) if compared_hlo else None)
