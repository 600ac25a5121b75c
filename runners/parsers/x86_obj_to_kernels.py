"""XLA CPU per-fusion object file (x86-64 ELF) → one record per kernel function: size, instruction mix, widths.

With ``--xla_dump_to`` XLA CPU writes, per fusion it generates code for, ``obj-file.<fusion>_kernel_module.o``
(sometimes ``obj-file.__compute_module_<fusion>.o``): a relocatable object whose function symbol is the fusion's
name, with the code in ``.ltext`` (large code model) rather than ``.text``. Fusions that XLA hands to a library
(YNNPACK ``ynn_fusion``, oneDNN, Eigen dots) have no object file.

Every ``STT_FUNC`` symbol with a size becomes an :class:`X86Kernel`, whatever section holds it. An object with no
function symbols gives an empty list: that is a finding (nothing was generated), not an error. Zero-size function
symbols are skipped: there is nothing to disassemble.

Load and store are decided here, from the mnemonic and the memory operand's place (:func:`memory_access`), never
from capstone's operand ``access``: capstone 5 copies each opcode's access list from a table into an uninitialized
``uint8_t access[6]`` on the C stack and reads ``access[op_count]`` for each printed operand, so an operand past
the end of its opcode's list (``vbroadcastf32x4 ymm0, xmmword ptr [rax]``, ``test dword ptr [rax], ecx`` and
others have short or empty lists) gets whatever bytes the stack held. Those bytes follow the process's history,
which the interpreter's hash seed changes: the same object parsed under two seeds got two class mixes. Capstone
also marks VEX/EVEX store destinations (``vmovups ymmword ptr [rcx], ymm4``) as read. In Intel syntax the first
operand of a multi-operand instruction is its destination, which is all the rule needs, with a few listed
exceptions (compares, one-operand stores and read-modify-writes).

Hostile input (not an ELF, truncated, offsets past the end, absurd sizes, huge section counts) is an
:class:`X86ObjectError` naming the source; work and memory are bounded by the file size and by
``max_function_bytes`` / ``max_code_bytes``. capstone and pyelftools are imported only when parsing, so the
records and :func:`classify` are usable without them.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

PARSER_VERSION = 2  # 2: load and store by operand place, never capstone's (uninitialized) access flags
ISA = "x86-64"
MAX_FUNCTION_BYTES = 16 << 20
MAX_CODE_BYTES = 16 << 20  # all functions of one object together: symbols may overlap, work must not multiply
MAX_OBJECT_BYTES = 64 << 20

CLASSES = ("vector_fma", "vector_mul", "vector_add", "vector_other", "load", "store", "gather", "scalar_arith",
           "branch", "other")
WIDTHS = (128, 256, 512)

_ELF64_SHDR_SIZE = 64
_ELF64_SYM_SIZE = 24
_SHT_NOBITS = "SHT_NOBITS"
_VECTOR_REG = re.compile(r"^([xyz])mm\d+$")
_REG_BITS = {"x": 128, "y": 256, "z": 512}
_FMA = re.compile(r"^(f(n?m(add|sub)|maddsub|msubadd)|pmadd52|pmaddwd|pmaddubsw|pdp(bu|ws)s?d)")
_MUL = re.compile(r"^(mul(p|s)[sdh]|pmul)")
_ADD = re.compile(r"^(p?(add|sub)|h(add|sub)|addsub(ps|pd)|ph(add|sub))")
_BROADCAST = re.compile(r"^p?broadcast")
_MOVES = frozenset({
    "mov", "movabs", "movzx", "movsx", "movsxd", "movd", "movq", "movss", "movsd", "movsh", "movw", "movaps",
    "movups", "movapd", "movupd", "movdqa", "movdqu", "movdqa32", "movdqa64", "movdqu8", "movdqu16", "movdqu32",
    "movdqu64", "movhps", "movlps", "movhpd", "movlpd", "movntps", "movntpd", "movntdq", "movntdqa", "movnti",
    "movddup", "movshdup", "movsldup", "lddqu", "movbe", "maskmovps", "maskmovpd", "pmaskmovd", "pmaskmovq",
})
_SCALAR_ARITH = frozenset({
    "add", "sub", "adc", "sbb", "inc", "dec", "neg", "imul", "mul", "div", "idiv", "and", "or", "xor", "not", "shl",
    "shr", "sar", "sal", "rol", "ror", "rcl", "rcr", "shld", "shrd", "lea", "cmp", "test", "andn", "bextr", "blsi",
    "blsr", "blsmsk", "bzhi", "shlx", "shrx", "sarx", "rorx", "mulx", "popcnt", "lzcnt", "tzcnt", "bsf", "bsr", "bt",
    "bts", "btr", "btc", "bswap", "adcx", "adox",
})
_NO_MEMORY_ACCESS = frozenset({"lea", "nop", "clflush", "clflushopt", "clwb", "cldemote"})  # and prefetch*
# first operand only read, though first: compares and tests (a string compare reads both operands)
_READS_FIRST = frozenset({
    "cmp", "test", "bt", "cmpsb", "cmpsw", "cmpsd", "cmpsq", "ptest", "vptest", "vtestps", "vtestpd", "ktestb",
    "ktestw", "ktestd", "ktestq", "kortestb", "kortestw", "kortestd", "kortestq", "bound",
})
# first operand read and written: the memory form of these is a read-modify-write
_READ_MODIFY_WRITE = frozenset({
    "add", "sub", "adc", "sbb", "inc", "dec", "neg", "not", "and", "or", "xor", "shl", "shr", "sar", "sal", "rol",
    "ror", "rcl", "rcr", "shld", "shrd", "bts", "btr", "btc", "xadd", "cmpxchg",
})
# one-operand instructions whose memory operand is written (the others read it: push, mul, fld, call, jmp...)
_STORES_ONLY_OPERAND = frozenset({
    "pop", "fst", "fstp", "fist", "fistp", "fisttp", "fbstp", "fnstcw", "fstcw", "fnstsw", "fstsw", "fnstenv",
    "fstenv", "fnsave", "fsave", "fxsave", "fxsave64", "xsave", "xsave64", "xsaveopt", "xsaveopt64", "xsavec",
    "xsavec64", "xsaves", "xsaves64", "stmxcsr", "vstmxcsr", "sgdt", "sidt", "sldt", "str", "smsw",
})
_INSTRUCTION_PREFIXES = frozenset({"lock", "rep", "repe", "repz", "repne", "repnz", "notrack", "bnd", "xacquire",
                                   "xrelease", "data16", "addr32"})
_ISA_GROUP = re.compile(r"^(sse|ssse|avx|fma|f16c|bmi|adx|aes|pclmul|vpclmul|sha|mmx|gfni|vaes|amx|xop|tbm|vnni)")


class X86ObjectError(ValueError):
    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"{source}: {message}")
        self.source = source


@dataclass(frozen=True, slots=True)
class Instruction:
    address: int
    size: int
    mnemonic: str
    operands: str
    kind: str  # one of CLASSES


@dataclass(frozen=True)
class X86Kernel:
    name: str  # the function symbol: the fusion's name
    source: str
    section: str
    address: int
    size_bytes: int
    code_sha256: str  # of the bytes as in the object, before relocation
    instruction_count: int
    mix: dict[str, int]  # every class in CLASSES, zeros included
    memory_reads: int  # instructions with a memory operand read, whatever their class (an FMA's too)
    memory_writes: int  # with a memory operand written (push and pop count as store and load, not here)
    vector_width_bits: int  # widest vector register seen: 128, 256, 512; 0 when none
    width_counts: dict[int, int]  # instructions by the widest vector register they name
    isa_extensions: tuple[str, ...]  # capstone instruction groups seen: avx, avx2, fma, avx512...
    undecoded_bytes: int  # bytes capstone could not decode (each listed as ``.byte``)
    instructions: tuple[Instruction, ...] = field(repr=False)
    isa: str = ISA
    parser_version: int = PARSER_VERSION


@dataclass(frozen=True)
class Decoded:
    """What classification needs of one instruction; built from capstone detail, or by hand in tests."""

    mnemonic: str
    vector_bits: int = 0  # widest vector register among explicit operands (and memory index registers)
    reads_memory: bool = False
    writes_memory: bool = False
    is_branch: bool = False


def classify(insn: Decoded) -> str:
    """The class of one instruction; the first rule that applies wins (a gather reads memory but is a gather)."""
    m = insn.mnemonic
    if insn.is_branch or m.startswith("j") or m in ("call", "ret", "loop", "loope", "loopne", "jrcxz"):
        return "branch"
    if re.match(r"^vp?gather", m):
        return "gather"
    if insn.writes_memory or m == "push":
        return "store"
    base = m[1:] if m.startswith("v") else m
    if insn.vector_bits and _FMA.match(base):
        return "vector_fma"
    if base in _MOVES or _BROADCAST.match(base) or m == "pop":
        if insn.reads_memory or m == "pop":
            return "load"
        return "vector_other" if insn.vector_bits else "other"
    if insn.vector_bits:
        if _MUL.match(base):
            return "vector_mul"
        if _ADD.match(base):
            return "vector_add"
        return "vector_other"
    if m in _SCALAR_ARITH:
        return "scalar_arith"
    if m.startswith("v") or m.startswith("k"):  # vzeroupper, mask-register ops
        return "vector_other"
    return "other"


def memory_access(mnemonic: str, index: int, operand_count: int) -> tuple[bool, bool]:
    """(read, written) for a memory operand at ``index`` of ``operand_count`` explicit operands, in Intel syntax
    (destination first). Only the text decides, so identical code gets identical answers in every process."""
    words = mnemonic.split()
    while len(words) > 1 and words[0] in _INSTRUCTION_PREFIXES:  # "lock add", "rep stosq"
        words = words[1:]
    m = words[0] if words else mnemonic
    if m in _NO_MEMORY_ACCESS or m.startswith("prefetch"):
        return False, False
    if m in ("xchg", "cmpxchg8b", "cmpxchg16b"):  # xchg may print its memory operand second; it writes it anyway
        return True, True
    if index > 0:
        return True, False
    if operand_count >= 2:
        if m in _READS_FIRST:
            return True, False
        return m in _READ_MODIFY_WRITE, True
    if m in _STORES_ONLY_OPERAND or m.startswith("set"):  # setcc
        return False, True
    if m in _READ_MODIFY_WRITE:  # inc, dec, neg, not
        return True, True
    return True, False


def _decode(insn: Any, cs: _Capstone) -> Decoded:
    """Capstone detail → :class:`Decoded`; memory access by :func:`memory_access`, not capstone's (see the module
    docstring: its access flags can be uninitialized stack bytes)."""
    mnemonic = sys.intern(insn.mnemonic)
    reads = writes = False
    bits = 0
    operands = insn.operands
    for index, op in enumerate(operands):
        regs = []
        if op.type == cs.X86_OP_REG:
            regs.append(op.reg)
        elif op.type == cs.X86_OP_MEM:
            regs.append(op.mem.index)
            read, written = memory_access(mnemonic, index, len(operands))
            reads |= read
            writes |= written
        for reg in regs:
            match = _VECTOR_REG.match(insn.reg_name(reg) or "") if reg else None
            if match:
                bits = max(bits, _REG_BITS[match.group(1)])
    groups = set(insn.groups)
    branch = bool(groups & {cs.CS_GRP_JUMP, cs.CS_GRP_CALL, cs.CS_GRP_RET})
    return Decoded(mnemonic, bits, reads, writes, branch)


class _Capstone:
    """The native seam: capstone's names and one configured disassembler."""

    def __init__(self) -> None:
        import capstone
        from capstone import x86

        self.X86_OP_REG, self.X86_OP_MEM = x86.X86_OP_REG, x86.X86_OP_MEM
        self.CS_GRP_JUMP, self.CS_GRP_CALL, self.CS_GRP_RET = (capstone.CS_GRP_JUMP, capstone.CS_GRP_CALL,
                                                               capstone.CS_GRP_RET)
        self.CsError = capstone.CsError
        self.md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)  # Intel syntax is capstone's default
        self.md.detail = True
        self.md.skipdata = True  # undecodable bytes become ``.byte`` entries instead of ending the listing


