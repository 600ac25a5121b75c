"""The LLO bundle grammar, op by op: splitting a line of bundle content into ops, reading an op, its slot family,
MXU unit, branch target and spill kind; and reading a bundle's records back from its text.

``llo_to_bundles`` (which documents the grammar) runs these on every line that its fast path for plain form A
lines does not take, and on any bundle whose records are asked for; both paths give the same answers because the
fast path hands its special ops to :func:`classify` too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from runners.parsers.llo_records import MXU_FAMILIES, LloBundle, LloOp, LloParseError

MAX_NESTING = 32
MAX_LINE_TOKENS = 10_000  # brackets, ';' and '/' on one bundle line; a real bundle line has a few hundred at most

BRANCH = frozenset("br bra sbr jmp sjmp call scall ret sret halt shalt".split())
XLU = frozenset("vxpose vrot vperm vshuffle vbcast".split())
EUP = frozenset("vpow2 vexp vexp2 vrcp vtanh vlog vlog2 vrsqrt vsqrt vsigmoid vlogistic verf vsin vcos".split())
VECTOR_ALU = frozenset(
    "vadd vsub vmul vmax vmin vsel vcmp vand vor vxor vnot vshl vshr vshll vshrl vshra vmov vcvt vabs vneg vclamp "
    "vfma vmad vpack vunpack vclz vpcnt vcmask vimm vlaneseq vround vfloor vceil".split()
)

HEADER = re.compile(r"(0x[0-9a-fA-F]{1,16}|[0-9]{1,18})(?:[ \t]+([A-Z]{1,4}))?[ \t]*:[ \t]*(?:>[ \t]*)?\{")
_STRUCT = re.compile(r"/\*|\*/|//|[\[\](){};]")
_EQUALS = re.compile(r"/\*|\*/|[\[\](){}=]")
_DEST_NAMES = re.compile(r"(?:%[\w.]+|[A-Za-z_][\w.]*)(?:[ \t]*,[ \t]*(?:%[\w.]+|[A-Za-z_][\w.]*))*")
_DEST_GROUP = re.compile(r"\(.*\)|\[.*\]")
OPCODE = re.compile(r"[a-z_][a-z0-9_]*(?:\.(?:[A-Za-z0-9_]+|<[a-z ]{1,40}>))*")
_TARGET = re.compile(r"(?<![\w:$])\$([+-]?)(0x[0-9a-fA-F]{1,16}|[0-9]{1,18})(?![\w])")
_UNIT = re.compile(r"(?<![a-z])(?:mrf|mxu)([0-9]{1,3})(?![0-9])")
_WORDS = re.compile(r"[a-z]+")
_BLANK = re.compile(r"\s*")
_ALLOC_REF = re.compile(r"#([A-Za-z_]\w*)")

RawOp = tuple[int, str | None, str, str]  # (line, dest, opcode, operands)


def family(opcode: str, text: str = "") -> str:
    """Slot family of an opcode (``vmatmul.bf16.mxu1``); ``text`` (dest and operands) decides what ``vpop`` pops."""
    base = opcode.split(".", 1)[0]
    if base in BRANCH:
        return "branch"
    if base.startswith("dma"):
        return "dma"
    if base == "vpop":  # a result FIFO: mrf (MXU), trf (transpose unit, XLU) or erf (EUP)
        words = set(_WORDS.findall(f"{opcode} {text}".lower()))
        for names, result in ((("mrf", "mxu"), "mxu_pop"), (("trf", "xlu"), "xlu"), (("erf", "eup"), "eup")):
            if words.intersection(names):
                return result
        return "other"
    if base.startswith("vmatpush"):
        return "mxu_push"
    if base.startswith("vmatmul"):
        return "mxu_matmul"
    if base.startswith("vld"):
        return "vector_load"
    if base.startswith("vst"):
        return "vector_store"
    if base in XLU or "xlane" in base:
        return "xlu"
    if base in EUP:
        return "eup"
    if base in VECTOR_ALU:
        return "vector_alu"
    return "scalar" if base.startswith("s") else "other"


@dataclass(frozen=True)
class OpcodeInfo:
    """What an opcode alone says. ``contextual``: its family depends on dest and operands (``vpop``); ``special``:
    its records need dest and operands (contextual, MXU unit, branch target); ``loadstore``: it may be a spill."""

    family: str
    contextual: bool
    special: bool
    loadstore: bool
    direction: str | None  # "stores" / "loads" for loadstore opcodes
    width: str  # "vector" / "scalar": the spill kind's first word


def opcode_info(opcode: str) -> OpcodeInfo:
    base = opcode.split(".", 1)[0]
    kind = family(opcode)
    contextual = base == "vpop"
    if kind == "vector_store" or base.startswith("sst"):
        direction: str | None = "stores"
    elif kind == "vector_load" or base.startswith("sld"):
        direction = "loads"
    else:
        direction = None
    special = contextual or kind in MXU_FAMILIES or kind == "branch"
    return OpcodeInfo(kind, contextual, special, direction is not None, direction,
                      "vector" if kind.startswith("vector") else "scalar")


@dataclass(frozen=True)
class Classified:
    family: str
    mxu: str | None
    target: int | None
    spill: str | None  # a spill kind the op itself shows ("spill" in its text)
    spill_refs: tuple[str, ...]  # else the #allocations it names, a spill if one of them is declared a spill slot


def classify(info: OpcodeInfo, opcode: str, dest: str | None, operands: str, address: int) -> Classified:
    """Family, unit, target and spill evidence of one op."""
    context = f"{dest or ''} {operands}"
    kind = family(opcode, context) if info.contextual else info.family
    unit = _UNIT.search(f"{opcode} {context}") if kind in MXU_FAMILIES else None
    target = _target(opcode, operands, address) if kind == "branch" else None
    spill, refs = None, ()
    if info.loadstore:
        if "spill" in opcode.lower() or "spill" in context.lower():
            spill = f"{info.width}_spill_{info.direction}"
        else:
            refs = tuple(_ALLOC_REF.findall(context))
    return Classified(kind, f"mxu{int(unit.group(1))}" if unit else None, target, spill, refs)


def _target(opcode: str, operands: str, address: int) -> int | None:
    matches = list(_TARGET.finditer(operands))
    if not matches:
        return None
    last = matches[-1]
    digits = last.group(2)
    value = int(digits[2:], 16) if digits.startswith("0x") else int(digits)
    relative = bool(last.group(1)) or "rel" in opcode.split(".")[1:]
    if last.group(1) == "-":
        value = -value
    return address + value if relative else value


def only_comments(text: str, source: str, number: int) -> bool:
    """True when ``text`` is whitespace and complete comments; an unterminated ``/*`` is an error."""
    position = 0
    while True:
        blank = _BLANK.match(text, position)
        position = blank.end() if blank else position
        if position == len(text) or text.startswith("//", position):
            return True
        if not text.startswith("/*", position):
            return False
        end = text.find("*/", position + 2)
        if end < 0:
            raise LloParseError(source, number, "unterminated '/*' comment")
        position = end + 2


