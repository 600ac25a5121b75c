"""TPU LLO bundle listings → one record per program (xprof's ``bundle_util`` JSON: :mod:`llo_bundle_util`).

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

Speed: the text is read in ~1 MiB pieces (guarded piece by piece, the guards' errors still ranked before any
grammar error). A *plain* form A line matches one compiled pattern (no comments, braces, tabs, ``;`` or ``=``
inside brackets, brackets one deep, at most 16 ops), which hands back its address and opcode tokens. A piece made
only of plain lines is read by one ``findall`` and C-level ``map``/``Counter``/``array`` work; other pieces line by
line, plain lines by one match each and the rest by the general grammar (:mod:`llo_grammar`). Opcodes are
counted, and classed once per distinct opcode; only special ops (``vpop``, MXU ops, branches, and loads/stores on
a line that says ``spill`` or ``#``) are read further, by the same :func:`llo_grammar.classify` as every other op.
Bundle and op records are not built while reading: a program keeps each bundle's address, line and place in the
text, and builds a bundle's records when they are asked for (:class:`llo_grammar.Bundles`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate, chain, compress, islice, repeat
from operator import add, itemgetter, lt, methodcaller, not_
from pathlib import Path

from runners.parsers.llo_bundle_util import UNIT_FAMILY, parse_bundle_util_file, parse_bundle_util_json
from runners.parsers.llo_grammar import (
    BRANCH,
    EUP,
    HEADER,
    MAX_LINE_TOKENS,
    MAX_NESTING,
    OPCODE,
    VECTOR_ALU,
    XLU,
    OpcodeInfo,
    RawOp,
    classify,
    family,
    only_comments,
    opcode_info,
    ops,
    split_bundle_text,
)
from runners.parsers.llo_program import ProgramBuilder
from runners.parsers.llo_records import (
    DEFAULT_MAX_BYTES,
    FAMILIES,
    MXU_FAMILIES,
    SPILL_KINDS,
    LloBundle,
    LloLoop,
    LloOp,
    LloParseError,
    LloProgram,
    SlotUsage,
    program_name_from_path,
    read_capped,
)
from runners.parsers.text_guard import MAX_LINE_CHARS, control_byte, is_empty, long_line

__all__ = [  # what callers import from here, wherever it now lives
    "BRANCH", "DEFAULT_MAX_BYTES", "EUP", "FAMILIES", "MAX_LINE_CHARS", "MAX_LINE_TOKENS", "MAX_NESTING",
    "MXU_FAMILIES", "PARSER_VERSION", "SPILL_KINDS", "UNIT_FAMILY", "VECTOR_ALU", "XLU", "LloBundle", "LloLoop",
    "LloOp", "LloParseError", "LloProgram", "SlotUsage", "family", "parse_bundle_util_file",
    "parse_bundle_util_json", "parse_llo", "parse_llo_file", "program_name_from_path",
]

PARSER_VERSION = 1
PIECE_CHARS = 1 << 20  # the text is split into lines a piece of about this many characters at a time
PLAIN_MAX_OPS = 16  # a bundle line with more ops is read by the general grammar
PIECE_CACHE = 1 << 16  # distinct special-op texts remembered per parse
_CONTEXT_FREE, _NEEDS_ADDRESS, _LOADSTORE = 1, 2, 3  # a special op read from its text alone; a branch; a load/store

_DIGITS = frozenset("0123456789")
_ALLOCATION = re.compile(r"#([A-Za-z_]\w*)[ \t]*\[(.*)\]")
_OPERAND_DECL = re.compile(r"%[\w.]+[ \t]*=[ \t]*inlined_call_operand")
_REGION = re.compile(r"\$region([0-9]{1,9}):[ \t]*#\{([^{}]*)\}(.*)")


def _plain_line_source(max_ops: int) -> str:
    """A plain form A line; group 1 the address, groups 2.. the opcode tokens (None past the last op). Every
    character class excludes ``;`` and ``=``, so a match splits on ``;`` and ``=`` exactly where the general
    reader's top-level scan would; possessive quantifiers keep it linear. An opcode token is a valid opcode when
    the general grammar's opcode pattern matches all of it (checked once per distinct token)."""
    char = r"[^][(){};=/\t\r\n]"
    group = rf"(?:\[{char}*+\]|\({char}*+\))"
    dest = rf"(?:%[\w.]++|[A-Za-z_][\w.]*+|{group})"
    op = rf" *+(?:{dest} *+= *+)?+([a-z_][\w.]*+)(?: {char}*+(?:{group}{char}*+)*+)?+"
    more = ""
    for _ in range(max_ops - 1):
        more = rf"(?:;{op}{more})?+"
    return rf" *+(0x[0-9a-fA-F]{{1,16}}|[0-9]{{1,18}}) *+: *+\{{(?:{op}{more})?+\}} *+"


