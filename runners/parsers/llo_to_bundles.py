"""TPU LLO bundle listings (and xprof's ``bundle_util`` JSON) → one record per program.

Why: a TPU core is VLIW; the static bundle count and slot occupancy of a program are deterministic for a fixed
compiler and flags, so a change in them (one more bundle in a loop body, an MXU op that moved, a new spill) is
exact evidence of a regression cause. This module only reads text; producing dumps is the caller's business.

Grammar (FORMATS.md "TPU LLO"): a bundle is ``ADDR : { ... }`` with ADDR decimal (form A, ``17``) or hex (form B,
``0x2a``). Form A puts the whole bundle on one line with ops separated by ``;``; form B writes one op a line and
closes with ``}`` on the last op's line. Both are one grammar here: inside a bundle, ops are separated by ``;`` or
by newlines, and empty pieces (``;;``) are skipped. An op is ``[dest[, dest] =] opcode[.modifier...] [operands]``.
``/* ... */`` comments may sit inside a line and after ``}`` (inside a bundle they must close on their line);
``//`` ends a line. Outside bundles: operand declarations (``%s0 = inlined_call_operand...``), ``#allocationN
[...]``, region markers (``$region0: #{name}``) and comments are recorded; other lines are counted in
``ignored_lines``.

Families come from opcode patterns (:func:`family`); ``vpop`` is classed by the FIFO it pops: ``mrf``/``mxu`` →
``mxu_pop``, ``trf``/``xlu`` → ``xlu``, ``erf``/``eup`` → ``eup``. A spill op is a vector or scalar load/store
(``vld*``, ``vst*``, ``sld*``, ``sst*``) whose opcode, destination or operands say ``spill``, or that names an
``#allocation`` whose declaration says ``spill`` (declarations may follow their use).

Decisions on ambiguous input:
  * a root region marker (``$regionN: #{name}`` without ``parent=``) names the program and, when the program so
    far already has bundles, starts the next one: this is the "several programs in one text" header. A repeat of
    the current program's marker changes nothing; a marker naming another program before any bundle is an error.
    Without markers a text is one program named by the ``program`` argument or its source's file name;
  * bundle addresses must increase within a program; a bundle line may hold at most 10,000 brackets, ``;`` and
    ``/`` (a bound counted at C speed before the Python-level scan). A ``{`` at bracket depth 0 inside an open
    bundle, an op that does not match the grammar, unbalanced brackets (ops never span lines), an unterminated
    ``/*``, text after ``}``, a bundle never closed, a line starting with a digit that is not a bundle header, a
    program without bundles, empty input, control bytes and lines over 1 MiB are all :class:`LloParseError`.
    ``{`` inside ``[...]`` is shape text (``shape index: {}``), not nesting;
  * branch targets: the last ``$N``/``$0xN``/``$-N`` token of a branch op not preceded by ``:`` (so not
    ``[vmem:$0x10]``). It is relative, counted in bundle addresses from the branch's own bundle (``$`` is "here",
    as in assemblers), when it has a sign or the opcode has a ``rel`` modifier; absolute otherwise. A branch to
    its own bundle or an earlier one is a loop from the target to the branch's bundle.
Every regex is anchored or starts on a literal, with no ambiguous adjacent quantifiers: linear in the line length.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runners.parsers.text_guard import ListingParseError, checked_lines

PARSER_VERSION = 1
MAX_LINE_CHARS = 1 << 20
MAX_NESTING = 32
MAX_LINE_TOKENS = 10_000  # brackets, ';' and '/' on one bundle line; a real bundle line has a few hundred at most
DEFAULT_MAX_BYTES = 64 << 20

FAMILIES = (
    "scalar", "vector_alu", "vector_load", "vector_store", "mxu_push", "mxu_matmul", "mxu_pop", "xlu", "eup", "dma",
    "branch", "other",
)
MXU_FAMILIES = frozenset({"mxu_push", "mxu_matmul", "mxu_pop"})
SPILL_KINDS = ("vector_spill_stores", "vector_spill_loads", "scalar_spill_stores", "scalar_spill_loads")

BRANCH = frozenset("br bra sbr jmp sjmp call scall ret sret halt shalt".split())
XLU = frozenset("vxpose vrot vperm vshuffle vbcast".split())
EUP = frozenset("vpow2 vexp vexp2 vrcp vtanh vlog vlog2 vrsqrt vsqrt vsigmoid vlogistic verf vsin vcos".split())
VECTOR_ALU = frozenset(
    "vadd vsub vmul vmax vmin vsel vcmp vand vor vxor vnot vshl vshr vshll vshrl vshra vmov vcvt vabs vneg vclamp "
    "vfma vmad vpack vunpack vclz vpcnt vcmask vimm vlaneseq vround vfloor vceil".split()
)
# bundle_util unit → op family (the MXU count is not split into push/matmul/pop, so it stays in slot_usage only)
UNIT_FAMILY = {
    "scalar_alu": "scalar", "vector_alu": "vector_alu", "vector_load": "vector_load", "vector_store": "vector_store",
    "vector_eup": "eup",
}


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
    bundles: tuple[LloBundle, ...] = field(repr=False)


_DIGITS = frozenset("0123456789")
_HEADER = re.compile(r"(0x[0-9a-fA-F]{1,16}|[0-9]{1,18})(?:[ \t]+([A-Z]{1,4}))?[ \t]*:[ \t]*(?:>[ \t]*)?\{")
_STRUCT = re.compile(r"/\*|\*/|//|[\[\](){};]")
_EQUALS = re.compile(r"/\*|\*/|[\[\](){}=]")
_DEST_NAMES = re.compile(r"(?:%[\w.]+|[A-Za-z_][\w.]*)(?:[ \t]*,[ \t]*(?:%[\w.]+|[A-Za-z_][\w.]*))*")
_DEST_GROUP = re.compile(r"\(.*\)|\[.*\]")
_OPCODE = re.compile(r"[a-z_][a-z0-9_]*(?:\.(?:[A-Za-z0-9_]+|<[a-z ]{1,40}>))*")
_TARGET = re.compile(r"(?<![\w:$])\$([+-]?)(0x[0-9a-fA-F]{1,16}|[0-9]{1,18})(?![\w])")
_UNIT = re.compile(r"(?<![a-z])(?:mrf|mxu)([0-9]{1,3})(?![0-9])")
_WORDS = re.compile(r"[a-z]+")
_BLANK = re.compile(r"\s*")
_ALLOC_REF = re.compile(r"#([A-Za-z_]\w*)")
_ALLOCATION = re.compile(r"#([A-Za-z_]\w*)[ \t]*\[(.*)\]")
_OPERAND_DECL = re.compile(r"%[\w.]+[ \t]*=[ \t]*inlined_call_operand")
_REGION = re.compile(r"\$region([0-9]{1,9}):[ \t]*#\{([^{}]*)\}(.*)")


def _check_text(text: str, source: str) -> list[str]:
    return checked_lines(text, source, LloParseError, MAX_LINE_CHARS)


def _read_capped(path: str | Path, max_bytes: int) -> str:
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


def _only_comments(text: str, source: str, number: int) -> bool:
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


def _outside_comment(text: str, source: str, number: int) -> bool:
    """Outside bundles a comment may run on past its line (it is then ignored text), unlike inside one."""
    try:
        return _only_comments(text, source, number)
    except LloParseError:
        return False


def _split_bundle_text(content: str, source: str, number: int) -> tuple[list[str], bool]:
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
            if not _only_comments(content[position:], source, number):
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
    opcode = _OPCODE.match(rest)
    if not opcode or (opcode.end() < len(rest) and rest[opcode.end()] not in " \t"):
        raise LloParseError(source, number, f"not an LLO op: {piece[:60]!r}")
    return dest, opcode.group(), rest[opcode.end() :].strip()


def _ops(pieces: list[str], number: int, source: str) -> list[tuple[int, str | None, str, str]]:
    kept = [piece.strip() for piece in pieces if not _only_comments(piece, source, number)]
    return [(number, *_op(piece, number, source)) for piece in kept]


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


@dataclass
class _RawBundle:
    address: int
    line: int
    marker: str | None
    ops: list[tuple[int, str | None, str, str]]  # (line, dest, opcode, operands)
    text: list[str]


class _Program:
    """Mutable builder of one program."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.raw: list[_RawBundle] = []
        self.operands: list[str] = []
        self.allocations: dict[str, str] = {}
        self.ignored = 0

    def finish(self, source: str, default_name: str) -> LloProgram:
        name = self.name or default_name
        if not self.raw:
            raise LloParseError(source, 0, f"program {name} has no bundles")
        spill_allocations = {key for key, body in self.allocations.items() if "spill" in body.lower()}
        bundles = [self._bundle(raw, spill_allocations, source) for raw in self.raw]
        per_family = dict.fromkeys(FAMILIES, 0)
        spills = dict.fromkeys(SPILL_KINDS, 0)
        histogram: dict[int, int] = {}
        units: set[str] = set()
        with_mxu = 0
        loops: dict[tuple[int, int], LloLoop] = {}
        addresses = [bundle.address for bundle in bundles]
        for bundle in bundles:
            histogram[len(bundle.ops)] = histogram.get(len(bundle.ops), 0) + 1
            with_mxu += any(op.family in MXU_FAMILIES for op in bundle.ops)
            for op in bundle.ops:
                per_family[op.family] += 1
                units.update([op.mxu] if op.mxu else [])
                if op.spill:
                    spills[op.spill] += 1
                if op.target is not None and op.target <= bundle.address and (op.target, bundle.address) not in loops:
                    inside = bisect_right(addresses, bundle.address) - bisect_left(addresses, op.target)
                    loops[(op.target, bundle.address)] = LloLoop(op.target, bundle.address, inside, op.line)
        return LloProgram(
            name=name, source=source, form="B" if any(bundle.form == "B" for bundle in bundles) else "A",
            bundle_count=len(bundles), op_count=sum(per_family.values()), ops_per_family=per_family,
            mxu_units=tuple(sorted(units, key=lambda unit: int(unit[3:]))),
            ops_per_bundle=dict(sorted(histogram.items())), mxu_bundle_share=with_mxu / len(bundles),
            loops=tuple(sorted(loops.values(), key=lambda loop: (loop.start, loop.end))), spills=spills,
            slot_usage={}, ignored_lines=self.ignored, operands=tuple(self.operands),
            allocations=dict(self.allocations), bundles=tuple(bundles),
        )

    @staticmethod
    def _bundle(raw: _RawBundle, spill_allocations: set[str], source: str) -> LloBundle:
        ops = []
        for number, dest, opcode, operands in raw.ops:
            context = f"{dest or ''} {operands}"
            kind = family(opcode, context)
            unit = _UNIT.search(f"{opcode} {context}") if kind in MXU_FAMILIES else None
            target = _target(opcode, operands, raw.address) if kind == "branch" else None
            ops.append(LloOp(dest, opcode, operands, kind, f"mxu{int(unit.group(1))}" if unit else None, target,
                             _spill(opcode, kind, context, spill_allocations), number))
        form = "A" if len(raw.text) == 1 else "B"
        return LloBundle(raw.address, raw.line, form, raw.marker, tuple(ops), "\n".join(raw.text))


