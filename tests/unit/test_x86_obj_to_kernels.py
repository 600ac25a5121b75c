"""x86 kernels from real XLA CPU object files (dumped by a subprocess), checked against the HLO and objdump,
and hostile input: random bytes, truncations, mutations and hand-corrupted headers."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import given, settings
from hypothesis import strategies as st

from runners.parsers.x86_obj_to_kernels import (
    CLASSES,
    Decoded,
    X86Kernel,
    X86ObjectError,
    classify,
    disassemble_function,
    memory_access,
    parse_x86_object,
    parse_x86_object_file,
    total_mix,
)

FUNCTIONS = """
import jax, jax.numpy as jnp, numpy as np
def chain(x): return jnp.tanh(jnp.exp(x) * 2.0 + 1.0)
def rowsum(x): return jnp.sum(x * x, axis=1)
def softmax(x): return jax.nn.softmax(x, axis=-1)
def matmul(a, b): return a @ b
x = np.ones((64, 256), np.float32)
for f in (chain, rowsum, softmax):
    jax.jit(f)(x).block_until_ready()
jax.jit(matmul)(x, x.T).block_until_ready()
"""
# keep fusions XLA-generated (no XNNPACK/YNNPACK), and the ISA fixed so widths do not follow the host
XLA_GENERATED = "--xla_cpu_use_xnnpack=false --xla_cpu_experimental_ynn_fusion_type= --xla_cpu_max_isa=AVX2"
HOST_HAS_AVX2 = "avx2" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False
FUSION = re.compile(r"^\s*(?:ROOT )?%(\S+) = .*? fusion\(", re.MULTILINE)
OBJECT = re.compile(r"^(module_\d+\.[^.]+)\..*\.o$")


def dump(directory: Path, flags: str) -> Path:
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_dump_to={directory} --xla_dump_hlo_as_text {flags}".strip())
    subprocess.run([sys.executable, "-c", FUNCTIONS], env=env, check=True, timeout=120, capture_output=True)
    return directory


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return dump(tmp_path_factory.mktemp("xla_generated"), XLA_GENERATED)


@pytest.fixture(scope="module")
def default_flags(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return dump(tmp_path_factory.mktemp("default_flags"), "")


def objects(directory: Path) -> list[Path]:
    found = sorted(directory.glob("*.o"))
    assert found, f"no object files in {directory}: {sorted(p.name for p in directory.iterdir())}"
    return found


def fusions_of(obj: Path) -> set[str]:
    match = OBJECT.match(obj.name)
    assert match, obj.name
    return set(FUSION.findall((obj.parent / f"{match.group(1)}.cpu_after_optimizations.txt").read_text()))


def test_every_object_holds_a_fusion_of_its_module(generated: Path) -> None:
    for obj in objects(generated):
        kernels = parse_x86_object_file(obj)
        assert kernels, obj.name
        assert {k.name for k in kernels} & fusions_of(obj), obj.name
        for kernel in kernels:
            assert kernel.source == str(obj) and kernel.section in (".ltext", ".text")
            assert kernel.instruction_count == len(kernel.instructions) == sum(kernel.mix.values()) > 0
            assert set(kernel.mix) == set(CLASSES) and kernel.undecoded_bytes == 0
            assert kernel.vector_width_bits in (0, 128, 256, 512) and kernel.vector_width_bits <= 256  # AVX2 cap
            assert sum(kernel.width_counts.values()) <= kernel.instruction_count
            assert kernel.mix["branch"] >= 1  # at least the ret
            assert len(kernel.code_sha256) == 64 and kernel.size_bytes > 0


def test_library_calls_leave_no_object_file(generated: Path, default_flags: Path) -> None:
    # default flags: the reduction, the softmax reductions and the matmul become YNNPACK ynn_fusions
    default_objects = objects(default_flags)
    names = {k.name for obj in default_objects for k in parse_x86_object_file(obj)}
    hlo = "".join(p.read_text() for p in default_flags.glob("*cpu_after_optimizations.txt"))
    assert "ynn_fusion" in hlo and not any(n.startswith("ynn_fusion") for n in names)
    assert not [o for o in default_objects if ".jit_matmul." in o.name]
    # XLA-generated flags: the reductions get objects; the dot is still a runtime (Eigen) call without one
    assert not [o for o in objects(generated) if ".jit_matmul." in o.name]
    (matmul_hlo,) = generated.glob("*jit_matmul.cpu_after_optimizations.txt")
    assert " dot(" in matmul_hlo.read_text()
    assert [o for o in objects(generated) if ".jit_rowsum." in o.name]


def test_an_elementwise_chain_is_vectorised(generated: Path) -> None:
    (obj,) = [o for o in objects(generated) if ".jit_chain." in o.name]
    (kernel,) = [k for k in parse_x86_object_file(obj) if k.name in fusions_of(obj)]
    mix = kernel.mix
    assert mix["vector_fma"] + mix["vector_mul"] + mix["vector_add"] > 0 and mix["vector_other"] > 0
    assert mix["load"] > 0 and mix["store"] > 0 and kernel.memory_reads > 0 and kernel.memory_writes > 0
    if HOST_HAS_AVX2:
        assert kernel.vector_width_bits == 256 and kernel.width_counts[256] > 0 and kernel.width_counts[512] == 0
        assert "avx" in kernel.isa_extensions
    assert total_mix([kernel, kernel])["load"] == 2 * mix["load"]


def objdump_addresses(obj: Path, symbol: str) -> list[int]:
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-M", "intel", str(obj)], check=True,
                         capture_output=True, text=True, timeout=30).stdout
    addresses: list[int] = []
    inside = False
    for line in out.splitlines():
        header = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if header:
            inside = header.group(1) == symbol
        elif inside and (m := re.match(r"^\s+([0-9a-f]+):\s", line)):
            addresses.append(int(m.group(1), 16))
    return addresses


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_objdump_decodes_the_same_instructions(generated: Path) -> None:
    # every object: the same number of instructions at the same addresses (mnemonic spellings differ: "cs nop")
    for obj in objects(generated):
        for kernel in parse_x86_object_file(obj):
            assert [i.address for i in kernel.instructions] == objdump_addresses(obj, kernel.name), kernel.name


def test_capstone_vex_store_is_counted_as_a_store() -> None:
    # capstone 5 reports the memory operand of VEX stores as read; the parser corrects it
    code = bytes.fromhex("c5fc1124b1" "c4e27d182f" "c4e27da80e" "c5f4590f" "48890424" "c3")
    kinds = [(i.mnemonic, i.kind) for i in disassemble_function(code, "f").instructions]
    assert kinds == [("vmovups", "store"), ("vbroadcastss", "load"), ("vfmadd213ps", "vector_fma"),
                     ("vmulps", "vector_mul"), ("mov", "store"), ("ret", "branch")]
    kernel = disassemble_function(code)
    assert kernel.memory_writes == 2 and kernel.memory_reads == 3 and kernel.width_counts[256] == 4


# Each of these once got its class from capstone 5's operand access flags, which are wrong for legacy SSE stores
# (movups, extractps: "read") and x87 stores, and for opcodes whose access list in capstone's table is short or
# empty (test [mem], reg; vbroadcastf32x4) are bytes read past the list's end: uninitialized stack, whatever the
# process left there, so one object's mix moved with PYTHONHASHSEED.
MEMORY_FORMS = [
    ("0f1100", "movups", "store", (False, True)),  # movups xmmword ptr [rax], xmm0
    ("f20f1108", "movsd", "store", (False, True)),  # movsd qword ptr [rax], xmm1
    ("660f3a170801", "extractps", "store", (False, True)),  # extractps dword ptr [rax], xmm1, 1
    ("62f27d281a00", "vbroadcastf32x4", "load", (True, False)),  # vbroadcastf32x4 ymm0, xmmword ptr [rax]
    ("8508", "test", "scalar_arith", (True, False)),  # test dword ptr [rax], ecx
    ("833801", "cmp", "scalar_arith", (True, False)),  # cmp dword ptr [rax], 1
    ("0f9400", "sete", "store", (False, True)),  # sete byte ptr [rax]
    ("dd18", "fstp", "store", (False, True)),  # fstp qword ptr [rax]
    ("ff30", "push", "store", (True, False)),  # push qword ptr [rax]: reads memory, pushes it
    ("8f00", "pop", "store", (False, True)),  # pop qword ptr [rax]
    ("0108", "add", "store", (True, True)),  # add dword ptr [rax], ecx
    ("f0480fc108", "lock xadd", "store", (True, True)),
    ("f348ab", "rep stosq", "store", (False, True)),  # rep stosq qword ptr [rdi], rax
    ("488708", "xchg", "store", (True, True)),  # xchg qword ptr [rax], rcx
    ("0f1808", "prefetcht0", "other", (False, False)),
]


@pytest.mark.parametrize(("code", "mnemonic", "kind", "access"), MEMORY_FORMS)
def test_memory_forms_are_classed_by_operand_place(code: str, mnemonic: str, kind: str,
                                                    access: tuple[bool, bool]) -> None:
    kernel = disassemble_function(bytes.fromhex(code))
    [insn] = kernel.instructions
    assert (insn.mnemonic, insn.kind) == (mnemonic, kind)
    assert (kernel.memory_reads, kernel.memory_writes) == access


@pytest.mark.parametrize(("mnemonic", "index", "count", "access"), [
    ("vmovups", 0, 2, (False, True)),
    ("vmovups", 1, 2, (True, False)),
    ("vmaskmovps", 0, 3, (False, True)),
    ("vfmadd231ps", 2, 3, (True, False)),
    ("cmp", 0, 2, (True, False)),
    ("bt", 0, 2, (True, False)),
    ("bts", 0, 2, (True, True)),
    ("lock add", 0, 2, (True, True)),
    ("inc", 0, 1, (True, True)),
    ("not", 0, 1, (True, True)),
    ("setne", 0, 1, (False, True)),
    ("vstmxcsr", 0, 1, (False, True)),
    ("ldmxcsr", 0, 1, (True, False)),
    ("call", 0, 1, (True, False)),
    ("fld", 0, 1, (True, False)),
    ("xchg", 1, 2, (True, True)),
    ("repe cmpsb", 0, 2, (True, False)),
    ("lea", 1, 2, (False, False)),
    ("nop", 0, 1, (False, False)),
])
def test_memory_access_rule(mnemonic: str, index: int, count: int, access: tuple[bool, bool]) -> None:
    assert memory_access(mnemonic, index, count) == access


PARSE_RECORDS = """
import json, sys
from runners.parsers.x86_obj_to_kernels import parse_x86_object_file
print(json.dumps([[k.name, k.code_sha256, k.instruction_count, k.mix, k.memory_reads, k.memory_writes,
                   "".join(i.kind[0] for i in k.instructions)]
                  for path in sys.argv[1:] for k in parse_x86_object_file(path)]))