_PLAIN_LINE = re.compile(_plain_line_source(PLAIN_MAX_OPS), re.ASCII)
_PLAIN_ROWS = re.compile(rf"^{_plain_line_source(PLAIN_MAX_OPS)}$", re.ASCII | re.MULTILINE)
_ROW_OPCODES = itemgetter(slice(1, None))
_ROW_NONES = methodcaller("count", "")  # findall gives "" for an op group past the last op


def _pieces(text: str) -> Iterator[tuple[int, str]]:
    """(offset, piece) of consecutive pieces of ``text`` cut after a newline (which no piece holds): the lines of
    the pieces, in order, are those of ``text.split("\\n")``."""
    start = 0
    while (cut := text.find("\n", start + PIECE_CHARS)) >= 0:
        yield start, text[start:cut]
        start = cut + 1
    yield start, text[start:]


@dataclass
class _OpenBundle:
    address: int
    line: int
    start: int  # offset of its first line in the text
    ops: list[RawOp]


class _Reader:
    """Reads a listing's lines in order into programs."""

    def __init__(self, text: str, source: str) -> None:
        self.text, self.source = text, source
        self.programs = [ProgramBuilder(None)]
        self.open: _OpenBundle | None = None
        self.infos: dict[str, OpcodeInfo] = {}
        self.known: set[str] = set()
        self.special: set[str] = set()  # opcodes whose ops are read further (vpop, MXU ops, branches)
        self.loadstore: set[str] = set()  # opcodes of loads and stores (spills, on lines saying so)
        self.actions: dict[str, int] = {}  # opcode → what a plain line's op of it needs (_CONTEXT_FREE, ...)
        # a vpop or MXU op's text → (its family if classed by its text, its unit, an MXU op?)
        self.pieces: dict[str, tuple[str | None, str | None, bool]] = {}
        self.crlf = "\r" in text

    def info(self, opcode: str) -> OpcodeInfo:
        found = self.infos.get(opcode)
        if found is None:
            found = self.infos[opcode] = opcode_info(opcode)
            self.known.add(opcode)
            if found.special:
                self.special.add(opcode)
            if found.loadstore:
                self.loadstore.add(opcode)
            self.actions[opcode] = (_CONTEXT_FREE if found.special and found.family != "branch" else
                                    _NEEDS_ADDRESS if found.special else _LOADSTORE if found.loadstore else 0)
        return found

    def _learn(self, tokens: tuple[str, ...]) -> bool:
        """Learns a plain line's new opcode tokens; False when one is not an opcode (the line is not plain)."""
        for token in tokens:
            if token not in self.known:
                if not OPCODE.fullmatch(token):
                    return False
                self.info(token)
        return True

    def feed(self, number: int, offset: int, piece: str, lines: list[str]) -> None:
        """Reads the lines of ``piece``, the first numbered ``number`` at ``offset`` in the text."""
        if not self._bulk(number, offset, piece, lines):
            self._lines(number, offset, lines)

    def _bulk(self, number: int, offset: int, piece: str, lines: list[str]) -> bool:
        """Reads a piece made only of plain lines at C speed (one ``findall``, then ``map``, ``Counter`` and
        ``array.extend``; Python per line only for lines with special ops). False, having changed nothing, for any
        other piece: its lines are then read one at a time."""
        count = len(lines) - (lines[-1] == "")  # the last piece may end with the text's last newline
        if self.open is not None or not piece.isascii() or max(map(len, lines)) > MAX_LINE_TOKENS:
            return False
        rows = _PLAIN_ROWS.findall(piece)
        if len(rows) != count or not rows:  # a match is one whole line, so equal counts mean every line matched
            return False
        opcodes = list(filter(None, chain.from_iterable(map(_ROW_OPCODES, rows))))
        # dict.fromkeys, not set: opcodes learnt in text order, the same in every process whatever the hash seed
        if not self.known.issuperset(opcodes) and not self._learn(tuple(dict.fromkeys(opcodes))):
            return False
        digits = [row[0] for row in rows]
        if any(map(methodcaller("startswith", "0x"), digits)):
            addresses = [int(text, 16) if text[1:2] == "x" else int(text) for text in digits]
        else:
            addresses = list(map(int, digits))
        program = self.programs[-1]
        if (program.addresses and addresses[0] <= program.addresses[-1]) or not all(
                map(lt, addresses, islice(addresses, 1, None))):
            return False  # the line-at-a-time reading raises at the right line
        lengths = list(map(len, islice(lines, count)))
        starts = list(islice(accumulate(map(add, lengths, repeat(1)), initial=offset), count))
        for index in self._special_rows(piece, rows, starts, offset):
            row = rows[index]
            line = lines[index]
            program.with_mxu += self._special_ops(program, line, tuple(filter(None, row[1:])), addresses[index],
                                                  number + index, "#" in line or "spill" in line.lower())
        program.counts.update(opcodes)
        for nones, bundles in Counter(map(_ROW_NONES, rows)).items():
            program.histogram[PLAIN_MAX_OPS - nones] += bundles
        program.addresses.extend(addresses)
        program.lines.extend(range(number, number + count))
        program.starts.extend(starts)
        program.ends.extend(map(add, starts, lengths))
        return True

    def _special_rows(self, piece: str, rows: list[tuple[str, ...]], starts: list[int], offset: int) -> list[int]:
        """Indexes of the rows with ops to read further: a special op, or a load/store on a line saying "spill"
        or "#" (found by searching the piece, which is ASCII, so its lower-case copy has the same offsets)."""
        special, loadstore = self.special, self.loadstore
        found = set(compress(range(len(rows)), map(not_, map(special.isdisjoint, rows))))
        lowered = piece.lower()
        for word in ("spill", "#"):
            at = lowered.find(word)
            while at >= 0:
                index = bisect_right(starts, offset + at) - 1
                if not loadstore.isdisjoint(rows[index]):
                    found.add(index)
                at = lowered.find(word, starts[index + 1] - offset if index + 1 < len(starts) else len(piece))
        return sorted(found)

    def _lines(self, number: int, offset: int, lines: list[str]) -> None:
        """Reads lines one at a time: plain ones by one match each, the others by the general grammar."""
        plain, known, special, loadstore = _PLAIN_LINE.fullmatch, self.known, self.special, self.loadstore
        program = self.programs[-1]
        for number, line in enumerate(lines, number):  # noqa: B020 (numbering continues from the argument)
            start = offset
            offset += len(line) + 1
            if self.crlf and line[-1:] == "\r":
                line = line[:-1]
            match = plain(line) if self.open is None and len(line) <= MAX_LINE_TOKENS else None
            if match is not None:
                groups, last = match.groups(), match.lastindex or 1
                opcodes = groups[1:last]
                if not known.issuperset(opcodes) and not self._learn(opcodes):
                    match = None
            if match is None:
                self._line(program, line, number, start)
                program = self.programs[-1]  # a region marker may have begun the next program
                continue
            digits = groups[0]
            address = int(digits, 16) if digits[1:2] == "x" else int(digits)
            if program.addresses and address <= program.addresses[-1]:
                raise LloParseError(self.source, number, f"bundle address {digits} does not increase")
            program.counts.update(opcodes)
            spill_words = "#" in line or "spill" in line.lower()
            if not special.isdisjoint(opcodes) or (spill_words and not loadstore.isdisjoint(opcodes)):
                program.with_mxu += self._special_ops(program, line, opcodes, address, number, spill_words)
            program.add_bundle(address, number, start, start + len(line), last - 1)

    def _special_ops(self, program: ProgramBuilder, line: str, opcodes: tuple[str, ...], address: int, number: int,
                     spill_words: bool) -> bool:
        """Reads a plain line's special ops further; True when one is an MXU op. ``spill_words``: the line says
        "spill" or "#", so its loads and stores may be spills."""
        actions, pieces = self.actions, self.pieces
        mxu = False
        content = line[line.index("{") + 1 : line.rindex("}")]
        for opcode, piece in zip(opcodes, content.split(";"), strict=True):
            action = actions[opcode]
            if action == _CONTEXT_FREE:  # vpop and MXU ops: the op's text says all, and repeats
                seen = pieces.get(piece)
                if seen is None:
                    found = classify(self.infos[opcode], opcode, *_dest_operands(piece, opcode), address)
                    seen = (found.family if self.infos[opcode].contextual else None, found.mxu,
                            found.family in MXU_FAMILIES)
                    if len(pieces) < PIECE_CACHE:
                        pieces[piece] = seen
                contextual, unit, is_mxu = seen
                if contextual:
                    program.contextual[contextual] += 1
                if unit:
                    program.units.add(unit)
                mxu = mxu or is_mxu
            elif action == _NEEDS_ADDRESS or (action == _LOADSTORE and spill_words):
                info = self.infos[opcode]
                found = classify(info, opcode, *_dest_operands(piece, opcode), address)
                mxu = program.apply(info, found, address, number) or mxu
        return mxu

    def _close(self, program: ProgramBuilder, bundle: _OpenBundle, end: int, last_line: int) -> None:
        mxu = False
        program.counts.update(opcode for _, _, opcode, _ in bundle.ops)
        for line, dest, opcode, operands in bundle.ops:
            info = self.info(opcode)
            if info.special or info.loadstore:
                mxu |= program.apply(info, classify(info, opcode, dest, operands, bundle.address), bundle.address, line)
        program.multi_line |= last_line != bundle.line
        program.with_mxu += mxu
        program.add_bundle(bundle.address, bundle.line, bundle.start, end, len(bundle.ops))

    def _line(self, current: ProgramBuilder, line: str, number: int, start: int) -> None:
        """Any line the plain pattern does not take: the general grammar (:mod:`llo_grammar`)."""
        source = self.source
        if self.open is not None:
            pieces, closed = split_bundle_text(line, source, number)
            self.open.ops.extend(ops(pieces, number, source))
            if closed:
                self._close(current, self.open, start + len(line), number)
                self.open = None
            return
        stripped = line.strip()
        header = HEADER.match(stripped) if stripped[:1] in _DIGITS else None
        if header:
            digits = header.group(1)
            address = int(digits[2:], 16) if digits.startswith("0x") else int(digits)
            if current.addresses and address <= current.addresses[-1]:
                raise LloParseError(source, number, f"bundle address {digits} does not increase")
            pieces, closed = split_bundle_text(stripped[header.end() :], source, number)
            bundle = _OpenBundle(address, number, start, ops(pieces, number, source))
            if closed:
                self._close(current, bundle, start + len(line), number)
            else:
                self.open = bundle
        elif stripped[:1] in _DIGITS:
            raise LloParseError(source, number, f"malformed bundle header: {stripped[:60]!r}")
        elif stripped.startswith("$region") and (region := _REGION.fullmatch(stripped)):
            name = region.group(2)
            if "parent=" in region.group(3) or name == current.name:
                pass
            elif current.addresses:
                self.programs.append(ProgramBuilder(name))
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