def split_bundle_text(content: str, source: str, number: int) -> tuple[list[str], bool]:
    """Op pieces of one line of bundle content, split on top-level ';', and whether a top-level '}' closed it."""
    tokens = sum(content.count(char) for char in "[](){};/")  # C-speed bound on the Python loop below
    if tokens > MAX_LINE_TOKENS:
        raise LloParseError(source, number, f"{tokens} brackets, ';' and '/' on one line (> {MAX_LINE_TOKENS})")
    pieces: list[str] = []
    stack: list[str] = []
    start = position = 0
    while match := _STRUCT.search(content, position):
        token, position = match.group(), match.end()
        if token == "/*":
            close = content.find("*/", position)
            if close < 0:
                raise LloParseError(source, number, "unterminated '/*' comment")
            position = close + 2
        elif token == "*/":
            raise LloParseError(source, number, "'*/' without '/*'")
        elif token == "//":
            if not stack:
                pieces.append(content[start : match.start()])
                return pieces, False
        elif token in "[({":
            if token == "{" and not stack:
                raise LloParseError(source, number, "'{' inside an open bundle (bundles do not nest)")
            stack.append(token)
            if len(stack) > MAX_NESTING:
                raise LloParseError(source, number, f"brackets nested deeper than {MAX_NESTING}")
        elif token == ";":
            if not stack:
                pieces.append(content[start : match.start()])
                start = position
        elif not stack:
            if token != "}":
                raise LloParseError(source, number, f"unbalanced {token!r}")
            pieces.append(content[start : match.start()])
            if not only_comments(content[position:], source, number):
                raise LloParseError(source, number, "text after a bundle's closing '}'")
            return pieces, True
        elif {"]": "[", ")": "(", "}": "{"}[token] != stack.pop():
            raise LloParseError(source, number, f"mismatched {token!r}")
    if stack:
        raise LloParseError(source, number, f"unclosed {stack[-1]!r} (an op cannot span lines)")
    pieces.append(content[start:])
    return pieces, False


