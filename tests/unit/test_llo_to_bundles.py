"""TPU LLO listings → program records: hand-checked synthetic fixtures (forms A and B, bundle_util JSON), generated
listings whose counts the generator knows, and hostile input that must end in LloParseError, quickly."""

from __future__ import annotations

import json
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers.llo_to_bundles import (
    FAMILIES,
    MAX_LINE_CHARS,
    SPILL_KINDS,
    LloParseError,
    LloProgram,
    SlotUsage,
    family,
    parse_bundle_util_file,
    parse_bundle_util_json,
    parse_llo,
    parse_llo_file,
    program_name_from_path,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llo"


def nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {name: count for name, count in counts.items() if count}


# --- hand-checked fixtures -----------------------------------------------------------------------------------------


def test_form_a_counts_by_hand() -> None:
    (program,) = parse_llo_file(FIXTURES / "synthetic_form_a-final_bundles.txt")
    assert (program.name, program.form, program.bundle_count, program.op_count) == ("synthetic_form_a", "A", 12, 26)
    # bundles 14..25: smov sld | dma sadd | 2 vmatpush | sadd vld vmatmul vpop(mrf0) | sbr vadd vst | vxpose vexp scmp
    # | vpop(trf0) vpop(erf0) vst.spill | vld.spill vmatmul(mrf1) | vpop(mrf1) vmax sst.spill | sbr.abs | {} | halt
    assert nonzero(program.ops_per_family) == {
        "scalar": 6, "vector_alu": 2, "vector_load": 2, "vector_store": 2, "mxu_push": 2, "mxu_matmul": 2,
        "mxu_pop": 2, "xlu": 2, "eup": 2, "dma": 1, "branch": 3,
    }
    assert set(program.ops_per_family) == set(FAMILIES)
    assert program.mxu_units == ("mxu0", "mxu1")
    assert program.ops_per_bundle == {0: 1, 1: 2, 2: 4, 3: 4, 4: 1}
    assert program.mxu_bundle_share == pytest.approx(4 / 12)  # bundles 16, 17, 21, 22
    # 18: sbr.rel $-2 → 16 (relative to its own bundle); 23: sbr.abs $19 → 19
    assert [(loop.start, loop.end, loop.bundle_count) for loop in program.loops] == [(16, 18, 3), (19, 23, 5)]
    assert program.spills == {"vector_spill_stores": 1, "vector_spill_loads": 1, "scalar_spill_stores": 1,
                              "scalar_spill_loads": 0}


def test_form_a_bundle_and_op_records() -> None:
    (program,) = parse_llo_file(FIXTURES / "synthetic_form_a-final_bundles.txt")
    bundle = program.bundles[3]
    assert (bundle.address, bundle.line, bundle.form) == (17, 6, "A")
    assert bundle.text.startswith("17 : {s4 = sadd.s32 s4, 1;")
    matmul = bundle.ops[2]
    assert (matmul.dest, matmul.opcode, matmul.operands, matmul.family, matmul.mxu) == (
        "(mrf0)", "vmatmul.8x128.bf16", "v12", "mxu_matmul", "mxu0")
    branch = program.bundles[4].ops[0]
    assert (branch.dest, branch.opcode, branch.operands, branch.target) == ("(pc)", "sbr.rel", "@p1 $-2", 16)
    store = program.bundles[4].ops[2]
    assert (store.dest, store.family, store.spill) == ("[vmem:$0x1600]", "vector_store", None)
    assert program.bundles[10].ops == ()


def test_form_b_two_programs_by_hand() -> None:
    first, second = parse_llo_file(FIXTURES / "synthetic_form_b-final_bundles.txt")
    assert (first.name, first.form, first.bundle_count, first.op_count) == ("fusion.7", "B", 10, 20)
    assert nonzero(first.ops_per_family) == {
        "scalar": 4, "vector_alu": 1, "vector_load": 3, "vector_store": 1, "mxu_push": 1, "mxu_matmul": 1,
        "mxu_pop": 1, "xlu": 1, "eup": 2, "dma": 3, "branch": 2,
    }
    assert first.mxu_units == ("mxu1",) and first.mxu_bundle_share == pytest.approx(0.3)
    assert first.ops_per_bundle == {1: 2, 2: 6, 3: 2}
    assert [(loop.start, loop.end, loop.bundle_count) for loop in first.loops] == [(3, 6, 4)]
    # vst to / vld from #allocation1, whose tag says 'spill slot'
    assert nonzero(first.spills) == {"vector_spill_stores": 1, "vector_spill_loads": 1}
    assert len(first.operands) == 2 and first.operands[0].startswith("%s0 = inlined_call_operand.hbm")
    assert set(first.allocations) == {"allocation0", "allocation1"} and first.ignored_lines == 0
    assert first.bundles[0].text.splitlines()[1].strip().startswith("%3 = dma.hbm_to_vmem")
    assert first.bundles[2].ops[1].opcode == "vmatpush.bf16.msra.mxu1"

    assert (second.name, second.bundle_count, second.op_count, second.mxu_units) == ("fusion.8", 5, 6, ())
    assert nonzero(second.ops_per_family) == {"vector_load": 1, "xlu": 2, "vector_store": 1, "branch": 2}
    assert [(loop.start, loop.end, loop.bundle_count) for loop in second.loops] == [(1, 3, 3)]
    assert nonzero(second.spills) == {} and second.mxu_bundle_share == 0.0


def test_bundle_util_json_gives_the_same_record_shape_with_what_it_knows() -> None:
    (util,) = parse_bundle_util_file(FIXTURES / "synthetic_bundle_util.json")
    assert (util.name, util.form, util.bundle_count, util.op_count, util.mxu_bundle_share) == (
        "fusion.7", "bundle_util", 10, None, None)
    assert util.slot_usage["mxu"] == SlotUsage(3, 20) and util.slot_usage["scalar_alu"] == SlotUsage(4, 20)
    (listing, _) = parse_llo_file(FIXTURES / "synthetic_form_b-final_bundles.txt")
    # the synthetic JSON describes the same program as the form B listing: the counts both know agree
    assert util.ops_per_family == {key: listing.ops_per_family[key] for key in util.ops_per_family}
    assert set(util.ops_per_family) == {"scalar", "vector_alu", "vector_load", "vector_store", "eup"}
    assert util.spills == listing.spills and util.bundle_count == listing.bundle_count
    assert listing.slot_usage == {} and isinstance(util, LloProgram)


def test_bundle_util_list_and_names() -> None:
    text = json.dumps([{"total_bundles": 3, "mxu_used": 1, "mxu_avail": 2}, {"name": "b", "total_bundles": 0}])
    first, second = parse_bundle_util_json(text, program="mod")
    assert (first.name, first.bundle_count, first.slot_usage) == ("mod#0", 3, {"mxu": SlotUsage(1, 2)})
    assert (second.name, second.ops_per_family, second.spills) == ("b", {}, {})


@pytest.mark.parametrize(("text", "words"), [
    ("", "empty"), ("[]", "empty bundle_util list"), ('{"mxu_used": 1}', "total_bundles"),
    ('{"total_bundles": -1}', "non-negative"), ('{"total_bundles": true}', "non-negative"),
    ('{"total_bundles": 4, "mxu_used": 5, "mxu_avail": 4}', "5 used of 4"), ("[1]", "not a JSON object"),
    ('{"total_bundles": 4,', "not JSON"), ("[" * 100_000 + "]" * 100_000, "JSON"),
    ('{"total_bundles": ' + "9" * 5000 + "}", "JSON"),
])
def test_bad_bundle_util_json_is_a_typed_error(text: str, words: str) -> None:
    with pytest.raises(LloParseError, match=words):
        parse_bundle_util_json(text, source="util.json")


@pytest.mark.parametrize(("opcode", "text", "expected"), [
    ("sadd.s32", "", "scalar"), ("smul.u32", "", "scalar"), ("scmp.lt.s32", "", "scalar"), ("sld", "", "scalar"),
    ("vadd.f32", "", "vector_alu"), ("vsel", "", "vector_alu"), ("vmax.f32", "", "vector_alu"),
    ("vld.8x128", "", "vector_load"), ("vst.msk", "", "vector_store"), ("vmatpush.bf16.mxu0", "", "mxu_push"),
    ("vmatmul.bf16.msra.mxu1", "", "mxu_matmul"), ("vpop.f32.mrf.mxu1", "", "mxu_pop"),
    ("vpop", "(mrf2)", "mxu_pop"), ("vpop", "(trf0)", "xlu"), ("vpop.f32.erf", "", "eup"), ("vpop", "v1", "other"),
    ("vxpose.b32", "", "xlu"), ("vrot.slane", "", "xlu"), ("vperm", "", "xlu"), ("vxlane_reduce", "", "xlu"),
    ("vpow2.f32", "", "eup"), ("vexp", "", "eup"), ("vrcp", "", "eup"), ("vtanh", "", "eup"), ("vlog", "", "eup"),
    ("dma.hbm_to_vmem", "", "dma"), ("dma.done.wait", "", "dma"), ("sbr.rel", "", "branch"), ("br", "", "branch"),
    ("halt", "", "branch"), ("shalt", "", "branch"), ("vsyncpa", "", "other"),
    ("inlined_call_operand.hbm", "", "other"),
])
def test_family_table(opcode: str, text: str, expected: str) -> None:
    assert family(opcode, text) == expected


def test_names_from_paths_and_headers() -> None:
    assert program_name_from_path("/d/1777396851540540302-fusion.3-final_bundles.txt") == "fusion.3"
    assert program_name_from_path("loop_add.txt") == "loop_add"
    assert parse_llo("0 : {halt}", source="x/123-my_prog-final_bundles.txt")[0].name == "my_prog"
    assert parse_llo("0 : {halt}", program="given")[0].name == "given"
    assert parse_llo("$region0: #{hdr}\n0 : {halt}", program="given")[0].name == "hdr"


def test_tolerated_layouts() -> None:
    text = (
        "0x10 : {\n"
        "  %1 = vadd.f32 %v1, %v2 ;; %2 = vmul.f32 %v1, %v2  // two ops on one line\n"
        "  /* a comment line */\n"
        "  %s3 = inlined_call_operand.hbm [shape: f32[8,128]{1,0}, index: 0, kind: input, shape index: {}]\n"
        "}\n"
        "0x11 LB: > { %4 = sbr.rel target = $region3 }\n"
        "0x12 : { %5 = sbr.rel (%p0) $0x0 }\n"  # unsigned with .rel: relative 0, the bundle itself
        "something the parser does not know\n"
        "/* a comment running on\n"  # outside bundles: ignored text, not an error
    )
    (program,) = parse_llo(text)
    assert program.bundle_count == 3 and program.op_count == 5 and program.ignored_lines == 2
    assert program.bundles[1].marker == "LB" and program.bundles[1].ops[0].target is None
    assert [(loop.start, loop.end, loop.bundle_count) for loop in program.loops] == [(0x12, 0x12, 1)]


# --- hostile input -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "line", "words"), [
    ("", 1, "empty"),
    ("\n \n", 1, "empty"),
    ("0 : {halt}\n1 : {\x00}\n", 2, "control byte"),
    ("0 : {halt}\n1 : {sadd s1, 1\n", 2, "never closed"),
    ("0x0 : { %1 = vadd %a, %b\n0x1 : { %2 = halt }\n", 2, "do not nest"),
    ("0 : { vadd { x } }\n", 1, "do not nest"),
    ("0 : { %1 = vadd " + "[" * 40 + " }\n", 1, "nested deeper"),
    ("0 : { %1 = vadd [a }\n", 1, "mismatched"),
    ("0x0 : { %1 = vadd [a\n  b] }\n", 1, "cannot span lines"),
    ("0 : { %1 = vadd a] }\n", 1, "unbalanced"),
    ("0 : { 42 }\n", 1, "not an LLO op"),
    ("0 : { %1 = }\n", 1, "not an LLO op"),
    ("0 : { = vadd }\n", 1, "without a destination"),
    ("0 : { %1 = Vadd x }\n", 1, "not an LLO op"),
    ("0 : { vadd, x }\n", 1, "not an LLO op"),
    ("0 : { vadd /* x }\n", 1, "unterminated"),
    ("0 : { vadd x */ }\n", 1, "'*/' without"),
    ("0 : { halt } trailing\n", 1, "after a bundle"),
    ("0 : { halt } /* open\n", 1, "unterminated"),
    ("3 : {halt}\n2 : {halt}\n", 2, "does not increase"),
    ("17 sadd s1, 1\n", 1, "malformed bundle header"),
    ("just words\n", 0, "no bundles"),
    ("$region0: #{a}\n$region0: #{b}\n0 : {halt}\n", 2, "no bundles before b"),
])
def test_malformed_input_is_a_typed_error_naming_source_and_line(text: str, line: int, words: str) -> None:
    with pytest.raises(LloParseError) as caught:
        parse_llo(text, source="bad.txt")
    assert (caught.value.source, caught.value.line) == ("bad.txt", line)
    assert str(caught.value).startswith(f"bad.txt:{line}: ") and words in str(caught.value)