def disassemble_function(code: bytes, name: str = "", *, address: int = 0, source: str = "<bytes>",
                         section: str = "") -> X86Kernel:
    """One function's machine code → its record (also for code that did not come from an object file)."""
    return _disassemble(_Capstone(), code, name, address, source, section)


def _disassemble(cs: _Capstone, code: bytes, name: str, address: int, source: str, section: str) -> X86Kernel:
    mix = dict.fromkeys(CLASSES, 0)
    widths = dict.fromkeys(WIDTHS, 0)
    listing: list[Instruction] = []
    groups: set[str] = set()
    reads = writes = undecoded = 0
    for insn in cs.md.disasm(code, address):
        if insn.id == 0:  # skipdata
            undecoded += insn.size
            kind = "other"
        else:
            decoded = _decode(insn, cs)
            kind = classify(decoded)
            reads += decoded.reads_memory
            writes += decoded.writes_memory
            if decoded.vector_bits:
                widths[decoded.vector_bits] += 1
            groups.update(g for g in (insn.group_name(g) for g in insn.groups) if g and _ISA_GROUP.match(g))
        mix[kind] += 1
        listing.append(Instruction(insn.address, insn.size, sys.intern(insn.mnemonic), insn.op_str, kind))
    return X86Kernel(
        name=name, source=source, section=section, address=address, size_bytes=len(code),
        code_sha256=hashlib.sha256(code).hexdigest(), instruction_count=len(listing), mix=mix,
        memory_reads=reads, memory_writes=writes, vector_width_bits=max((w for w, n in widths.items() if n), default=0),
        width_counts=widths, isa_extensions=tuple(sorted(groups)), undecoded_bytes=undecoded,
        instructions=tuple(listing))