def _top_level_equals(piece: str) -> int:
    depth, in_comment = 0, False
    for match in _EQUALS.finditer(piece):
        token = match.group()
        if in_comment:
            in_comment = token != "*/"
        elif token == "/*":
            in_comment = True
        elif token in "[({":
            depth += 1
        elif token in "])}":
            depth -= 1
        elif token == "=" and depth == 0:
            return match.start()
    return -1


def _op(piece: str, number: int, source: str) -> tuple[str | None, str, str]:
    """(dest, opcode, operands) of one op, or LloParseError."""
    dest: str | None = None
    rest = piece
    equals = _top_level_equals(piece)
    if equals >= 0:
        left = piece[:equals].strip()
        if _DEST_NAMES.fullmatch(left) or _DEST_GROUP.fullmatch(left):
            dest, rest = left, piece[equals + 1 :].strip()
        elif not left:
            raise LloParseError(source, number, f"'=' without a destination: {piece[:60]!r}")
    opcode = OPCODE.match(rest)
    if not opcode or (opcode.end() < len(rest) and rest[opcode.end()] not in " \t"):
        raise LloParseError(source, number, f"not an LLO op: {piece[:60]!r}")
    return dest, opcode.group(), rest[opcode.end() :].strip()


def ops(pieces: list[str], number: int, source: str) -> list[RawOp]:
    kept = [piece.strip() for piece in pieces if not only_comments(piece, source, number)]
    return [(number, *_op(piece, number, source)) for piece in kept]


def read_bundle(lines: list[str], number: int, source: str) -> tuple[int, str | None, list[RawOp]]:
    """(address, marker, ops) of a bundle's lines (header first), already known to be well formed."""
    stripped = lines[0].strip()
    header = HEADER.match(stripped)
    if header is None:
        raise LloParseError(source, number, "not a bundle header")
    digits = header.group(1)
    address = int(digits[2:], 16) if digits.startswith("0x") else int(digits)
    pieces, _ = split_bundle_text(stripped[header.end() :], source, number)
    found = ops(pieces, number, source)
    for offset, line in enumerate(lines[1:], 1):
        found.extend(ops(split_bundle_text(line, source, number + offset)[0], number + offset, source))
    return address, header.group(2), found


class Bundles(Sequence[LloBundle]):
    """A program's bundles, read back from the listing's text when asked for: ``(start, end)`` offsets of each
    bundle's lines in ``text`` and the line number of its header. ``spill_allocations`` are the program's
    ``#allocation`` names declared as spill slots (a declaration may follow its use)."""

    def __init__(self, text: str, source: str, starts: Sequence[int], ends: Sequence[int], lines: Sequence[int],
                 spill_allocations: frozenset[str]) -> None:
        self._text, self._source = text, source
        self._starts, self._ends, self._lines = starts, ends, lines
        self._spill_allocations = spill_allocations

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> LloBundle: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[LloBundle, ...]: ...

    def __getitem__(self, index: int | slice) -> LloBundle | tuple[LloBundle, ...]:
        if isinstance(index, slice):
            return tuple(self._bundle(i) for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("bundle index out of range")
        return self._bundle(index)

    def __iter__(self) -> Iterator[LloBundle]:
        return (self._bundle(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{len(self)} bundles of {self._source}>"

    def _bundle(self, index: int) -> LloBundle:
        lines = [line.removesuffix("\r") for line in
                 self._text[self._starts[index] : self._ends[index]].split("\n")]
        number = self._lines[index]
        address, marker, raw = read_bundle(lines, number, self._source)
        records = []
        for line, dest, opcode, operands in raw:
            found = classify(opcode_info(opcode), opcode, dest, operands, address)
            spill = found.spill
            if spill is None and self._spill_allocations.intersection(found.spill_refs):
                info = opcode_info(opcode)
                spill = f"{info.width}_spill_{info.direction}"
            records.append(LloOp(dest, opcode, operands, found.family, found.mxu, found.target, spill, line))
        return LloBundle(address, number, "A" if len(lines) == 1 else "B", marker, tuple(records), "\n".join(lines))