def test_an_over_long_line_is_refused_before_any_regex_and_fast() -> None:
    text = "0 : { vadd " + "(" * MAX_LINE_CHARS + " }\n"
    started = time.perf_counter()
    with pytest.raises(LloParseError, match="exceeds") as caught:
        parse_llo(text)
    assert caught.value.line == 1 and time.perf_counter() - started < 0.5


@pytest.mark.parametrize("filler", [" ", "0", "[]", "$", "/**/", ";", "%a,", "=", "$region0: #{", "#a [", "\t:"])
def test_pathological_lines_just_under_the_limit_end_quickly(filler: str) -> None:
    body = (filler * (MAX_LINE_CHARS // len(filler)))[: MAX_LINE_CHARS - 40]
    for text in (body, "0" + body, "0 : {" + body, "0 : { %1 = sbr.rel " + body + " }", "0x0 : {\n" + body):
        started = time.perf_counter()
        try:
            parse_llo(text + "\n1 : {halt}\n")
        except LloParseError:
            pass
        assert time.perf_counter() - started < 1.5, (filler, text[:30])


def test_file_reading_is_capped_and_needs_utf8(tmp_path: Path) -> None:
    path = tmp_path / "p-final_bundles.txt"
    path.write_text("0 : {halt}\n")
    assert parse_llo_file(path)[0].name == "p"
    with pytest.raises(LloParseError, match="larger than 4 bytes") as caught:
        parse_llo_file(path, max_bytes=4)
    assert caught.value.line == 0 and caught.value.source == str(path)
    path.write_bytes(b"0 : {halt}\n\xc3\x28\n")
    with pytest.raises(LloParseError, match="UTF-8") as caught:
        parse_llo_file(path)
    assert caught.value.line == 2


# --- generated listings: the parser recovers every count the generator wrote ----------------------------------------

GENERATED_OPS = {
    "scalar": ["%s{n} = sadd.s32 %s1, 4", "s{n} = smul.u32 s2, s3", "%p{n} = scmp.lt.s32 %s4, 64", "s{n} = smov 0",
               "%s{n} = sshll.u32 %s0, 4", "sld [smem:$0x10]"],
    "vector_alu": ["%v{n} = vadd.f32 %v1, %v2", "v{n} = vmul.8x128.f32 v1, v2", "%v{n} = vmax.f32 %v3, 0.0",
                   "v{n} = vsel vm0, v1, v2", "%v{n} = vcmp.gt.f32 %v1, %v2"],
    "vector_load": ["%v{n} = vld [vmem:[%s12] sm:$0xff]", "v{n} = vld.8x128 [vmem:$0x1200]",
                    "%v{n} = vld [vmem:[#allocation1] sm:$0xff]"],
    "vector_store": ["%{n} = vst [vmem:[#allocation1] sm:$0xff] %v3", "[vmem:$0x1600] = vst.8x128 v{n}",
                     "vst.msk [vmem:[%s2] sm:$0x0f] %v{n}"],
    "xlu": ["%v{n} = vxpose.xlu0.b32 %v1", "v{n} = vrot.slane v1, 3", "%v{n} = vperm %v2, %v3",
            "%v{n} = vpop.trf.xlu0", "v{n} = vpop (trf1)"],
    "eup": ["%v{n} = vexp.f32 %v1", "v{n} = vrcp.f32 v2", "%v{n} = vtanh.f32 %v1", "v{n} = vpow2 v1",
            "%v{n} = vpop.f32.erf"],
    "dma": ["%{n} = dma.hbm_to_vmem [thread:$0]  /*hbm=*/%s10, /*size_in_granules=*/128, /*vmem=*/%s12",
            "%{n} = dma.done.wait [#allocation0], 128", "dma.vmem_to_hbm %s1, 256, %s2"],
    "other": ["%{n} = vsyncpa [#allocation0], 0", "%{n} = vdelay 4", "%{n} = xla_tuple %v1, %v2",
              "%s{n} = inlined_call_operand.hbm [shape: bf16[128,128], index: 0, kind: input, shape index: {}]"],
}
MXU_OPS = {  # (family, template with {u} the unit)
    "mxu_push": ["%{n} = vmatpush.bf16.msra.mxu{u} %v1", "(mxu{u}) = vmatpush.bf16 v{n}"],
    "mxu_matmul": ["%{n} = vmatmul.bf16.msra.mxu{u} %v40", "(mrf{u}) = vmatmul.8x128.bf16 v{n}"],
    "mxu_pop": ["%v{n} = vpop.f32.mrf.mxu{u}", "v{n} = vpop.8x128 (mrf{u})"],
}
SPILL_OPS = {
    "vector_spill_stores": ["%{n} = vst [vmem:[#allocation9] sm:$0xff] %v1", "[vmem:$0x1f00] = vst.spill v{n}"],
    "vector_spill_loads": ["%v{n} = vld [vmem:[#allocation9] sm:$0xff]", "v{n} = vld.spill [vmem:$0x1f00]"],
    "scalar_spill_stores": ["sst.spill [smem:$0x40], s{n}"],
    "scalar_spill_loads": ["s{n} = sld [smem:[#allocation9]]"],
}
SPILL_FAMILY = {"vector_spill_stores": "vector_store", "vector_spill_loads": "vector_load",
                "scalar_spill_stores": "scalar", "scalar_spill_loads": "scalar"}
PLAIN = [(name, text) for name, texts in GENERATED_OPS.items() for text in texts]
MXU = [(name, text) for name, texts in MXU_OPS.items() for text in texts]
SPILLS = [(name, text) for name, texts in SPILL_OPS.items() for text in texts]
OUTSIDE = [
    ("#allocation9 [shape = 'f32[8,128]{1,0}', space=vmem, size = 0x1000, scoped, tag = 'spill slot']", 0),
    ("  #allocation1 [shape = 'u8[4096]{0}', space=vmem, size = 0x1000, scoped, tag = 'operand span']", 0),
    ("  %s0 = inlined_call_operand.hbm [shape: bf16[128,128], index: 0, kind: input]", 0),
    ("  $region4: #{fusion} parent=0", 0), ("// comment", 0), ("  /* comment */", 0), ("", 0),
    ("  %7 = xla_tuple %v1, %v2", 1), ("scheduling done", 1),
]
# an op: (kind, index, unit); kind "plain" | "mxu" | "spill" | "branch_back" | "branch_fwd" | "halt"
OP = st.tuples(st.sampled_from(["plain"] * 6 + ["mxu"] * 2 + ["spill", "branch_back", "branch_fwd", "halt"]),
               st.integers(0, 99), st.integers(0, 3))


@dataclass
class Expected:
    name: str
    families: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAMILIES, 0))
    spills: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPILL_KINDS, 0))
    histogram: dict[int, int] = field(default_factory=dict)
    units: set[str] = field(default_factory=set)
    mxu_bundles: int = 0
    loops: set[tuple[int, int]] = field(default_factory=set)
    addresses: list[int] = field(default_factory=list)
    multi_line: bool = False
    ignored: int = 0


