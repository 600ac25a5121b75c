"""SASS listings → kernel records: hand-checked synthetic fixtures, generated listings whose counts the generator
knows, and hostile input that must end in SassParseError (never another exception, never slowly)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers.sass_to_kernels import (
    CATEGORIES,
    MAX_LINE_CHARS,
    SassKernel,
    SassParseError,
    category,
    parse_sass,
    parse_sass_bytes,
    parse_sass_file,
    short_name,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sass"


def nonzero(kernel: SassKernel) -> dict[str, int]:
    return {name: count for name, count in kernel.mix.items() if count}


def kernel_text(*instructions: str, name: str = "_Z1kv", arch: str = "sm_80") -> str:
    body = "\n".join(f"        /*{16 * i:04x}*/  {text}" for i, text in enumerate(instructions))
    return f"\tcode for {arch}\n\t\tFunction : {name}\n{body}\n\t\t.........\n"


# --- hand-checked fixtures -----------------------------------------------------------------------------------------


def test_sm80_gemm_kernel_counts_by_hand() -> None:
    gemm, spill, wgmma = parse_sass_file(FIXTURES / "synthetic_sm80_sm90a.sass")
    assert (gemm.name, gemm.short_name, gemm.arch) == ("_Z11gemm_kernelPK6__halfS1_Pfi", "gemm_kernel", "sm_80")
    # 3 HMMA, 2 LDG, 1 STG, 2 EXIT + 1 BRA, LDGSTS + LDGDEPBAR, DEPBAR + BAR, 1 LDSM, 1 STS, ...: 23 in all
    assert gemm.instruction_count == 23
    assert nonzero(gemm) == {
        "mma": 3, "load_global": 2, "store_global": 1, "branch": 3, "async_copy": 2, "barrier": 2, "load_shared": 1,
        "store_shared": 1, "move": 2, "load_const": 1, "predicate": 1, "int_arith": 1, "fp_arith": 1, "fma": 1,
        "convert": 1,
    }
    assert set(gemm.mix) == set(CATEGORIES) and sum(gemm.mix.values()) == 23
    assert gemm.predicated == 2 and (gemm.spill_loads, gemm.spill_stores) == (0, 0)
    assert (gemm.registers, gemm.shared_bytes, gemm.stack_frame_bytes) == (40, 8192, 0)
    assert (gemm.spill_store_bytes, gemm.spill_load_bytes) == (0, 0)
    assert gemm.headerflags is not None and "EF_CUDA_SM80" in gemm.headerflags


def test_instruction_records_keep_address_predicate_modifiers_and_operands() -> None:
    gemm = parse_sass_file(FIXTURES / "synthetic_sm80_sm90a.sass")[0]
    ldg = gemm.instructions[6]
    assert (ldg.address, ldg.predicate, ldg.opcode, ldg.modifiers) == (0x60, None, "LDG", ("E", "128", "CONSTANT"))
    assert ldg.operands == "R4, [R2.64]" and ldg.category == "load_global"
    exit_ = gemm.instructions[4]
    assert (exit_.address, exit_.predicate, exit_.opcode, exit_.operands) == (0x40, "@P0", "EXIT", "")
    hmma = gemm.instructions[15]
    assert (hmma.predicate, hmma.opcode, hmma.modifiers) == ("@!P1", "HMMA", ("16816", "F32"))
    last = gemm.instructions[-1]
    assert (last.address, last.opcode, last.operands) == (0x160, "BRA", "0x160")  # no space before ';'
    assert gemm.text.splitlines()[0].strip() == "Function : _Z11gemm_kernelPK6__halfS1_Pfi"
    assert "/* 0x000fe40000000f00 */" in gemm.text and "/*0160*/" in gemm.text


def test_spilling_kernel_counts_local_memory_and_ptxas_spill_bytes() -> None:
    spill = parse_sass_file(FIXTURES / "synthetic_sm80_sm90a.sass")[1]
    assert (spill.short_name, spill.instruction_count, spill.predicated) == ("spill_kernel", 10, 1)
    assert (spill.spill_stores, spill.spill_loads) == (2, 1)  # STL.64, STL; LDL.64
    assert nonzero(spill) == {"move": 1, "int_arith": 1, "other_memory": 3, "fp_arith": 2, "convert": 1, "branch": 2}
    assert (spill.registers, spill.stack_frame_bytes, spill.spill_store_bytes, spill.spill_load_bytes) == (
        255, 16, 12, 8)


def test_hopper_kernel_with_wgmma_tma_and_one_line_ptxas_report() -> None:
    wgmma = parse_sass_file(FIXTURES / "synthetic_sm80_sm90a.sass")[2]
    assert (wgmma.arch, wgmma.short_name, wgmma.instruction_count, wgmma.predicated) == (
        "sm_90a", "cute::wgmma_mainloop", 19, 3)
    # 2 HGMMA; SYNCS x2 + WARPGROUP x2 + FENCE + WARPSYNC; UTMALDG + UTMASTG; EXIT + 2 BRA
    assert nonzero(wgmma) == {
        "mma": 2, "barrier": 6, "async_copy": 2, "branch": 3, "load_const": 1, "move": 1, "predicate": 1,
        "fp_arith": 1, "convert": 1, "store_shared": 1,
    }
    assert wgmma.instructions[1].opcode == "S2UR" and wgmma.instructions[6].operands == "`(.L_x_0)"
    assert (wgmma.registers, wgmma.shared_bytes, wgmma.spill_store_bytes, wgmma.stack_frame_bytes) == (
        168, 32768, 0, None)


def test_maxwell_control_words_and_dual_issue_pairs() -> None:
    (axpy,) = parse_sass_file(FIXTURES / "synthetic_sm52_dual_issue.sass")
    assert (axpy.arch, axpy.short_name, axpy.instruction_count, axpy.predicated) == ("sm_52", "axpy", 13, 1)
    assert nonzero(axpy) == {
        "move": 3, "int_arith": 2, "predicate": 1, "branch": 3, "load_global": 2, "fma": 1, "store_global": 1}
    assert [i.address for i in axpy.instructions[:4]] == [0x08, 0x10, 0x18, 0x28]
    assert axpy.instructions[1].operands == "R0, SR_CTAID.X" and axpy.instructions[2].operands == "R2, SR_TID.X"
    assert axpy.registers is None


@pytest.mark.parametrize(("opcode", "expected"), [
    ("HMMA", "mma"), ("IMMA", "mma"), ("DMMA", "mma"), ("HGMMA", "mma"), ("WGMMA", "mma"), ("UTCHMMA", "mma"),
    ("FFMA", "fma"), ("DFMA", "fma"), ("HFMA2", "fma"), ("MUFU", "fp_arith"), ("FMNMX", "fp_arith"),
    ("IADD3", "int_arith"), ("UIADD3", "int_arith"), ("LDG", "load_global"), ("STG", "store_global"),
    ("LDSM", "load_shared"), ("STS", "store_shared"), ("LDC", "load_const"), ("ULDC", "load_const"),
    ("LDL", "other_memory"), ("STL", "other_memory"), ("LDGSTS", "async_copy"), ("UTMALDG", "async_copy"),
    ("BAR", "barrier"), ("SYNCS", "barrier"), ("MEMBAR", "barrier"), ("DEPBAR", "barrier"), ("WARPSYNC", "barrier"),
    ("BRA", "branch"), ("BSSY", "branch"), ("BSYNC", "branch"), ("EXIT", "branch"), ("ISETP", "predicate"),
    ("UISETP", "predicate"), ("MOV", "move"), ("UMOV", "move"), ("SEL", "move"), ("F2F", "convert"),
    ("I2F", "convert"), ("NOP", "other"), ("MADEUP", "other"),
])
def test_category_table(opcode: str, expected: str) -> None:
    assert category(opcode) == expected


@pytest.mark.parametrize(("mangled", "short"), [
    ("_Z6kernelPfS_i", "kernel"), ("_ZN4mgpu16launch_box_cta_kIiEEvT_", "mgpu::launch_box_cta_k"),
    ("_ZN7cutlass13device_kernelINS_4gemm6kernel9GemmUnivEEEvNT_6ParamsE", "cutlass::device_kernel"),
    ("_ZN12_GLOBAL__N_16kernelEv", "_GLOBAL__N_1::kernel"), ("_ZNSt6detail1fEv", "std::detail::f"),
    ("_ZL6staticv", "static"),
    ("triton_gemm_dot", "triton_gemm_dot"), ("_Z999toolong", "_Z999toolong"), ("_Z", "_Z"),
])
def test_short_names(mangled: str, short: str) -> None:
    assert short_name(mangled) == short


# --- hostile input -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "line", "words"), [
    ("", 1, "empty"),
    ("  \n\t\n", 1, "empty"),
    ("code for sm_80\nFunction : k\n/*0000*/ EXIT ;\x00\n", 3, "control byte"),
    ("code for sm_80\nFunction : k\n/*0000*/ EXIT ;\x07\n", 3, "control byte"),
    ("/*0000*/ EXIT ;\n", 1, "outside"),
    ("code for sm_80\nFunction : k\n", 2, "no instructions"),
    ("code for sm_80\nFunction : k\nFunction : j\n/*0000*/ EXIT ;\n", 2, "no instructions"),
    ("code for sm_80\nFunction : k\n/*0000*/ MOV R1, R2\n", 3, "';'"),
    ("code for sm_80\nFunction : k\n/*0000*/ { MOV R1, R2 ;\n/*0010*/ EXIT ;\n", 3, "never closed"),
    ("code for sm_80\nFunction : k\n/*0000*/ { MOV R1, R2 ;\n/*0010*/ { EXIT ;\n", 4, "inside another"),
    ("code for sm_80\nFunction : k\n/*0000*/ MOV R1, R2 ; }\n", 3, "without"),
    ("code for sm_80\nFunction : k\n/*0000*/ EXIT ;\nhello there\n", 4, "unrecognised"),
    ("code for sm_80\nFunction : k\n/*0010*/ NOP ;\n/*0010*/ EXIT ;\n", 4, "does not increase"),
    ("code for sm_80\nFunction : k\n/*0000*/ MOV R1, " + "[" * 40 + " ;\n", 3, "nested"),
    ("code for sm_80\nFunction : k\n/*0000*/ @Q0 EXIT ;\n", 3, "predicate"),
    ("code for sm_80\nFunction : k\n/*0000*/ exit ;\n", 3, "opcode"),
    ("code for sm_80\nFunction : k\n/*0000*/ EXIT, ;\n", 3, "opcode"),
    ("code for sm_80\nFunction : k\n/*0000*/ EXIT ;\n/* unterminated\n", 4, "unterminated"),
    ("code for cuda\n", 1, "arch"),
    ("just some text\nwith no kernels\n", 0, "no 'Function :'"),
])
def test_malformed_input_is_a_typed_error_naming_source_and_line(text: str, line: int, words: str) -> None:
    with pytest.raises(SassParseError) as caught:
        parse_sass(text, source="bad.sass")
    assert (caught.value.source, caught.value.line) == ("bad.sass", line)
    assert str(caught.value).startswith(f"bad.sass:{line}: ") and words in str(caught.value)


def test_an_over_long_line_is_refused_before_any_regex_and_fast() -> None:
    text = "code for sm_80\nFunction : k\n/*0000*/ MOV R1, " + "a" * MAX_LINE_CHARS + " ;\n"
    started = time.perf_counter()
    with pytest.raises(SassParseError, match="exceeds") as caught:
        parse_sass(text)
    assert caught.value.line == 3 and time.perf_counter() - started < 0.5


@pytest.mark.parametrize("filler", [" ", "[", "@", "/*", "0", ".", "Function :", "R1, ", "\t{", "ptxas info : "])
def test_pathological_lines_just_under_the_limit_end_quickly(filler: str) -> None:
    body = (filler * (MAX_LINE_CHARS // len(filler)))[: MAX_LINE_CHARS - 20]
    for line in (body, "/*0000*/ " + body, "/*0000*/ MOV " + body + " ;", "ptxas info : Used " + body):
        started = time.perf_counter()
        try:
            parse_sass("code for sm_80\nFunction : k\n" + line + "\n/*fff0*/ EXIT ;\n")
        except SassParseError:
            pass
        assert time.perf_counter() - started < 1.0, (filler, line[:30])


def test_file_reading_is_capped_and_needs_utf8(tmp_path: Path) -> None:
    path = tmp_path / "k.sass"
    path.write_text(kernel_text("EXIT ;"))
    assert parse_sass_file(path)[0].instruction_count == 1
    with pytest.raises(SassParseError, match="larger than 10 bytes") as caught:
        parse_sass_file(path, max_bytes=10)
    assert caught.value.source == str(path) and caught.value.line == 0
    path.write_bytes(kernel_text("EXIT ;").encode() + b"\xff\xfe\n")
    with pytest.raises(SassParseError, match="UTF-8"):
        parse_sass_file(path)


# --- generated listings: the parser recovers every count the generator wrote ----------------------------------------

GENERATED_OPCODES = {
    "mma": ["HMMA.16816.F32", "HMMA.16816.F32.BF16", "IMMA.16832.S8.S8", "DMMA.884", "HGMMA.64x128x16.F32.BF16",
            "IGMMA.64x8x32.S8.S8", "QGMMA.64x8x32.F32.E4M3.E4M3", "UTCHMMA"],
    "fma": ["FFMA", "FFMA.FTZ", "DFMA", "HFMA2", "HFMA2.MMA"],
    "fp_arith": ["FADD", "FMUL", "FMNMX", "MUFU.EX2", "MUFU.RCP", "DADD", "HADD2"],
    "int_arith": ["IADD3", "IMAD", "IMAD.WIDE.U32", "LOP3.LUT", "SHF.R.U32.HI", "LEA", "UIADD3"],
    "load_global": ["LDG.E", "LDG.E.128.CONSTANT", "LDG.E.64.STRONG.GPU"],
    "store_global": ["STG.E", "STG.E.128"],
    "load_shared": ["LDS", "LDS.U.128", "LDSM.16.M88.4"],
    "store_shared": ["STS", "STS.128", "STSM.16.M88.4"],
    "load_const": ["LDC", "ULDC.64", "LDC.64"],
    "other_memory": ["ATOMG.E.ADD.F32", "RED.E.ADD", "ATOMS.ADD", "LD.E", "ST.E", "LDL", "LDL.64", "STL", "STL.128"],
    "async_copy": ["LDGSTS.E.BYPASS.128", "UTMALDG.2D", "UTMASTG.3D", "UBLKCP.S.G", "LDGDEPBAR"],
    "barrier": ["BAR.SYNC", "SYNCS.ARRIVE.TRANS64.RED.A1T0", "MEMBAR.GPU", "DEPBAR.LE", "WARPSYNC",
                "WARPGROUP.ARRIVE"],
    "branch": ["BRA", "BRX", "JMP", "CALL.REL.NOINC", "RET.REL.NODEC", "EXIT", "BSYNC", "BSSY"],
    "predicate": ["ISETP.GE.AND", "FSETP.GT.AND", "PLOP3.LUT", "UISETP.NE.U32.AND"],
    "move": ["MOV", "SEL", "S2R", "CS2R", "UMOV", "PRMT", "SHFL.BFLY.PT"],
    "convert": ["F2F.F16.F32", "I2F", "F2I.TRUNC", "F2FP.BF16.F32.PACK_AB", "I2F.U32"],
    "other": ["NOP", "YIELD", "NANOSLEEP"],
}
ALL_OPCODES = [(cls, op) for cls, ops in GENERATED_OPCODES.items() for op in ops]
OPERANDS = ["R1", "R12", "RZ", "PT", "!PT", "P0", "UR4", "c[0x0][0x28]", "[R2.64]", "desc[UR4][R2.64+0x10]",
            "0x10", "-0x8", "gdesc[UR12]", "`(.L_x_3)", "SR_TID.X", "R4.reuse", "[R1+0x8]"]
PREDICATES = [None, None, "@P0", "@!P1", "@PT", "@!PT", "@UP0", "@!UP3"]
OPERAND_LISTS = ["", *OPERANDS, "R1, R2, R3", "R4, [R2.64+0x800]", "UR4, c[0x0][0x118]",
                 "P0, PT, R0, c[0x0][0x178], PT", "R24, gdesc[UR12], RZ, !UPT, gsb0", "`(.L_x_3)", "0x160"]
# (spacing after the address, the end of the line with its ';', address step)
LINE_FORMATS = [("   ", " ;", 16), (" " * 19, " ;                /* 0x00000a0000017a02 */", 16), ("\t", ";", 8),
                ("  ", ";   /* 0x4c98078000870001 */", 32), ("       ", " ;", 8)]
EXTRA_LINES = ["", ".L_x_7:", "        /* 0x000fe40000000f00 */", "// note"]


@dataclass
class Expected:
    name: str
    arch: str
    mix: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    predicated: int = 0
    spill_loads: int = 0
    spill_stores: int = 0
    registers: int | None = None
    spill_store_bytes: int | None = None


INSTRUCTIONS = st.tuples(
    st.sampled_from(ALL_OPCODES), st.sampled_from(PREDICATES), st.sampled_from(OPERAND_LISTS),
    st.sampled_from(LINE_FORMATS), st.integers(0, 15),
)


@st.composite
def kernel_lines(draw: st.DrawFn, expected: Expected) -> list[str]:
    lines = [f"\t\tFunction : {expected.name}", '\t.headerflags\t@"EF_CUDA_64BIT_ADDRESS"']
    address = draw(st.integers(0, 0x100)) * 8
    drawn = draw(st.lists(INSTRUCTIONS, min_size=1, max_size=20))
    pair_open = False
    for i, ((cls, opcode), predicate, operands, (spaces, end, step), extra) in enumerate(drawn):
        if extra < len(EXTRA_LINES):
            lines.append(EXTRA_LINES[extra])
        expected.mix[cls] += 1
        expected.predicated += predicate is not None
        expected.spill_loads += opcode.split(".")[0] == "LDL"
        expected.spill_stores += opcode.split(".")[0] == "STL"
        opening = "{ " if not pair_open and i + 1 < len(drawn) and extra == 15 else ""
        closing = " }" if pair_open else ""
        pair_open = bool(opening)
        text = " ".join(part for part in (predicate, opcode, operands) if part)
        lines.append(f"        /*{address:04x}*/{spaces}{opening}{text}{end.replace(';', ';' + closing)}")
        address += step
    lines.append("\t\t..........")
    return lines


@st.composite
def listings(draw: st.DrawFn) -> tuple[str, list[Expected]]:
    expected: list[Expected] = []
    body: list[str] = []
    ptxas: list[str] = []
    for section in range(draw(st.integers(1, 3))):  # arch sections, each with kernels
        arch = draw(st.sampled_from(["sm_70", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a"]))
        if draw(st.booleans()):
            body += ["", "Fatbin elf code:", "================", f"arch = {arch}", "code version = [1,7]", ""]
        body.append(f"\tcode for {arch}")
        for index in range(draw(st.integers(1, 3))):
            stem = draw(st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
            name = f"_Z{len(stem) + 3}{stem}_{section}{index}Pfi"
            kernel = Expected(name, arch)
            if draw(st.booleans()):
                kernel.registers, kernel.spill_store_bytes = draw(st.tuples(st.integers(1, 255), st.integers(0, 4096)))
                spills = f"{kernel.spill_store_bytes} bytes spill stores"
                ptxas += [f"ptxas info    : Compiling entry function '{name}' for '{arch}'",
                          f"ptxas info    : Function properties for {name}",
                          f"    0 bytes stack frame, {spills}, 0 bytes spill loads" if draw(st.booleans())
                          else f"  16 bytes stack frame, {spills}",
                          f"ptxas info    : Used {kernel.registers} registers, 380 bytes cmem[0]"]
            body += draw(kernel_lines(kernel))
            body += [""] * draw(st.integers(0, 2))
            expected.append(kernel)
    return "\n".join(ptxas + body) + "\n", expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(listings())
def test_generated_listings_are_recovered_exactly(case: tuple[str, list[Expected]]) -> None:
    text, expected = case
    kernels = parse_sass(text, source="generated")
    assert [(k.name, k.arch) for k in kernels] == [(e.name, e.arch) for e in expected]
    for kernel, want in zip(kernels, expected, strict=True):
        assert kernel.mix == want.mix
        assert kernel.instruction_count == sum(want.mix.values()) == len(kernel.instructions)
        assert (kernel.predicated, kernel.spill_loads, kernel.spill_stores) == (
            want.predicated, want.spill_loads, want.spill_stores)
        assert (kernel.registers, kernel.spill_store_bytes) == (want.registers, want.spill_store_bytes)
        assert kernel.short_name == want.name[2:].lstrip("0123456789")[:-3]


# --- fuzz: anything in, only SassParseError out ---------------------------------------------------------------------

FUZZ_ALPHABET = st.sampled_from(list("/*0xafAF {}[]();@!.,:_ \t\nPRZTEXITBRAFunction codefrsm_89LDG") + ["\x00", "é"])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.text(FUZZ_ALPHABET, max_size=300)))
def test_random_text_raises_only_the_typed_error(text: str) -> None:
    try:
        parse_sass(text)
    except SassParseError as error:
        assert error.source == "<sass>" and error.line >= 0


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=500))
def test_random_bytes_raise_only_the_typed_error(data: bytes) -> None:
    try:
        parse_sass_bytes(data)
    except SassParseError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(listings(), st.data())
def test_mutated_listings_raise_only_the_typed_error(case: tuple[str, list[Expected]], data: st.DataObject) -> None:
    lines = case[0].split("\n")
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(lines) - 1))
        how = data.draw(st.sampled_from(["drop", "dup", "cut", "insert"]))
        if how == "drop":
            del lines[at]
        elif how == "dup":
            lines.insert(at, lines[at])
        elif how == "cut":
            lines[at] = lines[at][: data.draw(st.integers(0, len(lines[at])))]
        else:
            lines[at] = lines[at] + data.draw(st.text(FUZZ_ALPHABET, max_size=5))
        if not lines:
            break
    try:
        parse_sass("\n".join(lines))
    except SassParseError:
        pass


def test_parse_errors_survive_pickling_across_processes() -> None:
    import pickle

    from runners.parsers.llo_to_bundles import LloParseError
    from runners.parsers.sass_to_kernels import SassParseError

    for error in (SassParseError("k.sass", 3, "bad line"), LloParseError("p.txt", 0, "empty input")):
        again = pickle.loads(pickle.dumps(error))
        assert (type(again), str(again), again.line, again.reason) == (type(error), str(error), error.line,
                                                                      error.reason)


def test_records_do_not_depend_on_the_hash_seed() -> None:
    """Fresh interpreters with different hash seeds read the same listings into the same records: nothing the
    parser decides may follow the iteration order of a set or dict of strings."""
    import os
    import subprocess
    import sys

    script = ("import json, sys\nfrom runners.parsers.by_kind import parse\n"
              "print(json.dumps([parse('sass', open(p, 'rb').read(), p) for p in sys.argv[1:]], sort_keys=True))")
    paths = [str(p) for p in sorted(FIXTURES.glob("*.sass"))]
    outputs = {seed: subprocess.run([sys.executable, "-c", script, *paths], env=dict(os.environ, PYTHONHASHSEED=seed),
                                    check=True, capture_output=True, text=True, timeout=60).stdout
               for seed in ("0", "1", "2", "3")}
    assert '"mix"' in outputs["0"] and len(set(outputs.values())) == 1


def test_a_real_h200_listing_of_an_xla_gemm() -> None:
    """``cuobjdump -sass`` of the cubin ptxas 13.0 made for sm_90a from the PTX XLA dumped on an H200 (jax 0.11.2)
    for a float32 attention's first matmul: XLA ran it as a TF32 warpgroup MMA (HGMMA ... .F32.TF32). Counts are
    checked against the listing's own lines, read here without the parser."""
    text = (FIXTURES / "h200_gemm_fusion_dot.sass").read_text()
    [kernel] = parse_sass(text, "h200_gemm_fusion_dot.sass")
    instructions = [line.split("*/", 1)[1].split(";", 1)[0].split() for line in text.splitlines()
                    if line.strip().startswith("/*") and line.strip()[2:6].isalnum() and ";" in line]
    opcodes = [words[1] if words[0].startswith("@") else words[0] for words in instructions]
    assert kernel.name == "gemm_fusion_dot" and kernel.arch == "sm_90a"
    assert kernel.instruction_count == len(opcodes) == 352
    assert kernel.mix["mma"] == sum(1 for op in opcodes if op.split(".")[0].endswith("MMA")) == 8
    assert sum(kernel.mix.values()) == kernel.instruction_count


def test_a_listing_of_an_object_without_kernels_is_empty_not_an_error() -> None:
    """XLA split a module's PTX into shards, one of them without an entry; cuobjdump lists its cubin as the arch
    line alone. Parser 1 refused it ("no 'Function :' block found")."""
    assert parse_sass((FIXTURES / "h200_no_kernels.sass").read_text(), "h200_no_kernels.sass") == []
