"""Optimized HLO text (``compiled.as_text()`` or a ``*_after_optimizations.txt`` dump) → typed module records.

The fusion name links every layer (trace ``hlo_op``, object-file symbol, PTX entry), so a regression found in a
kernel's time is explained here: which fusion it is, what it contains, and which line of the user's code made it.
The fingerprint says whether two compiles produced the same program, so a timing change can be told apart from a
compiler change.

As printed by jax/jaxlib 0.10.2 on CPU (``as_text()`` and the dump file are byte-identical): a header of tables
(``FileNames``, ``FunctionNames``, ``FileLocations``, ``StackFrames``), then computations, callees before
callers, ``ENTRY`` last. Metadata is ``{op_name="..." stack_frame_id=N}``; the older ``source_file=``/
``source_line=`` form is read too. A printed ``parent_frame_id`` is one more than the parent's id (1: no parent),
checked against the module's proto. Large constants print as ``constant({...})``: their values are not in the text.

Hostile input is a :class:`HloParseError` naming the source and line. One line's grammar (an instruction, its
operands, attributes and metadata) is in :mod:`hlo_instruction`; this module assembles lines into computations and
modules, resolves source locations through the module's tables, and computes the fingerprint.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from runners.parsers.hlo_instruction import (
    CALL_ATTRIBUTES,
    MAX_LINE_CHARS,
    MAX_LINE_STRUCTURE,
    MAX_NESTING,
    REFERENCE,
    STRING,
    HloParseError,
    Instruction,
    Scanner,
    SourceLocation,
    guarded_lines,
    operand_value,
    parse_instruction,
    unescape,
)

__all__ = [  # what callers import from here, wherever it now lives
    "DEFAULT_MAX_BYTES", "FINGERPRINT_IGNORES", "MAX_LINE_CHARS", "MAX_LINE_STRUCTURE", "MAX_NESTING",
    "PARSER_VERSION", "Computation", "Fusion", "HloModule", "HloParseError", "Instruction", "ProgramOp",
    "SourceLocation", "canonical_text", "fusion_fingerprint", "op_fingerprint", "parse_hlo_bytes", "parse_hlo_file",
    "parse_hlo_text",
]

# 2: each fusion's structural fingerprint; 3: the program's other ops (ProgramOp), with theirs
# 4: operands that take a tuple element (%fusion#1, XLA 2026); 5: a fusion's root; 6: a fusion's result shape
PARSER_VERSION = 6
DEFAULT_MAX_BYTES = 256 << 20

# Attributes that change with where the code was written, not with what was compiled.
FINGERPRINT_IGNORES = frozenset({"metadata"})
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
# Opcodes that are no step of their own: they name values (parameters, constants, tuples and their elements, a
# bitcast's new view) or order the program, and no profiler times them. Fusions are listed as fusions.
_NOT_STEPS = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
                        "partition-id", "replica-id", "fusion"})
# The calls through which a computation runs as steps of the program (a loop's body, a branch, a call), rather
# than being applied inside one op (a reduction's or a sort's ``to_apply``, a fusion's ``calls``).
_STEP_CALLS = frozenset({"body", "condition", "branch_computations", "true_computation", "false_computation"})
# Attributes an op's fingerprint leaves out: where it was written, scheduling hints (``backend_config`` but on a
# custom call, where it is the kernel: a Pallas kernel's payload), and the order constraints that name other ops.
_OP_IGNORES = FINGERPRINT_IGNORES | {"backend_config", "control-predecessors"}

_BAD_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_MODULE = re.compile(r"HloModule[ \t]+([^\s,]+)[ \t]*(?:,[ \t]*(.*))?")
_COMPUTATION = re.compile(r"(ENTRY[ \t]+)?%?([\w.\-]+)[ \t]*(.*)\{")
_INT_ENTRY = re.compile(r"([0-9]{1,9}) \{(\w+=-?[0-9]{1,9}(?: \w+=-?[0-9]{1,9})*)\}")
_INT_FIELD = re.compile(r"(\w+)=(-?[0-9]{1,9})")
_NAME_ENTRY = re.compile(rf"([0-9]{{1,9}}) ({STRING})")


@dataclass(frozen=True)
class Computation:
    name: str
    is_entry: bool
    is_fusion_computation: bool
    instructions: list[Instruction]
    line: int


@dataclass(frozen=True)
class Fusion:
    name: str  # also the kernel symbol in traces and object files
    kind: str | None
    computation: str
    instruction_count: int  # of the called computation itself; nested calls are not expanded
    op_name: str | None
    source: SourceLocation | None
    # What it computes, names aside: a hash of its kind, its result shape and the canonical text of the
    # computation it calls (nested calls included; see ``fusion_fingerprint``). Equal across a renumbering.
    fingerprint: str = ""
    # The ROOT instruction of the computation it calls: a GPU kernel of a custom fusion is named after it (a
    # sort's kernels ``sort_1_1__2`` run ``%fusion`` whose computation's ROOT is ``%sort.1.1``; H200, 2026-12-04).
    root: str | None = None
    shape: str | None = None  # its result shape, as the HLO writes it (``f32[512,256]{1,0}``)


@dataclass(frozen=True)
class ProgramOp:
    """An op the program runs as a step of its own that is not a fusion: a convolution, a sort, a custom call (a
    Pallas kernel on GPU and TPU), a while loop, a collective. On XLA CPU each is a thunk of its own, timed in
    the trace under its name as fusions are, and renumbered like them when the graph changes."""

    name: str
    opcode: str
    shape: str
    op_name: str | None
    source: SourceLocation | None
    fingerprint: str  # op_fingerprint: equal across a renumbering, different when what it computes differs


@dataclass(frozen=True)
class HloModule:
    name: str
    attributes: str
    entry: str
    computations: list[Computation]
    instruction_count: int
    opcodes: dict[str, int]
    fusions: list[Fusion]
    fingerprint: str
    parser_version: int
    line: int
    ops: list[ProgramOp] = field(default_factory=list)  # the program's steps that are not fusions, in order

    def computation(self, name: str) -> Computation:
        for computation in self.computations:
            if computation.name == name:
                return computation
        raise KeyError(name)


class _ModuleBuilder:
    def __init__(self, source: str, line: int, name: str, attributes: str) -> None:
        self.source, self.line, self.name, self.attributes = source, line, name, attributes
        self.tables: dict[str, dict[int, str | dict[str, int]]] = {table: {} for table in _TABLES}
        self.computations: list[tuple[str, bool, int, list[Instruction]]] = []
        self.stacks: dict[int, list[SourceLocation]] = {}
        self.names: set[str] = set()
        self.has_entry = False

    def error(self, line: int, message: str) -> HloParseError:
        return HloParseError(self.source, line, message)

    def add_table_entry(self, table: str, text: str, line: int) -> None:
        named = _NAME_ENTRY.fullmatch(text) if table in ("FileNames", "FunctionNames") else None
        numbered = None if named else _INT_ENTRY.fullmatch(text)
        if named:
            self.tables[table][int(named.group(1))] = unescape(named.group(2))
        elif numbered and table in ("FileLocations", "StackFrames"):
            fields = {key: int(value) for key, value in _INT_FIELD.findall(numbered.group(2))}
            needed = ("file_name_id", "function_name_id", "line") if table == "FileLocations" else (
                "file_location_id", "parent_frame_id")
            if any(key not in fields for key in needed):
                raise self.error(line, f"{table} entry lacks one of {', '.join(needed)}")
            self.tables[table][int(numbered.group(1))] = fields
        else:
            raise self.error(line, f"not a {table} entry: {text[:80]!r}")

    def stack(self, frame_id: int, line: int) -> list[SourceLocation]:
        if frame_id in self.stacks:
            return self.stacks[frame_id]
        stack, seen, current = [], set(), frame_id
        while current > 0 and current not in seen:
            seen.add(current)
            frame = self.tables["StackFrames"].get(current)
            location = self.tables["FileLocations"].get(frame["file_location_id"]) if isinstance(frame, dict) else None
            if not isinstance(frame, dict) or not isinstance(location, dict):
                raise self.error(line, f"stack frame {current} does not resolve through StackFrames/FileLocations")
            file = self.tables["FileNames"].get(location["file_name_id"])
            function = self.tables["FunctionNames"].get(location["function_name_id"])
            if not isinstance(file, str) or not isinstance(function, str):
                raise self.error(line, f"file location {frame['file_location_id']} names an unknown file or function")
            stack.append(SourceLocation(file, location["line"], function))
            current = frame["parent_frame_id"] - 1  # printed as the parent's id plus one
        self.stacks[frame_id] = stack
        return stack

    def build(self) -> HloModule:
        entries = [c for c in self.computations if c[1]]
        if not entries:
            raise self.error(self.line, f"module {self.name} has no ENTRY computation")
        fusion_targets = set()
        for _, _, _, instructions in self.computations:
            for instruction in instructions:
                for callee in instruction.called_computations:
                    if callee not in self.names:
                        raise self.error(instruction.line, f"%{instruction.name} calls unknown computation {callee}")
                if instruction.opcode == "fusion":
                    if len(instruction.called_computations) != 1:
                        raise self.error(instruction.line, f"fusion %{instruction.name} has no single calls=")
                    fusion_targets.add(instruction.called_computations[0])
        computations = []
        for name, is_entry, line, instructions in self.computations:
            resolved = []
            for instruction in instructions:
                if instruction.stack_frame_id:
                    stack = self.stack(instruction.stack_frame_id, instruction.line)
                    instruction = replace(instruction, stack=stack, source=stack[0] if stack else None)
                resolved.append(instruction)
            computations.append(Computation(name, is_entry, name in fusion_targets, resolved, line))
        sizes = {c.name: len(c.instructions) for c in computations}
        by_name = {c.name: c for c in computations}
        roots = {c.name: next((i.name for i in c.instructions if i.is_root), None) for c in computations}
        fusions = [Fusion(i.name, i.fusion_kind, i.called_computations[0], sizes[i.called_computations[0]],
                          i.op_name, i.source, fusion_fingerprint(by_name, i), roots[i.called_computations[0]],
                          i.shape)
                   for c in computations for i in c.instructions if i.opcode == "fusion"]
        opcodes = Counter(i.opcode for c in computations for i in c.instructions)
        ops = []
        for c in _program_computations(by_name, entries[0][0]):
            shapes = {i.name: i.shape for i in c.instructions}  # once per computation: an entry has thousands
            ops += [ProgramOp(i.name, i.opcode, i.shape, i.op_name, i.source, op_fingerprint(by_name, shapes, i))
                    for i in c.instructions if i.opcode not in _NOT_STEPS]
        module = HloModule(self.name, self.attributes, entries[0][0], computations, sum(sizes.values()),
                           dict(sorted(opcodes.items())), fusions, "", PARSER_VERSION, self.line, ops)
        return replace(module, fingerprint=hashlib.sha256(canonical_text(module).encode()).hexdigest())


def canonical_text(module: HloModule) -> str:
    """The module with names replaced by their order of appearance and source metadata dropped; it is what
    the fingerprint hashes, and what to diff when two fingerprints differ.

    Computations are numbered in depth-first call order from the entry (unreachable ones follow in text order),
    instructions in printed order within their computation. Shapes, layouts, literals, operand order and every
    other attribute (backend_config, frontend_attributes, ...) are kept; the module name, the source tables and
    the names of computation parameters are not.
    """
    by_name = {c.name: c for c in module.computations}
    order = _call_order(by_name, [module.entry] + [c.name for c in module.computations])
    return "\n".join([f"HloModule {module.attributes}"] + _canonical_lines(by_name, order))


def fusion_fingerprint(computations: dict[str, Computation], fusion: Instruction) -> str:
    """A fusion instruction's structural fingerprint: sha256 of its kind, its result shape and the canonical text
    (``canonical_text``'s rules: names by order of appearance, no metadata) of the computation it calls and the
    ones that calls. The called computation's parameters carry the operand shapes. Its own name, its operands'
    names, its source lines and its ``backend_config`` are left out, so a fusion XLA renumbered, or whose
    computation was renamed, keeps its fingerprint; one that computes something else does not."""
    order = _call_order(computations, list(fusion.called_computations))
    text = "\n".join([f"fusion kind={fusion.fusion_kind} shape={fusion.shape}"]
                     + _canonical_lines(computations, order))
    return hashlib.sha256(text.encode()).hexdigest()


def op_fingerprint(computations: dict[str, Computation], shapes: dict[str, str], op: Instruction) -> str:
    """A program op's structural fingerprint: sha256 of its opcode, result shape, operand shapes (``shapes``: each
    value's shape in the op's computation, by name), attributes (but ``_OP_IGNORES``; computations they call by
    their order) and the canonical text of what it calls (a loop's body, a sort's comparator). Its name and its
    operands' names are left out, so a renumbered op keeps it."""
    order = _call_order(computations, list(op.called_computations))
    ids = {name: f"c{k}" for k, name in enumerate(order)}
    ignored = _OP_IGNORES - {"backend_config"} if op.opcode == "custom-call" else _OP_IGNORES
    # A name an attribute holds that is no computation's is another op's: by position it would be a name again.
    attributes = "".join(f", {key}={REFERENCE.sub(lambda m: ids.get(m.group(1), '%op'), value)}"
                         for key, value in op.attributes.items() if key not in ignored)
    operands = ",".join(shapes.get(name, "?") + element for name, element in map(operand_value, op.operands))
    text = "\n".join([f"{op.opcode} shape={op.shape} operands=({operands}) literal={op.literal}{attributes}"]
                     + _canonical_lines(computations, order))
    return hashlib.sha256(text.encode()).hexdigest()


