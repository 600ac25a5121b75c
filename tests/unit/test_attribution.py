"""Attribution on hand-built records: the op that grew ranks first, ops that appear or vanish are marked, per-call
normalisation makes unequal call counts comparable, and the changed kernel's code diff is counted and capped."""

from __future__ import annotations

import json
from collections.abc import Sequence

from service.detect.attribution import (
    AttributionParams,
    OpRecord,
    OpTable,
    Side,
    SideName,
    attribute,
    format_ns,
    mnemonic,
    normalise_line,
    op_rows,
    text_diff,
)
from service.detect.static_diff import FusionInfo, HloModuleInfo, KernelInfo, StaticRecords

FMA = "vfmadd231ps ymm0, ymm1, ymm2"


def op(name: str, self_ns: float, occurrences: int = 10, module: str = "jit_f", category: str = "loop_fusion"
       ) -> OpRecord:
    return OpRecord(module=module, op=name, category=category, occurrences=occurrences, self_ns=self_ns,
                    total_ns=self_ns)


def static(fusion3_instructions: int = 40, fma: int = 8, with_gone: bool = True) -> StaticRecords:
    fusions = [FusionInfo("fusion.3", "kLoop", 5), FusionInfo("fusion.1", "kLoop", 3)]
    if with_gone:
        fusions.append(FusionInfo("gone_fusion", "kLoop", 2))
    kernels = [KernelInfo("fusion.3", "x86-64", fusion3_instructions, mix={"vector_fma": fma, "load": 10,
                                                                            "other": fusion3_instructions - fma - 10},
                          digest=f"d{fusion3_instructions}"),
               KernelInfo("fusion.1", "x86-64", 20, mix={"load": 5, "other": 15}, digest="f1")]
    return StaticRecords(modules=(HloModuleInfo("jit_f", "a" * 64 if with_gone else "b" * 64, 12,
                                                {"fusion": len(fusions)}, tuple(fusions)),), kernels=tuple(kernels))


def disassembly(extra_fma: int) -> dict[SideName, dict[str, list[str]]]:
    base = ["0x0000  push rbp", "0x0001  vmovups ymm1, ymmword ptr [rax]"]
    return {
        "before": {"fusion.3": [*base, *[f"0x{16 + i:04x}  {FMA}" for i in range(8)], "0x0030  ret"],
                   "fusion.1": ["0x0000  ret"]},
        "after": {"fusion.3": [*base, *[f"0x{16 + i:04x}  {FMA}" for i in range(8 + extra_fma)], "0x0040  ret"],
                  "fusion.1": ["0x0000  ret"]},
    }


def provider(texts: dict[SideName, dict[str, list[str]]]):  # type: ignore[no-untyped-def]
    def get(side: SideName, isa: str, name: str) -> Sequence[str] | None:
        return texts[side].get(name)
    return get


def before_side() -> Side:
    # 10 calls: fusion.3 takes 29.3 µs a call, fusion.1 5 µs, gone_fusion 2 µs.
    return Side(OpTable([op("fusion.3", 293_000.0), op("fusion.1", 50_000.0), op("gone_fusion", 20_000.0)], calls=10),
                static())


def after_side() -> Side:
    # 20 calls: fusion.3 takes 41.3 µs a call (+12 µs, +41 %), fusion.1 4 µs, a new op 1 µs.
    return Side(OpTable([op("fusion.3", 826_000.0, 20), op("fusion.1", 80_000.0, 20),
                         op("new_fusion", 20_000.0, 20)], calls=20),
                static(fusion3_instructions=43, fma=11, with_gone=False))


def test_the_fusion_whose_self_time_grew_ranks_first_and_is_explained() -> None:
    result = attribute(before_side(), after_side(), "regression", provider(disassembly(3)))
    assert json.loads(json.dumps(result)) == result
    rows = result["ops"]["rows"]
    assert [r["op"] for r in rows] == ["fusion.3", "new_fusion", "fusion.1", "gone_fusion"]
    top = rows[0]
    assert top["status"] == "grown" and top["rank"] == 1
    assert top["self_ns_per_call"] == {"before": 29_300.0, "after": 41_300.0, "delta": 12_000.0}
    assert round(top["relative"], 3) == 0.410
    assert top["occurrences_per_call"]["delta"] == 0.0  # 10 in 10 calls, 20 in 20 calls: once a call
    assert result["ops"]["calls"] == {"before": 10, "after": 20} and not result["ops"]["calls_estimated"]
    assert result["summary"] == "fusion.3 self time +41% (+12.0 µs/call); 3 more vfmadd231ps"

    [fusion3, *others] = result["fusions"]
    assert fusion3["name"] == "fusion.3" and "self time grew" in fusion3["reasons"]
    assert "code changed" in fusion3["reasons"]
    [code] = fusion3["kernels"]
    assert code["status"] == "changed" and code["instructions"]["delta"] == 3
    assert code["mix"] == {"vector_fma": 3} and code["mnemonics"] == {"vfmadd231ps": 3}
    diff = code["text_diff"]
    assert not diff["truncated"] and diff["lines"].count(f"+{FMA}") == 3
    assert not any(line.startswith(("-0x", "+0x", " 0x")) for line in diff["lines"])  # addresses stripped
    # new_fusion appeared: it moved, but it has neither code nor HLO to explain, so it has no fusion entry
    assert "new_fusion" not in {f["name"] for f in others}


