"""The exact difference between the static records of two results: HLO modules and generated kernel code.

Static signals (the optimized HLO's structure, per-fusion instruction and bundle counts, spills, the code's
digest) are deterministic for one toolchain and one set of flags, so any difference is exact: no statistics,
no noise model, no threshold. Series are keyed by the environment fingerprint, which includes the jax/jaxlib
(and libtpu, CUDA) versions, the XLA flags and the host ISA; a toolchain or flags change therefore starts a new
series, and such a change never yields a static finding inside a series. Inside a series a static change is a
change of the code under test.

A layer that was not captured, or whose artifacts are not parsed yet or failed to parse, is ``None`` on that
side, and is not compared: "unknown" never reads as "everything was removed".

Matching is by name: modules by module name, fusions by fusion name, kernels by (isa, symbol). XLA numbers
fusions (``fusion.3``); an edit that renumbers them shows as one fusion removed and another added.

A kernel changed only when what a finding reports of it changed: its instruction or bundle count, spills or mix.
Where both sides have a digest of the code bytes (x86) and the digests are equal, the code is the same and it
did not change, whatever the counts say (records parsed by two parser versions, or a parser that was not
deterministic, may count the same bytes differently); a digest alone differing, with every count equal, is no
finding either: there is no change to report.

A finding measures code size, not the time series it sits on: ``StaticDiff.metric`` and ``unit`` say what its
before and after count (``kernel_instructions``/``instructions``, ``kernel_bundles``/``bundles``,
``hlo_instructions``/``instructions``), and are stored on the finding.

Pure: plain records in, a typed record out (``StaticDiff.as_dict()`` is the JSON stored on findings; its
schema is documented there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# The detector name of static findings, as stored (Finding.detector): exact, so never in units of noise.
STATIC_DETECTOR = "static-diff"

DIFF_SCHEMA = 1


@dataclass(frozen=True)
class FusionInfo:
    name: str
    kind: str | None
    instructions: int


@dataclass(frozen=True)
class HloModuleInfo:
    name: str
    fingerprint: str
    instructions: int
    opcodes: Mapping[str, int]
    fusions: Sequence[FusionInfo] = ()


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
    name: str
    kind_before: str | None
    kind_after: str | None
    instructions_before: int
    instructions_after: int


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "status": self.status,
            "fingerprint": {"before": self.fingerprint_before, "after": self.fingerprint_after},
            "instructions": _change(self.instructions_before, self.instructions_after),
            "opcodes": dict(self.opcodes),
            "fusions": {
                "added": [_fusion_dict(f) for f in self.fusions_added],
                "removed": [_fusion_dict(f) for f in self.fusions_removed],
                "changed": [{"name": c.name, "kind": {"before": c.kind_before, "after": c.kind_after},
                             "instructions": _change(c.instructions_before, c.instructions_after)}
                            for c in self.fusions_changed],
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

    def as_dict(self) -> dict[str, Any]:
        b, a = self.before, self.after
        return {
            "name": self.name, "isa": self.isa, "status": self.status,
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

    @property
    def magnitude(self) -> float:
        """Relative change of the measured total, after / before - 1 (before of 0 counts as 1)."""
        return (self.value_after - self.value_before) / max(self.value_before, 1.0)

    @property
    def grew(self) -> bool:
        """More code: the measured total grew, or (at equal size) spills or the HLO grew."""
        if self.value_after != self.value_before:
            return self.value_after > self.value_before
        if self.spills_after != self.spills_before:
            return self.spills_after > self.spills_before
        return self.hlo_instructions_after > self.hlo_instructions_before

    @property
    def direction(self) -> Literal["regression", "improvement"]:
        return "regression" if self.grew else "improvement"

    @property
    def metric(self) -> str:
        """What ``value_before`` and ``value_after`` count, as a finding's metric."""
        return MEASURE_METRICS[self.measure][0]

    @property
    def unit(self) -> str:
        return MEASURE_METRICS[self.measure][1]

    def kernel(self, name: str, isa: str | None = None) -> KernelDiff | None:
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
                          "spills": C, "mix": {class: delta}, "code_changed": bool}]}

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
        }