def render_op(kind: str, index: int, unit: int, address: int, earlier: list[int], want: Expected) -> str:
    if kind == "plain":
        name, text = PLAIN[index % len(PLAIN)]
        want.families[name] += 1
        return text.replace("{n}", str(index))
    if kind == "mxu":
        name, text = MXU[index % len(MXU)]
        want.families[name] += 1
        want.units.add(f"mxu{unit}")
        return text.replace("{n}", str(index)).replace("{u}", str(unit))
    if kind == "spill":
        name, text = SPILLS[index % len(SPILLS)]
        want.families[SPILL_FAMILY[name]] += 1
        want.spills[name] += 1
        return text.replace("{n}", str(index))
    want.families["branch"] += 1
    if kind == "halt":
        return ["halt", f"%{index} = shalt", "(pc) = sbr.rel target = $region2"][index % 3]
    if kind == "branch_fwd":
        return [f"(pc) = sbr.rel @p1 $+{unit + 1}", f"%{index} = sbr.rel (%p0) ${unit + 1}",
                f"sbr.abs ${address + unit + 1}"][index % 3]
    target = earlier[index % len(earlier)]
    want.loops.add((target, address))
    return [f"(pc) = sbr.rel @p1 $-{address - target}", f"%{index} = sbr.rel (%p5) $-{address - target}",
            f"%{index} = sbr.abs (%p0) ${target:#x}", f"br ${target}"][index % 4]


