"""Two results' kernels and HLO fusions joined by name, with what changed. PURE: records in, rows out.

Fusions are paired by structure (``service.detect.fusion_pairing``), as attribution pairs them: a fusion XLA
renumbered is the same fusion (``renamed``), not one removed and one added. Kernels join on (name, isa), the
base's name read through that pairing where it is a fusion's (XLA CPU names a kernel after its fusion), so a
renumbered fusion's kernel is compared with its own. A kernel counts as changed when its instruction or bundle
count, its class mix, or its code digest (x86: ``code_sha256``) differs, the same exact rule as the static
detector's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from service.detect.fusion_pairing import FusionPairing, FusionShape, pair_fusions, source_function, source_text

Status = Literal["added", "removed", "changed", "renamed", "same"]


class KernelLike(Protocol):
    """What is read of a kernel (``service.store.drilldown.KernelSummary`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def isa(self) -> str: ...
    @property
    def instructions(self) -> int | None: ...
    @property
    def bundles(self) -> int | None: ...
    @property
    def mix(self) -> dict[str, int]: ...
    @property
    def details(self) -> dict[str, Any]: ...


class FusionLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def instructions(self) -> int: ...


def _delta(before: int | None, after: int | None) -> int | None:
    return None if before is None and after is None else (after or 0) - (before or 0)


@dataclass(frozen=True)
class KernelChoice:
    name: str
    isa: str
    status: Status
    base_instructions: int | None
    head_instructions: int | None
    base_bundles: int | None = None
    head_bundles: int | None = None
    base_name: str | None = None  # the base's symbol where its fusion had another name

    @property
    def instructions_delta(self) -> int | None:
        """Instructions (ops, for LLO) added; a missing side counts as none."""
        return _delta(self.base_instructions, self.head_instructions)

    @property
    def bundles_delta(self) -> int | None:
        return _delta(self.base_bundles, self.head_bundles)


def _changed(b: KernelLike, h: KernelLike) -> bool:
    digest_b, digest_h = (b.details or {}).get("code_sha256"), (h.details or {}).get("code_sha256")
    return ((b.instructions, b.bundles, dict(b.mix)) != (h.instructions, h.bundles, dict(h.mix))
            or (digest_b is not None and digest_h is not None and digest_b != digest_h))


def _base_keys(base: Sequence[KernelLike], pairing: FusionPairing | None) -> dict[tuple[str, str], KernelLike]:
    """The base's kernels keyed by (head name, isa) through the pairing; a kernel whose name the head gives to
    another computation (a renumbered or new fusion) is keyed apart, so it reads as removed."""
    rename = {b: h for b, h in pairing.base_to_head().items() if b != h} if pairing is not None else {}
    taken = set(rename.values()) | ({p.head.name for p in pairing.pairs if p.status == "added" and p.head}
                                    if pairing is not None else set())
    out: dict[tuple[str, str], KernelLike] = {}
    for k in base:
        if k.name in rename:
            out[(rename[k.name], k.isa)] = k
    for k in base:
        if k.name not in rename:
            out[(k.name + "\x00base", k.isa) if k.name in taken else (k.name, k.isa)] = k
    return out


def kernel_choices(base: Sequence[KernelLike], head: Sequence[KernelLike],
                   pairing: FusionPairing | None = None) -> list[KernelChoice]:
    """Every kernel of either side; changed, added and removed ones first (largest instruction change first),
    then the unchanged ones by name. ``pairing``: the two sides' fusions paired by structure."""
    b = _base_keys(base, pairing)
    h = {(k.name, k.isa): k for k in head}
    out = []
    for key in b.keys() | h.keys():
        kb, kh = b.get(key), h.get(key)
        status: Status = ("added" if kb is None else "removed" if kh is None
                          else "changed" if _changed(kb, kh) else "same")
        name = kh.name if kh is not None else kb.name if kb is not None else key[0]
        out.append(KernelChoice(name, key[1], status, kb.instructions if kb else None,
                                kh.instructions if kh else None, kb.bundles if kb else None,
                                kh.bundles if kh else None,
                                kb.name if kb is not None and kb.name != name else None))
    out.sort(key=lambda c: (c.status == "same", -abs(c.instructions_delta or 0), c.name, c.isa))
    return out


@dataclass(frozen=True)
class FusionDiffRow:
    module: str
    name: str
    status: Status
    base_kind: str | None
    head_kind: str | None
    base_instructions: int | None
    head_instructions: int | None
    base_name: str | None = None  # where the base's fusion had another name
    structural: bool = True  # False: paired by name alone (a side's record has no fingerprint)

    @property
    def instructions_delta(self) -> int | None:
        return _delta(self.base_instructions, self.head_instructions)


def fusion_shapes(modules: Mapping[str, Sequence[FusionLike]]) -> list[FusionShape]:
    """A side's fusions (per module name) as the pairing reads them; fingerprint, op name and source where the
    records have them."""
    return [FusionShape(m, f.name, getattr(f, "fingerprint", None) or None, f.kind, f.instructions,
                        getattr(f, "op_name", None), source_text(getattr(f, "source", None)),
                        source_function(getattr(f, "source", None)), getattr(f, "shape", None))
            for m, fusions in modules.items() for f in fusions]


def pair_fusion_lists(base: Mapping[str, Sequence[FusionLike]],
                      head: Mapping[str, Sequence[FusionLike]]) -> FusionPairing:
    return pair_fusions(fusion_shapes(base), fusion_shapes(head))


def diff_fusion_lists(base: Mapping[str, Sequence[FusionLike]], head: Mapping[str, Sequence[FusionLike]],
                      pairing: FusionPairing | None = None) -> list[FusionDiffRow]:
    """Fusions per module name on each side, paired by structure; changed ones first, then by module and name."""
    pairing = pairing if pairing is not None else pair_fusion_lists(base, head)
    rows = []
    for p in pairing.pairs:
        fb, fh = p.base, p.head
        rows.append(FusionDiffRow(p.module, p.name, p.status, fb.kind if fb else None, fh.kind if fh else None,
                                  fb.instructions if fb else None, fh.instructions if fh else None,
                                  fb.name if fb is not None and fh is not None and fb.name != fh.name else None,
                                  p.structural))
    rows.sort(key=lambda r: (r.status in ("same", "renamed"), -abs(r.instructions_delta or 0), r.module, r.name))
    return rows
