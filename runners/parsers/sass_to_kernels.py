"""``cuobjdump -sass`` text (optionally with ``nvcc -Xptxas -v`` lines) → one record per kernel.

Why: a kernel's static instruction mix is deterministic for a fixed compiler and flags, so a change in it (an HMMA
that became FFMAs, a new LDL spill, a lost LDGSTS pipeline) is exact evidence of a regression cause, cheaper and
steadier than timing. This module only reads text; running cuobjdump/ptxas is the caller's business.

Grammar (FORMATS.md "SASS (GPU)"): ``code for sm_XX`` opens an arch section, ``Function : <mangled>`` a kernel, then
one instruction a line ``/*0040*/  @P0 FFMA R4, R2, R3, R4 ;`` optionally followed by ``/* 0x... */`` encodings
(on the same line or alone, as Maxwell's control words are). Maxwell dual-issue pairs are bracketed by ``{`` before
the first opcode and ``}`` after the second ``;``. Label lines (``.L_x_3:``), ``//`` comments, ``.headerflags``,
the dotted end-of-function line and ``Fatbin ... code:`` / ``key = value`` headers are recognised and skipped.

Decisions on ambiguous input, all refused with :class:`SassParseError` rather than guessed:
  * a ``Function :`` with no instructions (anywhere, including at end of file) is truncated output: cuobjdump
    always prints at least ``EXIT``;
  * inside a kernel, a line that is none of the forms above, an instruction without its ``;``, an address that
    does not increase, a dual-issue ``{`` left open or nested, brackets nested deeper than 32 or more than 10,000
    of them in one instruction;
  * no kernel at all, empty input, NUL or other control bytes, a line over 1 MiB (checked before any regex).
Outside kernels unknown lines (compiler chatter) are skipped. Every regex is anchored and free of ambiguous
adjacent quantifiers, so matching is linear in the line length.

``spill_loads``/``spill_stores`` count LDL/STL: local-memory traffic, which is spills or stack arrays; ptxas's
``bytes spill stores/loads`` (when present) are the compiler's own spill figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from runners.parsers.text_guard import ListingParseError, checked_lines

# 2: a listing of an object without kernels is no kernels, not an error; 3: records of kernels the result's HLO
# names bear the instruction's name (service/pipeline/parse_artifacts.py), so that `kernelwatch reparse` renames them.
PARSER_VERSION = 3
MAX_LINE_CHARS = 1 << 20
MAX_NESTING = 32
MAX_OPERAND_BRACKETS = 10_000
DEFAULT_MAX_BYTES = 64 << 20

CATEGORIES = (
    "mma", "fma", "fp_arith", "int_arith", "load_global", "store_global", "load_shared", "store_shared",
    "load_const", "other_memory", "async_copy", "barrier", "branch", "predicate", "move", "convert", "other",
)

_TABLE: dict[str, str] = {}
for _category, _names in {
    # "mma" is every opcode ending in MMA (HMMA IMMA DMMA BMMA QMMA OMMA HGMMA IGMMA QGMMA UTCHMMA ...): see category
    "fma": "FFMA FFMA2 FFMA32I DFMA HFMA HFMA2 HFMA2_32I",
    "fp_arith": "FADD FADD2 FADD32I FMUL FMUL2 FMUL32I FMNMX FMNMX3 MUFU DADD DMUL DMNMX HADD2 HADD2_32I HMUL2 "
                "HMUL2_32I HMNMX2 FCHK FSWZADD FSET DSET HSET2 RRO",
    "int_arith": "IADD IADD3 IADD32I IMAD IMAD32I IMADSP IMUL IMUL32I ISCADD ISCADD32I LEA LOP LOP3 LOP32I SHF SHL "
                 "SHR IMNMX VIMNMX VIMNMX3 VIADD VIADDMNMX IABS POPC FLO BREV BMSK BFE BFI SGXT XMAD IDP ISET ICMP "
                 "VABSDIFF VABSDIFF4 REDUX MATCH",
    "load_global": "LDG",
    "store_global": "STG",
    "load_shared": "LDS LDSM",
    "store_shared": "STS STSM",
    "load_const": "LDC LDCU",
    "other_memory": "LDL STL LD ST ATOM ATOMG ATOMS RED REDG CCTL CCTLL CCTLT TLD TLD4 TEX TXD TXQ TMML SULD SUST "
                    "SUATOM SURED LDTM STTM",
    "async_copy": "LDGSTS LDGDEPBAR UTMALDG UTMASTG UTMAPF UTMAREDG UTMACCTL UTMACMDFLUSH UBLKCP UBLKRED UBLKPF",
    "barrier": "BAR SYNCS MEMBAR DEPBAR WARPSYNC ERRBAR CGAERRBAR ARRIVES FENCE WARPGROUP UCGABAR_ARV UCGABAR_WAIT "
               "B2R R2B",
    "branch": "BRA BRX BRXU JMP JMX JMXU CALL CAL JCAL RET RTT EXIT BSYNC BSSY BREAK BMOV KILL BPT SSY SYNC PBK BRK "
              "PCNT CONT PRET",
    "predicate": "ISETP FSETP DSETP HSETP2 PSETP PSET PLOP3 P2R R2P UP2UR VOTE VOTEU ELECT CSETP",
    "move": "MOV MOV32I SEL FSEL PRMT SHFL S2R S2UR CS2R R2UR",
    "convert": "F2F F2I I2F I2I F2FP I2FP F2IP FRND",
    "other": "NOP YIELD NANOSLEEP PMTRIG",
}.items():
    for _name in _names.split():
        _TABLE[_name] = _category


def category(opcode: str) -> str:
    """The class of a base opcode (no modifiers). Uniform-datapath ``U`` forms share their vector twin's class."""
    if opcode.endswith("MMA"):
        return "mma"
    found = _TABLE.get(opcode)
    if found is None and opcode.startswith("U"):
        found = _TABLE.get(opcode[1:])
    return found or "other"