def _dest_operands(piece: str, opcode: str) -> tuple[str | None, str]:
    """Dest and operands of an op of a plain line, whose only '=' (if any) ends its dest."""
    left, equals, right = piece.partition("=")
    dest, rest = (left.strip(), right.strip()) if equals else (None, piece.strip())
    return dest, rest[len(opcode) :].strip()


def _outside_comment(text: str, source: str, number: int) -> bool:
    """Outside bundles a comment may run on past its line (it is then ignored text), unlike inside one."""
    try:
        return only_comments(text, source, number)
    except LloParseError:
        return False


def parse_llo(text: str, source: str = "<llo>", program: str | None = None) -> list[LloProgram]:
    """Programs of a form A and/or form B bundle listing, in order; raises :class:`LloParseError`.

    Errors rank as if the whole text were guarded first: a long line anywhere, then a control byte anywhere,
    then the first grammar error."""
    if is_empty(text):
        raise LloParseError(source, 1, "empty input")
    default_name = program or (source if source.startswith("<") else program_name_from_path(source))
    reader = _Reader(text, source)
    control: LloParseError | None = None
    grammar: LloParseError | None = None
    number = 1
    for offset, piece in _pieces(text):
        lines = piece.split("\n")
        found = long_line(lines, MAX_LINE_CHARS)
        if found:
            raise LloParseError(source, number + found[0], found[1])
        if control is None:
            found = control_byte(lines, piece)
            if found:
                control = LloParseError(source, number + found[0], found[1])
            elif grammar is None:
                try:
                    reader.feed(number, offset, piece, lines)
                except LloParseError as error:
                    grammar = error
        number += len(lines)
    if control is not None:
        raise control
    if grammar is not None:
        raise grammar
    if reader.open is not None:
        raise LloParseError(source, reader.open.line, "bundle '{' never closed (truncated input?)")
    return [p.build(text, source, default_name, reader.infos) for p in reader.programs]


def parse_llo_file(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES,
                   program: str | None = None) -> list[LloProgram]:
    """Parse a listing file (named after the file unless a header names it), refusing one over ``max_bytes``."""
    return parse_llo(read_capped(path, max_bytes), str(path), program or program_name_from_path(path))
