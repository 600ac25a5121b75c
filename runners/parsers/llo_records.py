"""The typed records both LLO readers produce (a bundle listing, xprof's ``bundle_util`` JSON), their error, and
the capped file read they share. No parsing here: ``llo_to_bundles`` and ``llo_bundle_util`` fill these in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runners.parsers.text_guard import ListingParseError

FAMILIES = (
    "scalar", "vector_alu", "vector_load", "vector_store", "mxu_push", "mxu_matmul", "mxu_pop", "xlu", "eup", "dma",
    "branch", "other",
)
MXU_FAMILIES = frozenset({"mxu_push", "mxu_matmul", "mxu_pop"})
SPILL_KINDS = ("vector_spill_stores", "vector_spill_loads", "scalar_spill_stores", "scalar_spill_loads")
DEFAULT_MAX_BYTES = 256 << 20  # a 1M-bundle form A listing is ~170 MB; parsing keeps memory bounded by ~40 B/bundle


class LloParseError(ListingParseError):
    """Input that is not a well-formed LLO listing or bundle_util JSON; ``line`` 0 means the input as a whole."""


@dataclass(frozen=True)
class LloOp:
    dest: str | None
    opcode: str  # with modifiers, "vmatmul.bf16.msra.mxu1"
    operands: str
    family: str
    mxu: str | None  # "mxu1" for MXU-family ops naming a unit (".mxu1", "(mrf1)")
    target: int | None  # resolved branch target address
    spill: str | None  # one of SPILL_KINDS
    line: int


@dataclass(frozen=True)
class LloBundle:
    address: int
    line: int
    form: str  # "A": one line; "B": several
    marker: str | None  # an upper-case tag between address and ':' ("LB"), when present
    ops: tuple[LloOp, ...]
    text: str = field(repr=False)


@dataclass(frozen=True)
class LloLoop:
    start: int  # target address
    end: int  # address of the bundle holding the backward branch
    bundle_count: int  # bundles of the program with start <= address <= end
    branch_line: int


@dataclass(frozen=True)
class SlotUsage:
    used: int
    available: int | None


@dataclass(frozen=True)
class LloProgram:
    name: str
    source: str
    form: str  # "B" when any bundle spans lines, else "A"; "bundle_util" for the JSON
    bundle_count: int
    op_count: int | None  # None where the input does not say (bundle_util)
    ops_per_family: dict[str, int]  # every FAMILIES key for listings; only the known ones for bundle_util
    mxu_units: tuple[str, ...]
    ops_per_bundle: dict[int, int]  # ops in a bundle → how many bundles
    mxu_bundle_share: float | None  # share of bundles holding an MXU-family op
    loops: tuple[LloLoop, ...]
    spills: dict[str, int]
    slot_usage: dict[str, SlotUsage]  # bundle_util only
    ignored_lines: int
    operands: tuple[str, ...] = field(repr=False)
    allocations: dict[str, str] = field(repr=False)
    # A listing's bundles are read back from the listing's text when asked for (a sequence, built lazily), so a
    # million-bundle program does not hold ten million op records it was never asked for.
    bundles: Sequence[LloBundle] = field(repr=False)


def read_capped(path: str | Path, max_bytes: int) -> str:
    """A UTF-8 file's text, refusing one over ``max_bytes``."""
    source = str(path)
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise LloParseError(source, 0, f"file is larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LloParseError(source, data.count(b"\n", 0, exc.start) + 1, "not UTF-8 text") from None


def program_name_from_path(path: str | Path) -> str:
    """``1777396851540540302-fusion.3-final_bundles.txt`` → ``fusion.3``."""
    name = Path(path).name
    name = name.removesuffix(".txt")
    name = name.removesuffix("-final_bundles")
    digits = len(name) - len(name.lstrip("0123456789"))
    if 0 < digits < len(name) - 1 and name[digits] == "-":
        name = name[digits + 1 :]
    return name or str(path)