class SassParseError(ListingParseError):
    """Input that is not a well-formed ``cuobjdump -sass`` listing; ``line`` 0 means the input as a whole."""


@dataclass(frozen=True)
class SassInstruction:
    address: int
    predicate: str | None  # "@P0", "@!PT", ...
    opcode: str  # base opcode, "LDG"
    modifiers: tuple[str, ...]  # ("E", "128", "CONSTANT")
    operands: str
    category: str
    line: int


@dataclass(frozen=True)
class SassKernel:
    name: str  # mangled, as cuobjdump prints it
    short_name: str  # cheap demangling of the qualified function name; the name itself when not Itanium-mangled
    arch: str | None  # "sm_90a"; None when the text had no "code for" line
    line: int
    instruction_count: int
    mix: dict[str, int]  # every name of CATEGORIES, zeros included
    predicated: int
    spill_loads: int  # LDL
    spill_stores: int  # STL
    registers: int | None  # this and the byte counts below: from ptxas -v lines naming the kernel, else None
    stack_frame_bytes: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None
    shared_bytes: int | None
    headerflags: str | None
    instructions: tuple[SassInstruction, ...] = field(repr=False)
    text: str = field(repr=False)


_ADDRESS = re.compile(r"/\*([0-9a-fA-F]{1,16})\*/")
_PREDICATE = re.compile(r"@!?U?P(?:T|[0-9]{1,2})(?=[ \t])")
_OPCODE = re.compile(r"[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*")
_FUNCTION = re.compile(r"Function[ \t]*:[ \t]*(\S+)")
_CODE_FOR = re.compile(r"code for (sm_[0-9]{1,4}[a-z]?)")
_LABEL = re.compile(r"\.?[A-Za-z_$][\w.$]*:")
_BRACKETS = re.compile(r"[\[\](){}]")
_ENTRY = re.compile(r"Compiling entry function '([^']*)' for '([^']*)'")
_PTXAS_ITEM = re.compile(r"(?:[Uu]sed )?([0-9]{1,12}) ([a-z][a-z0-9 \[\]]*)")
_PTXAS_KEYS = {
    "registers": "registers", "bytes stack frame": "stack_frame_bytes", "bytes spill stores": "spill_store_bytes",
    "bytes spill loads": "spill_load_bytes", "bytes smem": "shared_bytes",
}
_DIGITS = frozenset("0123456789")


def _check_text(text: str, source: str) -> list[str]:
    return checked_lines(text, source, SassParseError, MAX_LINE_CHARS)


def short_name(mangled: str) -> str:
    """``_ZN4mgpu6kernelIiEEvT_`` → ``mgpu::kernel``: the (nested) function name only, no arguments or templates.

    Reading stops at the first template-argument list, which for a kernel is the last name component: a
    ``__global__`` function cannot be a class member, so its qualifiers are namespaces."""
    if not mangled.startswith("_Z"):
        return mangled
    i, parts, nested = 2, [], False
    if mangled.startswith("L", i):
        i += 1
    if mangled.startswith("N", i):
        nested, i = True, i + 1
        while i < len(mangled) and mangled[i] in "rVK":
            i += 1
        if mangled.startswith("St", i):
            parts.append("std")
            i += 2
    while i < len(mangled) and mangled[i] in _DIGITS:
        j = i
        while j < len(mangled) and j - i < 6 and mangled[j] in _DIGITS:
            j += 1
        length = int(mangled[i:j])
        if length == 0 or j + length > len(mangled):
            return mangled
        parts.append(mangled[j : j + length])
        i = j + length
        if not nested:
            break
    return "::".join(parts) if parts else mangled


