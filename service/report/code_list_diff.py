"""Two results' kernels and HLO fusions joined by name, with what changed. PURE: records in, rows out.

Kernels join on (name, isa) and fusions on (module, name), as attribution joins them: a kernel XLA renumbered
shows as one removed and one added. A kernel counts as changed when its instruction or bundle count, its class
mix, or its code digest (x86: ``code_sha256``) differs, the same exact rule as the static detector's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Status = Literal["added", "removed", "changed", "same"]


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


def kernel_choices(base: Sequence[KernelLike], head: Sequence[KernelLike]) -> list[KernelChoice]:
    """Every kernel of either side; changed, added and removed ones first (largest instruction change first),
    then the unchanged ones by name."""
    b = {(k.name, k.isa): k for k in base}
    h = {(k.name, k.isa): k for k in head}
    out = []
    for key in b.keys() | h.keys():
        kb, kh = b.get(key), h.get(key)
        status: Status = ("added" if kb is None else "removed" if kh is None
                          else "changed" if _changed(kb, kh) else "same")
        out.append(KernelChoice(key[0], key[1], status, kb.instructions if kb else None,
                                kh.instructions if kh else None, kb.bundles if kb else None,
                                kh.bundles if kh else None))
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

    @property
    def instructions_delta(self) -> int | None:
        return _delta(self.base_instructions, self.head_instructions)


def diff_fusion_lists(base: Mapping[str, Sequence[FusionLike]],
                      head: Mapping[str, Sequence[FusionLike]]) -> list[FusionDiffRow]:
    """Fusions per module name on each side, joined; changed ones first, then by module and name."""
    b = {(m, f.name): f for m, fusions in base.items() for f in fusions}
    h = {(m, f.name): f for m, fusions in head.items() for f in fusions}
    rows = []
    for key in b.keys() | h.keys():
        fb, fh = b.get(key), h.get(key)
        status: Status = ("added" if fb is None else "removed" if fh is None
                          else "changed" if (fb.kind, fb.instructions) != (fh.kind, fh.instructions) else "same")
        rows.append(FusionDiffRow(key[0], key[1], status, fb.kind if fb else None, fh.kind if fh else None,
                                  fb.instructions if fb else None, fh.instructions if fh else None))
    rows.sort(key=lambda r: (r.status == "same", -abs(r.instructions_delta or 0), r.module, r.name))
    return rows