def _program_computations(by_name: dict[str, Computation], entry: str) -> list[Computation]:
    """The entry and the computations it runs as steps (loop bodies and conditions, branches, and what a
    ``call`` calls), in depth-first order, each once."""
    out: list[Computation] = []
    seen: set[str] = set()
    pending = [entry]
    while pending:
        name = pending.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        out.append(by_name[name])
        callees = []
        for i in by_name[name].instructions:
            for key, value in i.attributes.items():
                if key in _STEP_CALLS or (key == "to_apply" and i.opcode == "call"):
                    callees.extend(REFERENCE.findall(value) or [n.strip() for n in value.strip("{}").split(",")])
        pending.extend(reversed(callees))
    return out


def _call_order(by_name: dict[str, Computation], roots: list[str]) -> list[str]:
    """Computation names in depth-first call order from each root in turn, each once."""
    order: list[str] = []
    seen: set[str] = set()
    for root in roots:
        pending = [root]
        while pending:
            name = pending.pop()
            if name in by_name and name not in seen:
                seen.add(name)
                order.append(name)
                callees = [n for i in by_name[name].instructions for n in i.called_computations]
                pending.extend(reversed(callees))
    return order


def _canonical_lines(by_name: dict[str, Computation], order: list[str]) -> list[str]:
    computation_ids = {name: f"c{k}" for k, name in enumerate(order)}
    lines: list[str] = []
    for name in order:
        computation = by_name[name]
        ids = {i.name: f"v{k}" for k, i in enumerate(computation.instructions)}

        def renamer(key: str, ids: dict[str, str] = ids) -> Callable[[re.Match[str]], str]:
            first, second = (computation_ids, ids) if key in CALL_ATTRIBUTES else (ids, computation_ids)
            return lambda match: first.get(match.group(1)) or second.get(match.group(1)) or match.group(0)

        lines.append(("ENTRY " if computation.is_entry else "") + computation_ids[name])
        for instruction in computation.instructions:
            arguments = instruction.literal if instruction.literal is not None else ",".join(
                ids.get(name, name) + element for name, element in map(operand_value, instruction.operands))
            attributes = "".join(f", {key}={REFERENCE.sub(renamer(key), value)}"
                                 for key, value in instruction.attributes.items() if key not in FINGERPRINT_IGNORES)
            root = "ROOT " if instruction.is_root else ""
            lines.append(f"{root}{ids[instruction.name]} = {instruction.shape} "
                         f"{instruction.opcode}({arguments}){attributes}")
    return lines