"""


def test_counts_and_mix_do_not_depend_on_the_hash_seed(generated: Path, default_flags: Path) -> None:
    """The same objects in fresh interpreters with different hash seeds (and so different histories of their
    heap and C stack) get the same counts, mix and per-instruction classes."""
    paths = [str(p) for p in objects(generated) + objects(default_flags)]
    seen = {}
    for seed in ("0", "1", "2", "3", "5", "6"):
        done = subprocess.run([sys.executable, "-c", PARSE_RECORDS, *paths], env=dict(os.environ, PYTHONHASHSEED=seed),
                              check=True, capture_output=True, text=True, timeout=120)
        seen[seed] = json.loads(done.stdout)
    assert seen["0"] and sum(len(records[-1]) for records in seen["0"]) > 1000  # every object, real code
    assert all(records == seen["0"] for records in seen.values()), {s: r == seen["0"] for s, r in seen.items()}


def function_bytes(obj: Path, kernel: X86Kernel) -> bytes:
    import io

    section = ELFFile(io.BytesIO(obj.read_bytes())).get_section_by_name(kernel.section)
    return bytes(section.data()[kernel.address:kernel.address + kernel.size_bytes])  # relocatable: offsets


def counted(kernel: X86Kernel) -> tuple[object, ...]:
    return (kernel.instruction_count, kernel.mix, kernel.memory_reads, kernel.memory_writes,
            [i.kind for i in kernel.instructions])


def test_identical_code_gets_identical_counts(generated: Path) -> None:
    parsed = [(obj, k) for obj in objects(generated) for k in parse_x86_object_file(obj)]
    by_code: dict[str, set[str]] = {}
    for obj, kernel in parsed:
        code = function_bytes(obj, kernel)
        assert hashlib.sha256(code).hexdigest() == kernel.code_sha256
        # the same bytes again after every other kernel was read, alone, and at another address (a listing
        # that differs only in its addresses)
        assert counted(disassemble_function(code, kernel.name, address=kernel.address)) == counted(kernel)
        assert counted(disassemble_function(code, address=kernel.address + 0x10000)) == counted(kernel)
        by_code.setdefault(kernel.code_sha256, set()).add(repr(counted(kernel)))
    assert all(len(records) == 1 for records in by_code.values())  # the same bytes in two objects: one count


def test_undecodable_bytes_are_listed_not_dropped() -> None:
    kernel = disassemble_function(bytes.fromhex("c3" "06" "c3"))  # 06 (push es) is invalid in 64-bit mode
    assert [i.mnemonic for i in kernel.instructions] == ["ret", ".byte", "ret"] and kernel.undecoded_bytes == 1


@pytest.mark.parametrize(("insn", "kind"), [
    (Decoded("vfnmadd231ps", 256), "vector_fma"),
    (Decoded("vpmulld", 128), "vector_mul"),
    (Decoded("vsubps", 512), "vector_add"),
    (Decoded("vpaddd", 256, reads_memory=True), "vector_add"),
    (Decoded("vblendvps", 256), "vector_other"),
    (Decoded("vzeroupper"), "vector_other"),
    (Decoded("vmovaps", 256), "vector_other"),
    (Decoded("vpbroadcastd", 256, reads_memory=True), "load"),
    (Decoded("mov", reads_memory=True), "load"),
    (Decoded("vmovups", 256, writes_memory=True), "store"),
    (Decoded("vgatherdps", 256, reads_memory=True), "gather"),
    (Decoded("vpgatherdq", 256, reads_memory=True), "gather"),
    (Decoded("lea"), "scalar_arith"),
    (Decoded("imul"), "scalar_arith"),
    (Decoded("jne", is_branch=True), "branch"),
    (Decoded("call"), "branch"),
    (Decoded("movabs"), "other"),
    (Decoded("nop"), "other"),
])
def test_classes(insn: Decoded, kind: str) -> None:
    assert classify(insn) == kind


# --- hostile input -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_object(generated: Path) -> bytes:
    return min((p.read_bytes() for p in objects(generated)), key=len)


def symbol_entries(data: bytes) -> list[tuple[int, int]]:
    """(file offset of each Elf64_Sym, its st_info) of the real object's symbol table."""
    import io

    elf = ELFFile(io.BytesIO(data))
    table = next(s for s in elf.iter_sections() if s["sh_type"] == "SHT_SYMTAB")
    base = table["sh_offset"]
    return [(base + i * 24, data[base + i * 24 + 4]) for i in range(table["sh_size"] // 24)]


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def test_an_object_without_function_symbols_is_an_empty_list(small_object: bytes) -> None:
    data = small_object
    out = bytearray(data)
    for offset, info in symbol_entries(data):
        if info & 0xF == 2:  # STT_FUNC → STT_OBJECT
            out[offset + 4] = (info & 0xF0) | 1
    assert parse_x86_object(bytes(out), "stripped.o") == []


def test_absurd_symbol_sizes_are_refused(small_object: bytes) -> None:
    data = small_object
    (func,) = [offset for offset, info in symbol_entries(data) if info & 0xF == 2]
    with pytest.raises(X86ObjectError, match="claims") as caught:
        parse_x86_object(patched(data, func + 16, "<Q", 1 << 40), "huge.o")
    assert caught.value.source == "huge.o" and "huge.o" in str(caught.value)
    with pytest.raises(X86ObjectError, match="runs past section"):
        parse_x86_object(patched(data, func + 16, "<Q", 1 << 20), "past.o")


def test_corrupted_section_offsets_are_refused(small_object: bytes) -> None:
    data = small_object
    with pytest.raises(X86ObjectError, match="bad.o"):
        parse_x86_object(patched(data, 0x28, "<Q", 1 << 40), "bad.o")  # e_shoff
    import io

    elf = ELFFile(io.BytesIO(data))
    shoff = elf["e_shoff"]
    ltext = next(i for i, s in enumerate(elf.iter_sections()) if s.name == ".ltext")
    with pytest.raises(X86ObjectError, match="has no bytes"):
        parse_x86_object(patched(data, shoff + ltext * 64 + 24, "<Q", 1 << 40), "ltext.o")  # sh_offset


def test_not_elf_truncated_and_oversized_files(small_object: bytes, tmp_path: Path) -> None:
    data = small_object
    with pytest.raises(X86ObjectError, match="not an ELF"):
        parse_x86_object(b"hello", "hello.o")
    for cut in [*range(0, len(data), 1024), *range(1, 80, 7), len(data) - 1]:
        with pytest.raises(X86ObjectError, match="cut.o"):
            parse_x86_object(data[:cut], "cut.o")
    big = tmp_path / "big.o"
    big.write_bytes(data)
    with pytest.raises(X86ObjectError, match="limit"):
        parse_x86_object_file(big, max_bytes=len(data) - 1)
    with pytest.raises(X86ObjectError, match="cannot read"):
        parse_x86_object_file(tmp_path / "missing.o")


def either_kernels_or_typed_error(data: bytes) -> None:
    try:
        kernels = parse_x86_object(data, "fuzz.o")
    except X86ObjectError as exc:
        assert exc.source == "fuzz.o"
    else:
        assert all(isinstance(k, X86Kernel) for k in kernels)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=4096), st.booleans())
def test_random_bytes_are_a_typed_error(data: bytes, with_magic: bool) -> None:
    either_kernels_or_typed_error((b"\x7fELF\x02\x01\x01" if with_magic else b"") + data)


@settings(max_examples=200, deadline=None)
@given(mutations=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=8))
def test_mutated_objects_parse_or_fail_typed(small_object: bytes, mutations: list[tuple[int, int]]) -> None:
    data = bytearray(small_object)
    for position, value in mutations:
        data[position % len(data)] = value
    either_kernels_or_typed_error(bytes(data))