def _depth_ok(text: str) -> bool:
    if sum(text.count(char) for char in "[](){}") > MAX_OPERAND_BRACKETS:  # C-speed bound on the loop below
        return False
    depth = 0
    for match in _BRACKETS.finditer(text):
        depth += 1 if match.group() in "[({" else -1
        if depth > MAX_NESTING:
            return False
    return True


class _Kernel:
    """Mutable builder; turned into a SassKernel when its block ends."""

    def __init__(self, name: str, arch: str | None, line: int, first: str) -> None:
        self.name, self.arch, self.line = name, arch, line
        self.lines = [first]
        self.instructions: list[SassInstruction] = []
        self.headerflags: str | None = None
        self.dual_open: int | None = None


class _Ptxas:
    """What ``ptxas -v`` said, keyed by (function, arch)."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str | None], dict[str, int]] = {}
        self.entry: tuple[str, str | None] | None = None
        self.properties: tuple[str, str | None] | None = None

    def feed(self, stripped: str) -> None:
        if stripped.startswith("ptxas"):
            colon = stripped.find(":")
            payload = stripped[colon + 1 :].strip() if colon >= 0 else ""
            entry = _ENTRY.fullmatch(payload)
            if entry:
                self.entry = (entry.group(1), entry.group(2))
                self.properties = None
            elif payload.startswith("Function properties for "):
                name = payload[len("Function properties for ") :].strip()
                self.properties = (name, self.entry[1] if self.entry else None)
            elif payload.startswith("Used ") and self.entry:
                self._items(payload, self.entry)
        elif self.properties:  # the indented "N bytes stack frame, ..." line under "Function properties for"
            self._items(stripped, self.properties)

    def _items(self, payload: str, key: tuple[str, str | None]) -> None:
        for item in payload.split(","):
            match = _PTXAS_ITEM.fullmatch(item.strip())
            if match and match.group(2) in _PTXAS_KEYS:
                self.found.setdefault(key, {})[_PTXAS_KEYS[match.group(2)]] = int(match.group(1))

    def lookup(self, name: str, arch: str | None) -> dict[str, int]:
        if (name, arch) in self.found:
            return self.found[(name, arch)]
        same_name = [values for (fn, _), values in self.found.items() if fn == name]
        return same_name[0] if len(same_name) == 1 else {}


def _instruction(address_match: re.Match[str], kernel: _Kernel, number: int, source: str) -> SassInstruction:
    stripped = address_match.string
    address = int(address_match.group(1), 16)
    body = stripped[address_match.end() :].strip()
    if body.endswith("*/"):  # trailing encoding or comment
        body = body[: body.rfind("/*")].rstrip()
    if body.startswith("{"):
        if kernel.dual_open is not None:
            raise SassParseError(source, number, "dual-issue '{' inside another")
        kernel.dual_open = number
        body = body[1:].lstrip()
    if body.endswith("}"):
        if kernel.dual_open is None:
            raise SassParseError(source, number, "dual-issue '}' without '{'")
        kernel.dual_open = None
        body = body[:-1].rstrip()
    if not body.endswith(";"):
        raise SassParseError(source, number, "instruction without terminating ';' (truncated?)")
    body = body[:-1].rstrip()
    predicate = None
    if body.startswith("@"):
        pred_match = _PREDICATE.match(body)
        if not pred_match:
            raise SassParseError(source, number, f"bad predicate in {body[:40]!r}")
        predicate = pred_match.group()
        body = body[pred_match.end() :].lstrip()
    op_match = _OPCODE.match(body)
    if not op_match or (op_match.end() < len(body) and body[op_match.end()] not in " \t"):
        raise SassParseError(source, number, f"not an opcode: {body[:40]!r}")
    operands = body[op_match.end() :].strip()
    if not _depth_ok(operands):
        raise SassParseError(source, number, f"brackets nested deeper than {MAX_NESTING} or > {MAX_OPERAND_BRACKETS}")
    base, *modifiers = op_match.group().split(".")
    if kernel.instructions and address <= kernel.instructions[-1].address:
        raise SassParseError(source, number, f"address {address:#x} does not increase")
    return SassInstruction(address, predicate, base, tuple(modifiers), operands, category(base), number)


def _finish(kernel: _Kernel, ptxas: _Ptxas, source: str) -> SassKernel:
    if not kernel.instructions:
        raise SassParseError(source, kernel.line, f"kernel {kernel.name} has no instructions (truncated?)")
    if kernel.dual_open is not None:
        raise SassParseError(source, kernel.dual_open, "dual-issue '{' never closed")
    mix = dict.fromkeys(CATEGORIES, 0)
    for instruction in kernel.instructions:
        mix[instruction.category] += 1
    while kernel.lines and not kernel.lines[-1].strip():
        kernel.lines.pop()
    stats = ptxas.lookup(kernel.name, kernel.arch)
    ops = [i.opcode for i in kernel.instructions]
    return SassKernel(
        name=kernel.name, short_name=short_name(kernel.name), arch=kernel.arch, line=kernel.line,
        instruction_count=len(kernel.instructions), mix=mix,
        predicated=sum(1 for i in kernel.instructions if i.predicate), spill_loads=ops.count("LDL"),
        spill_stores=ops.count("STL"), registers=stats.get("registers"),
        stack_frame_bytes=stats.get("stack_frame_bytes"), spill_store_bytes=stats.get("spill_store_bytes"),
        spill_load_bytes=stats.get("spill_load_bytes"), shared_bytes=stats.get("shared_bytes"),
        headerflags=kernel.headerflags, instructions=tuple(kernel.instructions), text="\n".join(kernel.lines),
    )


def parse_sass(text: str, source: str = "<sass>") -> list[SassKernel]:
    """Every kernel of a ``cuobjdump -sass`` listing, in listing order (none for an object without kernels);
    raises :class:`SassParseError`."""
    lines = _check_text(text, source)
    ptxas = _Ptxas()
    arch: str | None = None
    current: _Kernel | None = None
    done: list[_Kernel] = []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        closes = False
        if stripped.startswith("Function") and (function := _FUNCTION.fullmatch(stripped)):
            if current is not None:
                done.append(current)
            current = _Kernel(function.group(1), arch, number, line)
            continue
        if stripped.startswith("code for"):
            code_for = _CODE_FOR.fullmatch(stripped)
            if not code_for:
                raise SassParseError(source, number, f"unknown arch line {stripped[:60]!r}")
            arch, closes = code_for.group(1), True
        elif stripped.startswith("Fatbin") and stripped.endswith("code:"):
            closes = True
        if closes:
            if current is not None:
                done.append(current)
            current = None
            continue
        if current is not None:
            current.lines.append(line)
        if not stripped or stripped.startswith("//"):
            continue
        if stripped.startswith("/*"):
            if address_match := _ADDRESS.match(stripped):
                if current is None:
                    raise SassParseError(source, number, "instruction outside any 'Function :' block")
                current.instructions.append(_instruction(address_match, current, number, source))
            elif current is not None and not stripped.endswith("*/"):
                raise SassParseError(source, number, "unterminated comment in a kernel")
        elif stripped.startswith("ptxas") or (stripped[0] in _DIGITS and " bytes " in stripped):
            ptxas.feed(stripped)
        elif current is None:
            continue  # compiler chatter, fatbin "key = value" headers, separators
        elif stripped.startswith(".headerflags"):
            current.headerflags = stripped[len(".headerflags") :].strip()
        elif stripped.strip(".") and not _LABEL.fullmatch(stripped):
            raise SassParseError(source, number, f"unrecognised line in kernel {current.name}: {stripped[:60]!r}")
    if current is not None:
        done.append(current)
    if not done and arch is None:
        raise SassParseError(source, 0, "no 'Function :' block found")
    # A listing with its arch line and no function is an object with no kernels (XLA on an H200 wrote such a PTX
    # shard, and cuobjdump lists it as "code for sm_90a" alone): no kernels, not a refusal.
    return [_finish(kernel, ptxas, source) for kernel in done]


def parse_sass_bytes(data: bytes, source: str = "<sass>") -> list[SassKernel]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SassParseError(source, data.count(b"\n", 0, exc.start) + 1, "not UTF-8 text") from None
    return parse_sass(text, source)


def parse_sass_file(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[SassKernel]:
    """Parse a listing file, refusing one over ``max_bytes`` without reading more than ``max_bytes + 1`` bytes."""
    source = str(path)
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise SassParseError(source, 0, f"file is larger than {max_bytes} bytes")
    return parse_sass_bytes(data, source)