def _spill(opcode: str, kind: str, context: str, spill_allocations: set[str]) -> str | None:
    base = opcode.split(".", 1)[0]
    if kind == "vector_store" or base.startswith("sst"):
        direction = "stores"
    elif kind == "vector_load" or base.startswith("sld"):
        direction = "loads"
    else:
        return None
    marked = "spill" in opcode.lower() or "spill" in context.lower()
    if not marked and not spill_allocations.intersection(_ALLOC_REF.findall(context)):
        return None
    return f"{'vector' if kind.startswith('vector') else 'scalar'}_spill_{direction}"


def parse_llo(text: str, source: str = "<llo>", program: str | None = None) -> list[LloProgram]:
    """Programs of a form A and/or form B bundle listing, in order; raises :class:`LloParseError`."""
    lines = _check_text(text, source)
    default_name = program or (source if source.startswith("<") else program_name_from_path(source))
    programs = [_Program(None)]
    open_bundle: _RawBundle | None = None
    for number, line in enumerate(lines, 1):
        current = programs[-1]
        stripped = line.strip()
        if open_bundle is not None:
            open_bundle.text.append(line)
            pieces, closed = _split_bundle_text(line, source, number)
            open_bundle.ops.extend(_ops(pieces, number, source))
            if closed:
                current.raw.append(open_bundle)
                open_bundle = None
            continue
        header = _HEADER.match(stripped) if stripped[:1] in _DIGITS else None
        if header:
            digits = header.group(1)
            address = int(digits[2:], 16) if digits.startswith("0x") else int(digits)
            if current.raw and address <= current.raw[-1].address:
                raise LloParseError(source, number, f"bundle address {digits} does not increase")
            pieces, closed = _split_bundle_text(stripped[header.end() :], source, number)
            bundle = _RawBundle(address, number, header.group(2), _ops(pieces, number, source), [line])
            if closed:
                current.raw.append(bundle)
            else:
                open_bundle = bundle
        elif stripped[:1] in _DIGITS:
            raise LloParseError(source, number, f"malformed bundle header: {stripped[:60]!r}")
        elif stripped.startswith("$region") and (region := _REGION.fullmatch(stripped)):
            name = region.group(2)
            if "parent=" in region.group(3) or name == current.name:
                pass
            elif current.raw:
                programs.append(_Program(name))
            elif current.name is None:
                current.name = name
            else:
                raise LloParseError(source, number, f"program {current.name} has no bundles before {name}")
        elif stripped.startswith("#") and (allocation := _ALLOCATION.fullmatch(stripped)):
            current.allocations[allocation.group(1)] = allocation.group(2)
        elif stripped.startswith("%") and _OPERAND_DECL.match(stripped):
            current.operands.append(stripped)
        elif stripped and not _outside_comment(stripped, source, number):
            current.ignored += 1
    if open_bundle is not None:
        raise LloParseError(source, open_bundle.line, "bundle '{' never closed (truncated input?)")
    return [p.finish(source, default_name) for p in programs]