@dataclass(frozen=True)
class _Function:
    name: str
    section: str
    address: int
    start: int  # file offset of the first byte
    size: int


def _functions(data: bytes, source: str, max_function_bytes: int, max_code_bytes: int) -> list[_Function]:
    """Function symbols with their bytes' place in the file, every offset and size checked against the file."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    def fail(message: str) -> X86ObjectError:
        return X86ObjectError(source, message)

    elf = ELFFile(io.BytesIO(data))
    if elf.elfclass != 64 or not elf.little_endian or elf["e_machine"] != "EM_X86_64":
        raise fail(f"not an x86-64 ELF object (class {elf.elfclass}, machine {elf['e_machine']})")
    count = elf.num_sections()
    if count:
        if elf["e_shentsize"] != _ELF64_SHDR_SIZE:
            raise fail(f"section header size {elf['e_shentsize']}, expected {_ELF64_SHDR_SIZE}")
        if elf["e_shoff"] + count * _ELF64_SHDR_SIZE > len(data):
            raise fail(f"{count} section headers at offset {elf['e_shoff']} run past the end ({len(data)} bytes)")
    relocatable = elf["e_type"] == "ET_REL"
    found: list[_Function] = []
    total = 0
    for index in range(count):
        table = elf.get_section(index)
        if table["sh_type"] != "SHT_SYMTAB" or not isinstance(table, SymbolTableSection):
            continue
        if table["sh_entsize"] != _ELF64_SYM_SIZE or table["sh_offset"] + table["sh_size"] > len(data):
            raise fail(f"symbol table {table.name!r} (offset {table['sh_offset']}, size {table['sh_size']}, "
                       f"entry {table['sh_entsize']}) does not fit the file ({len(data)} bytes)")
        for symbol in table.iter_symbols():
            if symbol["st_info"]["type"] != "STT_FUNC" or symbol["st_size"] == 0:
                continue
            shndx, size = symbol["st_shndx"], symbol["st_size"]
            if not isinstance(shndx, int) or not 0 < shndx < count:
                raise fail(f"function {symbol.name!r} is in section {shndx}, not one of the {count} sections")
            if size > max_function_bytes:
                raise fail(f"function {symbol.name!r} claims {size} bytes, over the {max_function_bytes} limit")
            section = elf.get_section(shndx)
            if section["sh_type"] == _SHT_NOBITS or section["sh_offset"] + section["sh_size"] > len(data):
                raise fail(f"section {section.name!r} of function {symbol.name!r} (offset {section['sh_offset']}, "
                           f"size {section['sh_size']}) has no bytes in the file ({len(data)} bytes)")
            offset = symbol["st_value"] - (0 if relocatable else section["sh_addr"])
            if offset < 0 or offset + size > section["sh_size"]:
                raise fail(f"function {symbol.name!r} ({size} bytes at {offset:#x}) runs past section "
                           f"{section.name!r} ({section['sh_size']} bytes)")
            total += size
            if total > max_code_bytes:
                raise fail(f"function symbols cover more than {max_code_bytes} bytes of code")
            found.append(_Function(symbol.name, section.name, symbol["st_value"], section["sh_offset"] + offset, size))
    return found


def parse_x86_object(data: bytes, source: str, *, max_function_bytes: int = MAX_FUNCTION_BYTES,
                     max_code_bytes: int = MAX_CODE_BYTES) -> list[X86Kernel]:
    """One :class:`X86Kernel` per sized function symbol, in symbol-table order; [] when there are none."""
    if not data.startswith(b"\x7fELF"):
        raise X86ObjectError(source, "not an ELF file (no \\x7fELF magic)")
    try:
        functions = _functions(data, source, max_function_bytes, max_code_bytes)
    except X86ObjectError:
        raise
    except Exception as exc:  # pyelftools raises ELFError, construct and struct errors, IndexError... on bad input
        raise X86ObjectError(source, f"malformed ELF: {type(exc).__name__}: {exc}") from exc
    if not functions:
        return []
    cs = _Capstone()
    try:
        return [_disassemble(cs, data[f.start:f.start + f.size], f.name, f.address, source, f.section)
                for f in functions]
    except cs.CsError as exc:
        raise X86ObjectError(source, f"disassembly failed: {exc}") from exc


def parse_x86_object_file(path: str | os.PathLike[str], max_bytes: int = MAX_OBJECT_BYTES) -> list[X86Kernel]:
    source = os.fspath(path)
    try:
        with open(source, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise X86ObjectError(source, f"cannot read: {exc}") from exc
    if len(data) > max_bytes:
        raise X86ObjectError(source, f"larger than the {max_bytes}-byte limit")
    return parse_x86_object(data, source)


def total_mix(kernels: Iterable[X86Kernel]) -> dict[str, int]:
    """Instruction classes summed over kernels (a module's, say), every class present."""
    mix = dict.fromkeys(CLASSES, 0)
    for kernel in kernels:
        for kind, count in kernel.mix.items():
            mix[kind] += count
    return mix