@st.composite
def program_lines(draw: st.DrawFn, want: Expected, header: bool) -> list[str]:
    lines = [f"$region0: #{{{want.name}}}"] if header else []
    lines.append("  #allocation9 [shape = 'f32[8,128]{1,0}', space=vmem, size = 0x1000, scoped, tag = 'spill slot']")
    hexadecimal = draw(st.booleans())
    address = draw(st.integers(0, 40))
    bundles = draw(st.lists(st.tuples(st.lists(OP, max_size=6), st.integers(0, 4), st.integers(1, 3),
                                      st.integers(0, 3 * len(OUTSIDE) - 1)), min_size=1, max_size=16))
    for ops, layout, step, outside in bundles:
        if outside < len(OUTSIDE):
            lines.append(OUTSIDE[outside][0])
            want.ignored += OUTSIDE[outside][1]
        want.addresses.append(address)
        texts = [render_op(kind, index, unit, address, want.addresses, want) for kind, index, unit in ops]
        want.histogram[len(texts)] = want.histogram.get(len(texts), 0) + 1
        want.mxu_bundles += any(kind == "mxu" for kind, _, _ in ops)
        head = f"{address:#x}" if hexadecimal else str(address)
        if layout <= 1 or not texts:  # form A: one line
            lines.append(f"{head} : {{{(';  ' if layout else ';; ').join(texts)}}}")
            address += step
            continue
        want.multi_line |= layout >= 3 or len(texts) > 1
        if layout == 2:  # form B: first op on the header line, '}' after the last
            lines += [f"{head} : {{ {texts[0]}"] + [f"        {text}" for text in texts[1:]]
            lines[-1] += " }"
        else:  # form B with '{' and '}' on lines of their own, a comment inside
            lines += [f"{head} : {{"] + [f"    {text}" for text in texts] + ["    // end", "  }  /* done */"]
        address += step
    return lines