def _size(k: KernelInfo | None) -> int:
    if k is None:
        return 0
    return int(k.bundles if k.bundles is not None else (k.instructions or 0))


def diff_modules(before: Sequence[HloModuleInfo], after: Sequence[HloModuleInfo]) -> list[ModuleDiff]:
    """Added, removed and changed modules (by name), in name order."""
    old = {m.name: m for m in before}
    new = {m.name: m for m in after}
    out = []
    for name in sorted(set(old) | set(new)):
        b, a = old.get(name), new.get(name)
        b_fusions = {f.name: f for f in b.fusions} if b else {}
        a_fusions = {f.name: f for f in a.fusions} if a else {}
        added = [a_fusions[n] for n in sorted(set(a_fusions) - set(b_fusions))]
        removed = [b_fusions[n] for n in sorted(set(b_fusions) - set(a_fusions))]
        changed = [FusionChange(n, b_fusions[n].kind, a_fusions[n].kind, b_fusions[n].instructions,
                                a_fusions[n].instructions)
                   for n in sorted(set(a_fusions) & set(b_fusions))
                   if (b_fusions[n].kind, b_fusions[n].instructions) != (a_fusions[n].kind, a_fusions[n].instructions)]
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
                              fusions_added=added, fusions_removed=removed, fusions_changed=changed))
    return out


def _same_code(before: KernelInfo, after: KernelInfo) -> bool:
    """Both digests known and equal: the same bytes, so any difference in their counts is the parsers'."""
    return before.digest is not None and before.digest == after.digest


def _as_counted_before(before: Sequence[KernelInfo], after: Sequence[KernelInfo]) -> list[KernelInfo]:
    """``after`` with each kernel whose bytes are those of its ``before`` counted as ``before`` counted them, so
    that the totals, like the kernel list, move only with the code."""
    old = {(k.isa, k.name): k for k in before}
    out = []
    for k in after:
        b = old.get((k.isa, k.name))
        out.append(b if b is not None and _same_code(b, k) else k)
    return out


def diff_kernels(before: Sequence[KernelInfo], after: Sequence[KernelInfo]) -> list[KernelDiff]:
    """Added, removed and changed kernels (by isa and name), in (isa, name) order."""
    old = {(k.isa, k.name): k for k in before}
    new = {(k.isa, k.name): k for k in after}
    out = []
    for key in sorted(set(old) | set(new)):
        b, a = old.get(key), new.get(key)
        mix = _count_deltas(b.mix if b else {}, a.mix if a else {})
        if b is None or a is None:
            out.append(KernelDiff(key[1], key[0], "added" if b is None else "removed", b, a, mix, True))
            continue
        if _same_code(b, a):
            continue
        if (b.instructions, b.bundles, b.spills) != (a.instructions, a.bundles, a.spills) or mix:
            out.append(KernelDiff(key[1], key[0], "changed", b, a, mix, True))
    return out


def _totals(kernels: Sequence[KernelInfo]) -> tuple[int, int, int, bool]:
    bundles = [k.bundles for k in kernels if k.bundles is not None]
    return (sum(k.instructions or 0 for k in kernels), sum(bundles), sum(k.spills for k in kernels), bool(bundles))


def diff_static(before: StaticRecords, after: StaticRecords) -> StaticDiff:
    """The exact difference of two results' static records; layers unknown on either side are not compared."""
    compared_hlo = before.modules is not None and after.modules is not None
    compared_kernels = before.kernels is not None and after.kernels is not None
    after_kernels = _as_counted_before(before.kernels or (), after.kernels or ())
    modules = diff_modules(before.modules or (), after.modules or ()) if compared_hlo else []
    kernels = diff_kernels(before.kernels or (), after_kernels) if compared_kernels else []
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
    return StaticDiff(changed=bool(modules or kernels), compared_hlo=compared_hlo, compared_kernels=compared_kernels,
                      modules=modules, kernels=kernels, measure=measure, value_before=value_b, value_after=value_a,
                      spills_before=spills_b, spills_after=spills_a, hlo_instructions_before=hlo_b,
                      hlo_instructions_after=hlo_a)