def test_ops_that_appeared_or_vanished_are_marked() -> None:
    rows = {r["op"]: r for r in attribute(before_side(), after_side(), "regression")["ops"]["rows"]}
    assert rows["new_fusion"]["status"] == "appeared"
    assert rows["new_fusion"]["self_ns_per_call"] == {"before": None, "after": 1_000.0, "delta": 1_000.0}
    assert rows["gone_fusion"]["status"] == "vanished"
    assert rows["gone_fusion"]["self_ns_per_call"]["delta"] == -2_000.0
    assert rows["fusion.1"]["status"] == "shrunk"


def test_an_improvement_ranks_what_shrank_first() -> None:
    result = attribute(after_side(), before_side(), "improvement")
    assert result["ops"]["rows"][0]["op"] == "fusion.3"
    assert result["ops"]["rows"][0]["self_ns_per_call"]["delta"] == -12_000.0
    assert result["summary"].startswith("fusion.3 self time -29% (-12.0 µs/call)")


def test_per_call_normalisation_when_the_calls_differ() -> None:
    before = OpTable([op("fusion", 100_000.0, occurrences=10)], calls=10)
    after = OpTable([op("fusion", 300_000.0, occurrences=30)], calls=30)  # three times the calls, same speed
    ops = op_rows(before, after, "regression")
    assert ops is not None and ops["rows"][0]["self_ns_per_call"]["delta"] == 0.0
    assert ops["rows"][0]["status"] == "unchanged"


def test_calls_are_estimated_from_the_occurrences_when_unknown() -> None:
    # Most ops ran 5 times (5 calls); the loop body ran 40 times, 8 per call.
    ops = [op("a", 5_000.0, 5), op("b", 5_000.0, 5), op("body", 40_000.0, 40)]
    table = op_rows(OpTable(ops), OpTable(ops), None)
    assert table is not None and table["calls_estimated"] and table["calls"] == {"before": 5, "after": 5}
    body = next(r for r in table["rows"] if r["op"] == "body")
    assert body["occurrences_per_call"]["after"] == 8.0 and body["self_ns_per_call"]["after"] == 8_000.0


def test_a_grown_fusion_whose_code_did_not_change_has_no_text_diff() -> None:
    same = static()
    before = Side(OpTable([op("fusion.3", 100_000.0)], calls=10), same)
    after = Side(OpTable([op("fusion.3", 150_000.0)], calls=10), same)
    result = attribute(before, after, "regression", provider(disassembly(0)))
    [entry] = result["fusions"]
    assert entry["reasons"] == ["self time grew"]
    assert entry["kernels"][0]["status"] == "unchanged" and entry["kernels"][0]["text_diff"] is None
    assert result["static"]["changed"] is False
    assert result["summary"] == "fusion.3 self time +50% (+5.0 µs/call)"


def test_identical_records_attribute_nothing() -> None:
    result = attribute(before_side(), before_side(), "regression")
    assert result["static"]["changed"] is False and result["fusions"] == []
    assert result["summary"] == "no op moved and no static change"


def test_without_op_tables_the_static_diff_speaks() -> None:
    result = attribute(Side(static=static()), Side(static=static(fusion3_instructions=43, fma=11)), "regression",
                       provider(disassembly(3)))
    assert result["ops"] is None
    assert result["fusions"][0]["name"] == "fusion.3"
    assert result["summary"] == "fusion.3: 3 more vfmadd231ps"
    static_first = attribute(Side(static=static()), Side(static=static(fusion3_instructions=43, fma=11)),
                             "regression", provider(disassembly(3)), static_first=True)
    assert static_first["summary"].startswith("fusion.3 40 → 43 instructions (+3)")
    assert static_first["summary"].endswith("; 3 more vfmadd231ps")
    assert attribute(Side(), Side())["summary"] == "no op table or static change to attribute"


def test_text_diff_is_capped_with_a_clear_marker() -> None:
    params = AttributionParams(max_diff_lines=10, max_line_chars=30)
    before = [f"0x{i:04x}  vaddps ymm{i % 16}, ymm1, ymm2" for i in range(100)]
    after = [f"0x{i:04x}  vmulps ymm{i % 16}, ymm1, ymm2 ; a long trailing comment" for i in range(100)]
    diff = text_diff(before, after, params)
    assert diff["truncated"] and diff["omitted_lines"] == 203 - 10
    assert len(diff["lines"]) == 11 and diff["lines"][-1] == "... truncated: 193 more diff lines"
    assert all(len(line) <= 30 for line in diff["lines"][:-1])
    clipped = text_diff(before, after, AttributionParams(max_input_lines=5))
    assert clipped["truncated"] and "only the first 5 instructions" in clipped["lines"][-1]


