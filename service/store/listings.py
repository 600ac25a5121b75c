"""A stored kernel artifact's text → the rows of one kernel's listing (x86 or SASS instructions, TPU LLO bundles).

Pure: bytes in, plain records out. Stored records keep counts, not code, so a listing is re-derived from the
artifact it was parsed from, by the same parsers the ingest used (``runners.parsers``), each one artifact read
once per page. A kernel's listing is that parser's per-kernel record as it is; the only extra work here is
laying LLO ops out in one column per slot family, and marking loops: the LLO parser reports them; the x86 and
SASS parsers do not, so a branch back to an earlier address of the same kernel marks one (the loop's body is
the target up to the branch), which is what a reader of the listing does by eye.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice

from runners.parsers import llo_to_bundles, sass_to_kernels, x86_obj_to_kernels
from runners.parsers.llo_records import FAMILIES, LloBundle

MAX_ROWS = 20_000  # a page of a million bundles helps no one; the counts on top speak for all of them
_HEX_TARGET = re.compile(r"(?:^|[\s,])0x([0-9a-fA-F]{1,16})\s*;?\s*$")
_SASS_LABEL = re.compile(r"(\.?[A-Za-z_$][\w.$]{0,200}):")
_SASS_LABEL_REF = re.compile(r"`\((\.?[A-Za-z_$][\w.$]{0,200})\)")
_SASS_ADDRESS = re.compile(r"/\*([0-9a-fA-F]{1,16})\*/")


@dataclass(frozen=True)
class LoopSpan:
    start: int  # address of the loop head (the branch target)
    end: int  # address of the instruction or bundle holding the backward branch
    rows: int  # instructions or bundles in the body


@dataclass(frozen=True)
class ListingRow:
    index: int
    address: int
    text: str  # the whole instruction (x86, SASS) or bundle (LLO) as printed
    opcode: str = ""
    operands: str = ""
    cls: str = ""  # the parser's class of the instruction (x86 mix class, SASS category); "" for LLO bundles
    predicate: str = ""
    slots: tuple[tuple[str, ...], ...] = ()  # LLO: the ops of each slot-family column, in ``columns`` order
    marker: str = ""
    loop_depth: int = 0  # how many loop bodies hold this row
    loop_head: bool = False
    loop_back: bool = False  # the row branching back


@dataclass(frozen=True)
class ParsedListing:
    columns: tuple[str, ...]  # LLO slot families shown as columns; empty for x86/SASS
    rows: list[ListingRow]
    loops: list[LoopSpan]
    total_rows: int  # before MAX_ROWS
    note: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


def slot_columns(mix: dict[str, int]) -> tuple[str, ...]:
    """The slot families a program uses, in the canonical order; a family it never uses would be a column of
    blanks, so it is left out (the counts on top still list it as zero)."""
    used = tuple(f for f in FAMILIES if mix.get(f, 0) > 0)
    unknown = tuple(sorted(f for f, n in mix.items() if n > 0 and f not in FAMILIES))
    return used + unknown


def slot_cells(ops: Iterable[tuple[str, str]], columns: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """(family, op text) pairs of one bundle → one cell per column; an empty tuple is a visibly empty slot."""
    cells: dict[str, list[str]] = {c: [] for c in columns}
    for fam, text in ops:
        cells.setdefault(fam if fam in cells else "other", []).append(text)
    return tuple(tuple(cells[c]) for c in columns)


def mark_loops(addresses: Sequence[int], targets: Sequence[int | None]) -> list[LoopSpan]:
    """Loops of a straight listing: each branch whose target is its own address or an earlier one in the listing."""
    present = set(addresses)
    loops = []
    for address, target in zip(addresses, targets, strict=True):
        if target is not None and target <= address and target in present:
            rows = sum(1 for a in addresses if target <= a <= address)
            loops.append(LoopSpan(start=target, end=address, rows=rows))
    return sorted(loops, key=lambda lp: (lp.start, -lp.end))  # outer loops before the loops they hold


def _with_loops(rows: list[ListingRow], loops: Sequence[LoopSpan]) -> list[ListingRow]:
    if not loops:
        return rows
    out = []
    for row in rows:
        depth = sum(1 for lp in loops if lp.start <= row.address <= lp.end)
        head = any(lp.start == row.address for lp in loops)
        back = any(lp.end == row.address for lp in loops)
        out.append(ListingRow(**{**row.__dict__, "loop_depth": depth, "loop_head": head, "loop_back": back}))
    return out


def branch_target(operands: str) -> int | None:
    """The absolute address a direct branch names (``0x1a2``, as objdump/capstone and cuobjdump print it)."""
    match = _HEX_TARGET.search(operands)
    if match is None or "[" in operands or "`" in operands:
        return None  # indirect, or a label the listing does not resolve
    return int(match.group(1), 16)


def x86_listing(data: bytes, source: str, name: str) -> ParsedListing | None:
    kernels = x86_obj_to_kernels.parse_x86_object(data, source)
    kernel = next((k for k in kernels if k.name[:1000] == name), None)
    if kernel is None:
        return None
    insns = kernel.instructions
    targets = [branch_target(i.operands) if i.kind == "branch" and i.mnemonic not in ("call", "ret") else None
               for i in insns]
    loops = mark_loops([i.address for i in insns], targets)
    rows = [ListingRow(index=n, address=i.address, text=f"{i.mnemonic} {i.operands}".rstrip(), opcode=i.mnemonic,
                       operands=i.operands, cls=i.kind) for n, i in enumerate(islice(insns, MAX_ROWS))]
    return ParsedListing(columns=(), rows=_with_loops(rows, loops), loops=loops, total_rows=len(insns))


def sass_labels(text: str) -> dict[str, int]:
    """Labels of a cuobjdump listing (``.L_x_0:`` on its own line) → the address of the instruction after them."""
    labels: dict[str, int] = {}
    pending: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        label = _SASS_LABEL.fullmatch(stripped)
        if label:
            pending.append(label.group(1))
            continue
        address = _SASS_ADDRESS.search(line)
        if address and pending:
            labels.update(dict.fromkeys(pending, int(address.group(1), 16)))
            pending = []
    return labels


def _sass_target(operands: str, labels: dict[str, int]) -> int | None:
    label = _SASS_LABEL_REF.search(operands)
    return labels.get(label.group(1)) if label else branch_target(operands)


def sass_listing(text: str, source: str, name: str) -> ParsedListing | None:
    kernels = sass_to_kernels.parse_sass(text, source)
    kernel = next((k for k in kernels if k.name[:1000] == name), None)
    if kernel is None:
        return None
    insns = kernel.instructions
    labels = sass_labels(kernel.text)
    # An unpredicated branch to itself is the trap cuobjdump prints after EXIT (``BRA 0x160`` at 0x160): padding,
    # never executed, so not a loop.
    targets = [None if i.opcode not in ("BRA", "BRX", "JMP")
               else None if (t := _sass_target(i.operands, labels)) == i.address and not i.predicate else t
               for i in insns]
    loops = mark_loops([i.address for i in insns], targets)
    rows = []
    for n, i in enumerate(islice(insns, MAX_ROWS)):
        opcode = ".".join((i.opcode, *i.modifiers))
        rows.append(ListingRow(index=n, address=i.address, text=f"{opcode} {i.operands}".rstrip(), opcode=opcode,
                               operands=i.operands, cls=i.category, predicate=i.predicate or ""))
    return ParsedListing(columns=(), rows=_with_loops(rows, loops), loops=loops, total_rows=len(insns))


def _op_text(dest: str | None, opcode: str, operands: str) -> str:
    body = f"{opcode} {operands}".rstrip()
    return f"{dest} = {body}" if dest else body


def _bundle_row(n: int, bundle: LloBundle, columns: Sequence[str]) -> ListingRow:
    cells = slot_cells(((op.family, _op_text(op.dest, op.opcode, op.operands)) for op in bundle.ops), columns)
    return ListingRow(index=n, address=bundle.address, text=bundle.text, slots=cells, marker=bundle.marker or "")


def llo_listing(text: str, source: str, name: str) -> ParsedListing | None:
    programs = llo_to_bundles.parse_llo(text, source, llo_to_bundles.program_name_from_path(source))
    program = next((p for p in programs if p.name[:1000] == name), None)
    if program is None:
        return None
    columns = slot_columns(program.ops_per_family)
    loops = sorted((LoopSpan(lp.start, lp.end, lp.bundle_count) for lp in program.loops),
                   key=lambda lp: (lp.start, -lp.end))
    if program.form == "bundle_util":
        return ParsedListing(columns=columns, rows=[], loops=loops, total_rows=0,
                             note="This program came as bundle_util JSON: it gives slot totals, not bundles.")
    rows = [_bundle_row(n, b, columns) for n, b in enumerate(islice(program.bundles, MAX_ROWS))]
    return ParsedListing(columns=columns, rows=_with_loops(rows, loops), loops=loops,
                         total_rows=program.bundle_count)


def listing_from_artifact(kind: str, data: bytes, source: str, name: str) -> ParsedListing | None:
    """One kernel's listing from the artifact it was parsed from; None where the artifact does not hold it.
    Raises the parser's ValueError on an artifact it cannot read."""
    if kind == "x86-obj":
        return x86_listing(data, source, name)
    text = data.decode("utf-8")
    if kind == "sass":
        return sass_listing(text, source, name)
    if kind == "llo":
        return llo_listing(text, source, name)
    return None