@st.composite
def listings(draw: st.DrawFn) -> tuple[str, list[Expected], bool]:
    wants: list[Expected] = []
    lines: list[str] = []
    first_header = draw(st.booleans())
    for index in range(draw(st.integers(1, 3))):
        want = Expected(f"fusion.{index}" if index or first_header else "given")
        lines += draw(program_lines(want, header=bool(index) or first_header))
        wants.append(want)
    return "\n".join(lines) + "\n", wants, first_header


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(listings())
def test_generated_listings_are_recovered_exactly(case: tuple[str, list[Expected], bool]) -> None:
    text, wants, _ = case
    programs = parse_llo(text, source="generated", program="given")
    assert [p.name for p in programs] == [w.name for w in wants]
    for program, want in zip(programs, wants, strict=True):
        assert [b.address for b in program.bundles] == want.addresses
        assert program.ops_per_family == want.families and program.spills == want.spills
        assert program.op_count == sum(want.families.values())
        assert program.ops_per_bundle == dict(sorted(want.histogram.items()))
        assert program.mxu_units == tuple(sorted(want.units))
        assert program.mxu_bundle_share == pytest.approx(want.mxu_bundles / len(want.addresses))
        expected_loops = [(start, end, bisect_right(want.addresses, end) - bisect_left(want.addresses, start))
                          for start, end in sorted(want.loops)]
        assert [(loop.start, loop.end, loop.bundle_count) for loop in program.loops] == expected_loops
        assert program.form == ("B" if want.multi_line else "A")
        assert program.ignored_lines == want.ignored