def parse_hlo_text(text: str, source: str = "<hlo>") -> list[HloModule]:
    """Every module in ``text``, in order; a dump file or ``as_text()`` holds one."""
    bad = _BAD_CHARS.search(text)
    if bad:
        at = text.count("\n", 0, bad.start()) + 1
        raise HloParseError(source, at, f"binary data (character {ord(bad.group()):#x}), not HLO text")
    modules: list[HloModule] = []
    builder: _ModuleBuilder | None = None
    table: str | None = None
    open_computation: tuple[str, bool, int, list[Instruction], set[str]] | None = None
    for number, line in guarded_lines(text, source):
        scan = Scanner(source, number)
        if open_computation is not None:
            name, is_entry, opened, instructions, defined = open_computation
            if line.strip() == "}":
                _check_computation(open_computation, source)
                assert builder is not None
                builder.computations.append((name, is_entry, opened, instructions))
                open_computation = None
            elif line.startswith((" ", "\t")) and line.strip():
                instruction = parse_instruction(line, scan)
                if instruction.name in defined:
                    raise scan.error(f"%{instruction.name} is defined twice in {name}")
                defined.add(instruction.name)
                instructions.append(instruction)
            elif line.strip():
                raise HloParseError(source, opened, f"computation {name} is not closed before line {number}")
            continue
        stripped = line.strip()
        if not stripped:
            table = None
        elif line.startswith("HloModule"):
            header = _MODULE.fullmatch(stripped)
            if header is None:
                raise scan.error(f"unreadable HloModule header: {stripped[:80]!r}")
            if builder is not None:
                modules.append(builder.build())
            builder, table = _ModuleBuilder(source, number, header.group(1), header.group(2) or ""), None
        elif builder is None:
            raise scan.error(f"expected an HloModule header, found {stripped[:80]!r}")
        elif stripped in _TABLES:
            table = stripped
        elif table is not None:
            builder.add_table_entry(table, stripped, number)
        elif not line[0].isspace() and stripped.endswith("{") and (found := _COMPUTATION.fullmatch(stripped)):
            scan.check(found.group(3))  # the signature
            name = found.group(2)
            if name in builder.names:
                raise scan.error(f"computation {name} is defined twice")
            if found.group(1) and builder.has_entry:
                raise scan.error("a second ENTRY computation")
            builder.names.add(name)
            builder.has_entry = builder.has_entry or found.group(1) is not None
            open_computation = (name, found.group(1) is not None, number, [], set())
        else:
            raise scan.error(f"expected a computation, a table or a blank line, found {stripped[:80]!r}")
    if open_computation is not None:
        raise HloParseError(source, open_computation[2],
                            f"computation {open_computation[0]} is never closed: the text ends inside it")
    if builder is None:
        raise HloParseError(source, 1, "no HloModule header: empty or not HLO text")
    modules.append(builder.build())
    return modules


def _check_computation(computation: tuple[str, bool, int, list[Instruction], set[str]], source: str) -> None:
    name, _, opened, instructions, defined = computation
    if not instructions:
        raise HloParseError(source, opened, f"computation {name} has no instructions")
    if sum(i.is_root for i in instructions) > 1:
        raise HloParseError(source, opened, f"computation {name} has more than one ROOT")
    for instruction in instructions:
        for operand in instruction.operands:
            if operand_value(operand)[0] not in defined:
                raise HloParseError(source, instruction.line, f"operand %{operand} is not defined in {name}")


def parse_hlo_bytes(data: bytes, source: str = "<hlo>") -> list[HloModule]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise HloParseError(source, line, f"not UTF-8 text (byte {error.start})") from None
    return parse_hlo_text(text, source)


def parse_hlo_file(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[HloModule]:
    """Reads at most ``max_bytes`` (+1 to tell a larger file); OSError is the caller's, not a parse error."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        line = data.count(b"\n", 0, max_bytes) + 1
        raise HloParseError(str(path), line, f"file is larger than {max_bytes} bytes")
    return parse_hlo_bytes(data, str(path))