def test_lines_are_normalised_for_x86_and_sass() -> None:
    assert normalise_line("0x0047  vfmadd132ps ymm2, ymm1, ymm0") == "vfmadd132ps ymm2, ymm1, ymm0"
    assert normalise_line("  4004d6:\tpush   rbp") == "push rbp"
    sass = "        /*0040*/               @P0 EXIT ;                      /* 0x000000000000094d */"
    assert normalise_line(sass) == "@P0 EXIT"
    assert mnemonic(sass) == "EXIT" and mnemonic("0x0010  add rax, 1") == "add"
    assert mnemonic("/*0060*/ LDG.E.128.CONSTANT R4, [R2.64] ;") == "LDG.E.128.CONSTANT"


def test_format_ns_picks_a_readable_unit() -> None:
    assert format_ns(850.0) == "850.0 ns"
    assert format_ns(12_034.0, signed=True) == "+12.0 µs"
    assert format_ns(-3.2e6, signed=True) == "-3.2 ms"
    assert format_ns(2.5e9) == "2.5 s"


def test_kernels_not_parsed_on_one_side_are_unknown_not_unchanged() -> None:
    unparsed = StaticRecords(modules=static().modules, kernels=None)
    before = Side(OpTable([op("fusion.3", 100_000.0)], calls=10), static())
    after = Side(OpTable([op("fusion.3", 150_000.0)], calls=10), unparsed)
    result = attribute(before, after, "regression", provider(disassembly(3)))
    [entry] = result["fusions"]
    assert [k["status"] for k in entry["kernels"]] == ["unknown"] and entry["kernels"][0]["text_diff"] is None
    assert result["static"]["compared"] == {"hlo": True, "kernels": False}


def test_other_ops_pair_by_structure_and_an_unchanged_one_never_leads_the_summary() -> None:
    """A sort XLA renumbered (sort.0 → sort.1, a new sort.0 before it) joins its own op; an identical dot whose time
    moved more than the fusion that changed is not what the summary names."""
    def side(fusion_fp: str, ops: tuple[FusionInfo, ...], table: list[OpRecord]) -> Side:
        module = HloModuleInfo("jit_f", fusion_fp * 64, 12, {"fusion": 1},
                               (FusionInfo("fusion.1", "kLoop", 3, fusion_fp * 64, "jit(f)/add", "k.py:3"),), ops)
        return Side(OpTable(table, calls=10), StaticRecords(modules=(module,), kernels=None))

    dot = FusionInfo("dot_general.1", "dot", 0, "d" * 64, "jit(f)/dot_general", "k.py:5")
    before = side("a", (dot, FusionInfo("sort.0", "sort", 0, "s" * 64, "jit(f)/sort", "k.py:7")),
                  [op("dot_general.1", 100_000.0, category="dot"), op("sort.0", 50_000.0, category="sort"),
                   op("fusion.1", 20_000.0)])
    after = side("b", (dot, FusionInfo("sort.0", "sort", 0, "t" * 64, "jit(f)/sort", "k.py:6"),
                       FusionInfo("sort.1", "sort", 0, "s" * 64, "jit(f)/sort", "k.py:7")),
                 [op("dot_general.1", 400_000.0, category="dot"), op("sort.0", 30_000.0, category="sort"),
                  op("sort.1", 51_000.0, category="sort"), op("fusion.1", 90_000.0)])
    result = attribute(before, after, "regression")
    rows = {r["op"]: r for r in result["ops"]["rows"]}
    assert rows["sort.1"]["base_op"] == "sort.0" and rows["sort.1"]["structure"] == "renamed"
    assert rows["sort.0"]["status"] == "appeared" and rows["sort.0"]["structure"] == "added"
    assert rows["dot_general.1"]["structure"] == "same" and rows["dot_general.1"]["rank"] == 1
    assert result["summary"].startswith("fusion.1 "), result["summary"]
    assert [(p["base"], p["head"]) for p in result["static"]["op_pairing"]["renamed"]] == [("sort.0", "sort.1")]
    # records parsed before the other ops were stored (ops None on a side): they join by name, as before
    old = Side(before.ops, StaticRecords(modules=(HloModuleInfo("jit_f", "a" * 64, 12, {"fusion": 1},
                                                                before.static.modules[0].fusions),),  # type: ignore[union-attr]
                                         kernels=None))
    by_name = attribute(old, after, "regression")
    assert by_name["static"]["op_pairing"] is None
    assert {r["op"]: r for r in by_name["ops"]["rows"]}["sort.0"]["status"] != "appeared"