# --- fuzz: anything in, only LloParseError out ----------------------------------------------------------------------

FUZZ_ALPHABET = st.sampled_from(list("0x12af :{};[]()%=$-+/*#vsld.mxu_pop@\n\t ") + ["\x00", "é"])
FUZZ_TOKENS = st.lists(st.sampled_from(["$region0: #{a}", "0x1 : {", "}", "vadd.f32 %v1, %v2", "/*", "*/", "\n",
                                        "[vmem:$0x10]", "sbr.rel $-1", "#allocation1 [spill]", ";", "="]),
                       max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.text(FUZZ_ALPHABET, max_size=300), FUZZ_TOKENS))
def test_random_text_raises_only_the_typed_error(text: str) -> None:
    for parse in (parse_llo, parse_bundle_util_json):
        try:
            parse(text)
        except LloParseError as error:
            assert error.line >= 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(listings(), st.data())
def test_mutated_listings_raise_only_the_typed_error(case: tuple[str, list[Expected], bool],
                                                     data: st.DataObject) -> None:
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
        parse_llo("\n".join(lines))
    except LloParseError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(["total_bundles", "mxu_used", "mxu_avail", "spills", "x_used", "name"]),
                        inner, max_size=4), max_leaves=12))
def test_random_json_raises_only_the_typed_error(document: object) -> None:
    try:
        parse_bundle_util_json(json.dumps(document))
    except LloParseError:
        pass


def test_records_do_not_depend_on_the_hash_seed() -> None:
    """Fresh interpreters with different hash seeds read the same listings into the same records: nothing the
    parser decides may follow the iteration order of a set or dict of strings."""
    import os
    import subprocess
    import sys

    script = ("import json, sys\nfrom runners.parsers.by_kind import parse\n"
              "print(json.dumps([parse('llo', open(p, 'rb').read(), p) for p in sys.argv[1:]], sort_keys=True))")
    paths = [str(FIXTURES / "synthetic_form_a-final_bundles.txt"), str(FIXTURES / "synthetic_form_b-final_bundles.txt")]
    outputs = {seed: subprocess.run([sys.executable, "-c", script, *paths], env=dict(os.environ, PYTHONHASHSEED=seed),
                                    check=True, capture_output=True, text=True, timeout=60).stdout
               for seed in ("0", "1", "2", "3")}
    assert '"bundles"' in outputs["0"] and len(set(outputs.values())) == 1