def parse_llo_file(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES,
                   program: str | None = None) -> list[LloProgram]:
    """Parse a listing file (named after the file unless a header names it), refusing one over ``max_bytes``."""
    return parse_llo(_read_capped(path, max_bytes), str(path), program or program_name_from_path(path))


def _count(value: Any, key: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LloParseError(source, 0, f"{key} is not a non-negative integer: {str(value)[:40]!r}")
    return value


def _from_bundle_util(obj: Any, name: str, source: str) -> LloProgram:
    if not isinstance(obj, dict):
        raise LloParseError(source, 0, "bundle_util entry is not a JSON object")
    if "total_bundles" not in obj:
        raise LloParseError(source, 0, "bundle_util entry has no total_bundles")
    total = _count(obj["total_bundles"], "total_bundles", source)
    usage: dict[str, SlotUsage] = {}
    for key, value in obj.items():
        if isinstance(key, str) and key.endswith("_used"):
            unit = key[: -len("_used")]
            used = _count(value, key, source)
            available = _count(obj[f"{unit}_avail"], f"{unit}_avail", source) if f"{unit}_avail" in obj else None
            if available is not None and used > available:
                raise LloParseError(source, 0, f"{unit}: {used} used of {available} available")
            usage[unit] = SlotUsage(used, available)
    spills = {key: _count(value, key, source) for key, value in obj.items()
              if "spill" in key and not key.startswith("_") and not isinstance(value, str)}
    label = obj.get("program", obj.get("name"))
    return LloProgram(
        name=label if isinstance(label, str) and label else name, source=source, form="bundle_util",
        bundle_count=total, op_count=None,
        ops_per_family={UNIT_FAMILY[unit]: slot.used for unit, slot in usage.items() if unit in UNIT_FAMILY},
        mxu_units=(), ops_per_bundle={}, mxu_bundle_share=None, loops=(), spills=spills, slot_usage=usage,
        ignored_lines=0, operands=(), allocations={}, bundles=(),
    )


def parse_bundle_util_json(text: str, source: str = "<bundle_util>", program: str | None = None) -> list[LloProgram]:
    """xprof ``get_llo_static_analysis --mode=bundle_util`` JSON (an object, or a list of them) → program records
    holding what it reports: bundle count, per-unit used/available slots, spill counts. Keys starting with ``_`` are
    comments."""
    _check_text(text, source)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LloParseError(source, exc.lineno, f"not JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # over-long integers, pathological nesting
        raise LloParseError(source, 0, f"not usable JSON: {type(exc).__name__}") from None
    entries = document if isinstance(document, list) else [document]
    if not entries:
        raise LloParseError(source, 0, "empty bundle_util list")
    default = program or (source if source.startswith("<") else Path(source).stem)
    return [_from_bundle_util(entry, default if len(entries) == 1 else f"{default}#{i}", source)
            for i, entry in enumerate(entries)]


def parse_bundle_util_file(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES,
                           program: str | None = None) -> list[LloProgram]:
    return parse_bundle_util_json(_read_capped(path, max_bytes), str(path), program)
