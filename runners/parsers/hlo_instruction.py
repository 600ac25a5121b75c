"""One line of optimized HLO text → an :class:`Instruction`; the line-level grammar of ``hlo_text_to_module``.

An instruction line is ``[ROOT] %name = shape opcode(operands)[, attribute=value...]``; a value may hold nested
brackets and quoted strings, and ``metadata={...}`` names the framework op and the source (``op_name``,
``stack_frame_id``, or the older ``source_file``/``source_line``), resolved against the module's tables by
``hlo_text_to_module``. Hostile input is a :class:`HloParseError` naming the source and line. Lines are
length-checked before any regex; every regex is linear; brackets are matched by a loop with a nesting limit, never
by recursion.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

MAX_LINE_CHARS = 1 << 20
MAX_NESTING = 64
MAX_LINE_STRUCTURE = 100_000  # brackets, commas and quotes in one line: bounds the work done per line in Python

CALL_ATTRIBUTES = frozenset({"calls", "to_apply", "body", "condition", "branch_computations", "true_computation",
                             "false_computation", "select", "scatter", "called_computations"})
_LITERAL_OPCODES = frozenset({"constant", "parameter"})

_INSTRUCTION = re.compile(r"[ \t]+(ROOT[ \t]+)?%?([\w.\-]+)[ \t]*=[ \t]*")
_OPCODE = re.compile(r"[ \t]+([a-z][\w\-]*)\(")
_ATTRIBUTE = re.compile(r"[ \t]*([A-Za-z_][\w.\-]*)=(.+)", re.S)
# An operand names a value; ``%fusion#1`` (XLA from 2026) is element 1 of the tuple value %fusion.
_OPERAND = re.compile(r"%?([\w.\-]+(?:#\d+)?)")
_SHAPE_START = re.compile(r"\(|[a-z][a-z0-9]*\[")
_SMALL_INT = re.compile(r"[0-9]{1,9}")
_INDEX_COMMENT = re.compile(r"/\*index=\d+\*/")
REFERENCE = re.compile(r"%([\w.\-]+)")
_UNESCAPE = re.compile(r"\\([0-7]{1,3}|.)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
# Tokens: a run of ordinary characters and whole strings; a bracket pair with only such a run inside; a lone
# bracket; a lone '"' (an unterminated string). Runs are written unrolled, normal*(string normal*)*, so that no
# two quantifiers compete for the same characters.
STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_PLAIN = r'[^()\[\]{}"]'
_RUN = rf"{_PLAIN}*(?:{STRING}{_PLAIN}*)*"
_TOKEN = re.compile(rf"{_PLAIN}+(?:{STRING}{_PLAIN}*)*|{STRING}{_RUN}|[\[{{(]{_RUN}[\]}})]|.", re.S)
_NEXT_COMMA = re.compile(rf'[^",]*(?:{STRING}[^",]*)*,', re.S)
_META_ITEM = re.compile(rf"[ \t]*([A-Za-z_]\w*)=({STRING}|\{{[^{{}}]*\}}|[^\s\"{{}}]+)")
_PLAIN_OPERANDS = re.compile(r"[ \t]*%?[\w.\-]+(?:#\d+)?(?:[ \t]*,[ \t]*%?[\w.\-]+(?:#\d+)?)*[ \t]*")
_CLOSER = {"(": ")", "[": "]", "{": "}"}


class HloParseError(ValueError):
    """Malformed or hostile input (the caller's fault, never worth a retry), at ``source`` line ``line``."""

    def __init__(self, source: str, line: int, message: str) -> None:
        super().__init__(f"{source}:{line}: {message}")
        self.source, self.line, self.message = source, line, message

    def __reduce__(self) -> tuple[type[HloParseError], tuple[str, int, str]]:
        return type(self), (self.source, self.line, self.message)  # survives pickling (task queues)


@dataclass(frozen=True)
class SourceLocation:
    file: str
    line: int
    function: str | None  # None in the older source_file/source_line metadata, which names no function


@dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    shape: str
    operands: list[str]
    literal: str | None  # the text in parentheses of a constant or a parameter, which name no operands
    is_root: bool
    fusion_kind: str | None
    called_computations: list[str]
    attributes: dict[str, str]  # raw values in printed order, metadata included
    op_name: str | None
    stack_frame_id: int | None
    source: SourceLocation | None  # the innermost frame: where the jnp/lax call was written
    stack: list[SourceLocation]  # innermost first
    line: int
    raw: str


def unescape(quoted: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        return chr(int(code, 8)) if code[0] in "01234567" else _ESCAPES.get(code, code)

    return _UNESCAPE.sub(one, quoted[1:-1])


class Scanner:
    """Bracket and string matching for one line, with the module's source and the line number for errors."""

    def __init__(self, source: str, line: int) -> None:
        self.source, self.line = source, line

    def error(self, message: str) -> HloParseError:
        return HloParseError(self.source, self.line, message)

    def pieces(self, text: str, start: int = 0, closer: str | None = None, split: bool = True) -> tuple[list[str], int]:
        """Split ``text`` from ``start`` at commas outside brackets and strings (or only check it, without
        ``split``). With ``closer``, ``start`` is just inside an open bracket: stop at the bracket that closes it
        and return the index past it."""
        stack = [closer] if closer else []
        outer, pieces, piece_start = len(stack), [], start
        for match in _TOKEN.finditer(text, start):
            token, first = match.group(), match.group()[0]
            if first in _CLOSER:
                if len(stack) + 1 > MAX_NESTING:
                    raise self.error(f"brackets nest deeper than {MAX_NESTING}")
                if len(token) == 1:
                    stack.append(_CLOSER[first])
                elif token[-1] != _CLOSER[first]:
                    raise self.error(f"unbalanced '{token[-1]}' at column {match.end()}")
            elif first in ")]}":
                if not stack or stack.pop() != first:
                    raise self.error(f"unbalanced '{first}' at column {match.start() + 1}")
                if closer and not stack:
                    pieces.append(text[piece_start:match.start()])
                    return pieces, match.end()
            elif token == '"':
                raise self.error(f"unterminated string at column {match.start() + 1}")
            elif split and len(stack) == outer and "," in token:
                comma = _NEXT_COMMA.match(token)
                while comma:
                    pieces.append(text[piece_start:match.start() + comma.end() - 1])
                    piece_start = match.start() + comma.end()
                    comma = _NEXT_COMMA.match(token, comma.end())
        if stack:
            raise self.error("unbalanced brackets: the line ends inside a bracket")
        pieces.append(text[piece_start:])
        return pieces, len(text)

    def split(self, text: str) -> list[str]:
        return self.pieces(text)[0]

    def check(self, text: str) -> None:
        self.pieces(text, split=False)


def operand_value(operand: str) -> tuple[str, str]:
    """An operand as the value it names and the tuple element it takes (``fusion#1`` -> ``("fusion", "#1")``;
    a plain name has no element: ``""``)."""
    name, mark, index = operand.partition("#")
    return name, mark + index


def _parse_metadata(value: str, scan: Scanner) -> dict[str, str]:
    if not (value.startswith("{") and value.endswith("}")):
        raise scan.error("metadata is not a {...} block")
    body, pos, items = value[1:-1].rstrip(), 0, {}
    while pos < len(body):
        match = _META_ITEM.match(body, pos)
        if match is None:
            raise scan.error(f"unreadable metadata at {body[pos:pos + 40]!r}")
        if match.group(1) in items:
            raise scan.error(f"metadata field {match.group(1)} appears twice")
        items[match.group(1)] = match.group(2)
        pos = match.end()
    return items


def parse_instruction(text: str, scan: Scanner) -> Instruction:
    head = _INSTRUCTION.match(text)
    if head is None:
        raise scan.error(f"not an instruction: {text[:80]!r}")
    pos = head.end()
    if text.startswith("(", pos):
        shape_end = scan.pieces(text, pos + 1, ")", split=False)[1]
    else:
        space = text.find(" ", pos)
        shape_end = len(text) if space < 0 else space
        scan.check(text[pos:shape_end])  # a layout such as {1,0:T(8,128)}
    shape = text[pos:shape_end]
    opcode_match = _OPCODE.match(text, shape_end)
    if not _SHAPE_START.match(shape) or opcode_match is None:
        raise scan.error(f"expected 'shape opcode(' after '=' in {text[:80]!r}")
    opcode = opcode_match.group(1)
    operands_end = scan.pieces(text, opcode_match.end(), ")", split=False)[1]
    inside = text[opcode_match.end():operands_end - 1]
    tail = text[operands_end:].strip()
    if tail and not tail.startswith(","):
        raise scan.error(f"expected ',' after the operands of {opcode}, found {tail[:40]!r}")
    attributes: dict[str, str] = {}
    for piece in scan.split(tail[1:]) if tail else []:
        attribute = _ATTRIBUTE.fullmatch(piece.rstrip())
        if attribute is None:
            raise scan.error(f"not an attribute: {piece[:80]!r}")
        if attribute.group(1) in attributes:
            raise scan.error(f"attribute {attribute.group(1)} appears twice")
        attributes[attribute.group(1)] = attribute.group(2)
    literal, operands = None, []
    if opcode in _LITERAL_OPCODES:
        literal = inside
    elif _PLAIN_OPERANDS.fullmatch(inside):
        operands = _OPERAND.findall(inside)
    elif inside.strip():
        for piece in scan.split(inside):
            words = _INDEX_COMMENT.sub(" ", piece).rsplit(None, 1)
            operand = _OPERAND.fullmatch(words[-1]) if words else None
            if operand is None or (len(words) == 2 and not _SHAPE_START.match(words[0])):
                raise scan.error(f"not an operand: {piece[:80]!r}")
            operands.append(operand.group(1))
    called = []
    for key, value in attributes.items():
        if key in CALL_ATTRIBUTES:
            called.extend(REFERENCE.findall(value) or [n.strip() for n in value.strip("{}").split(",")])
    metadata = _parse_metadata(attributes["metadata"], scan) if "metadata" in attributes else {}
    op_name = unescape(metadata["op_name"]) if metadata.get("op_name", "").startswith('"') else None
    frame = metadata.get("stack_frame_id")
    source = None
    if metadata.get("source_file", "").startswith('"'):
        number = metadata.get("source_line", "0")
        line = int(number) if _SMALL_INT.fullmatch(number) else 0
        source = SourceLocation(unescape(metadata["source_file"]), line, None)
    return Instruction(
        name=head.group(2), opcode=opcode, shape=shape, operands=operands, literal=literal,
        is_root=head.group(1) is not None,
        fusion_kind=attributes.get("kind") if opcode == "fusion" else None,
        called_computations=called, attributes=attributes, op_name=op_name,
        stack_frame_id=int(frame) if frame is not None and _SMALL_INT.fullmatch(frame) else None,
        source=source, stack=[source] if source else [], line=scan.line, raw=text,
    )


def guarded_lines(text: str, source: str) -> Iterator[tuple[int, str]]:
    """Lines split on '\\n' only, each refused before it is copied when it is longer than MAX_LINE_CHARS."""
    pos, number = 0, 0
    while pos <= len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        number += 1
        if end - pos > MAX_LINE_CHARS:
            raise HloParseError(source, number, f"line of {end - pos} characters is longer than {MAX_LINE_CHARS}")
        line = text[pos:end]
        structure = sum(map(line.count, '()[]{},"'))
        if structure > MAX_LINE_STRUCTURE:
            raise HloParseError(source, number, f"line has {structure} brackets, commas and quotes, more than "
                                                f"{MAX_LINE_STRUCTURE}")
        yield number, line[:-1] if line.endswith("\r") else line
        pos = end + 1
