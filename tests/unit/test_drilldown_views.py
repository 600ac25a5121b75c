"""The pure parts of the drill-down pages: highlighting (safe by construction), the slot-column layout of LLO
bundles, loop marking, the HLO text slicing, the roofline point and the number formats."""

from __future__ import annotations

import math

import pytest
from markupsafe import Markup

from service.store.hlo_text import fusion_texts, module_lines
from service.store.listings import (
    branch_target,
    llo_listing,
    mark_loops,
    sass_labels,
    sass_listing,
    slot_cells,
    slot_columns,
)
from tests.conftest import REPO_ROOT
from web.charts.drilldown import (
    RooflinePeaks,
    attainable,
    mix_segments,
    roofline_figure,
    roofline_point,
)
from web.highlight import highlight_hlo
from web.units import class_colour, format_ns, format_seconds, format_share, format_si

FIXTURES = REPO_ROOT / "tests" / "fixtures"

HLO = """HloModule jit_f, entry_computation_layout={(f32[8]{0})->f32[8]{0}}

%fused_computation (param_0: f32[8]) -> f32[8] {
  %param_0 = f32[8]{0} parameter(0)
  ROOT %exp.1 = f32[8]{0} exponential(%param_0), metadata={op_name="jit(f)/exp"}
}

ENTRY %main.3 (x.1: f32[8]) -> f32[8] {
  %x.1 = f32[8]{0} parameter(0)
  ROOT %exp_fusion = f32[8]{0} fusion(%x.1), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(f)/exp"}
}

HloModule jit_g

ENTRY %main (p: f32[]) -> f32[] {
  ROOT %p = f32[] parameter(0)
}
"""


def test_highlighting_wraps_opcodes_shapes_and_names() -> None:
    html = str(highlight_hlo('  ROOT %exp.1 = f32[8,16]{1,0} exponential(%param_0), metadata={op_name="x"}'))
    assert '<span class="hl-kw">ROOT</span>' in html
    assert '<span class="hl-name">%exp.1</span>' in html
    assert '<span class="hl-shape">f32[8,16]{1,0}</span>' in html
    assert '<span class="hl-op">exponential</span>' in html
    assert '<span class="hl-meta">metadata={op_name=&#34;x&#34;}</span>' in html


@pytest.mark.parametrize("hostile", [
    '<script>alert(1)</script>', '"><img src=x onerror=alert(1)>', "exp(<b>)", "%<i>x</i> = f32[1]{0} add(",
    'metadata={op_name="</span><script>"}',
])
def test_highlighting_escapes_every_piece_of_untrusted_text(hostile: str) -> None:
    html = highlight_hlo(f"  %a = f32[1]{{0}} add({hostile}), metadata={{op_name=\"{hostile}\"}}")
    assert isinstance(html, Markup)
    text = str(html)
    # Only our own span tags are markup; the hostile text survives as text, all of it.
    assert "<script" not in text and "<img" not in text and "<b>" not in text and "<i>" not in text
    stripped = text.replace("</span>", "")
    for cls in ("hl-kw", "hl-name", "hl-shape", "hl-op", "hl-meta", "hl-attr"):
        stripped = stripped.replace(f'<span class="{cls}">', "")
    assert "<" not in stripped
    assert Markup(stripped).unescape().count(hostile) == 2


def test_slot_columns_keep_the_canonical_order_and_drop_unused_families() -> None:
    mix = {"scalar": 3, "vector_alu": 0, "mxu_matmul": 2, "branch": 1, "other": 0}
    assert slot_columns(mix) == ("scalar", "mxu_matmul", "branch")
    assert slot_columns({"scalar": 1, "zzz_new": 2}) == ("scalar", "zzz_new")


def test_slot_cells_put_each_op_in_its_family_column_and_leave_empty_slots_empty() -> None:
    columns = ("scalar", "vector_load", "mxu_matmul", "other")
    cells = slot_cells([("scalar", "s1 = sadd s0, 1"), ("mxu_matmul", "vmatmul v1"), ("scalar", "s2 = smov 0"),
                        ("eup", "vexp v2")], columns)
    assert cells == (("s1 = sadd s0, 1", "s2 = smov 0"), (), ("vmatmul v1",), ("vexp v2",))


def test_llo_fixture_lays_bundles_out_by_slot_and_marks_both_loops() -> None:
    name = "synthetic_form_a-final_bundles.txt"
    text = (FIXTURES / "llo" / name).read_text()
    listing = llo_listing(text, name, "synthetic_form_a")
    assert listing is not None and listing.total_rows == len(listing.rows) == 12
    assert [(lp.start, lp.end, lp.rows) for lp in listing.loops] == [(16, 18, 3), (19, 23, 5)]
    by_address = {r.address: r for r in listing.rows}
    row = by_address[17]
    cells = dict(zip(listing.columns, row.slots, strict=True))
    assert cells["mxu_matmul"] == ("(mrf0) = vmatmul.8x128.bf16 v12",) and cells["vector_store"] == ()
    assert row.loop_depth == 1 and by_address[16].loop_head and by_address[18].loop_back
    assert by_address[14].loop_depth == 0
    assert all(not any(r.slots) for r in listing.rows if r.address == 24)  # the empty bundle: every slot empty
    assert llo_listing(text, name, "no_such_program") is None


def test_x86_and_sass_loops_are_backward_branches() -> None:
    assert mark_loops([0, 4, 8], [8, None, 99]) == []  # forward, and out of the kernel: no loop
    loops = mark_loops([0, 4, 8, 12, 16], [None, None, 4, 0, 99])
    assert [(lp.start, lp.end, lp.rows) for lp in loops] == [(0, 12, 4), (4, 8, 2)]  # outer loop first
    assert branch_target("0x1a2") == 0x1A2 and branch_target("qword ptr [rip + 0x10]") is None
    assert branch_target("`(.L_x_0)") is None and branch_target("rax") is None


def test_sass_fixture_loops_resolve_labels_and_skip_the_trap_after_exit() -> None:
    name = "synthetic_sm80_sm90a.sass"
    text = (FIXTURES / "sass" / name).read_text()
    assert sass_labels(".L_x_0:\n        /*0050*/   NOP ;\n") == {".L_x_0": 0x50}
    gemm = sass_listing(text, name, "_Z11gemm_kernelPK6__halfS1_Pfi")
    assert gemm is not None and gemm.loops == []  # `BRA 0x160` at 0x160 is padding after EXIT
    spill = sass_listing(text, name, "_Z12spill_kernelPfi")
    assert spill is not None and [(lp.start, lp.end) for lp in spill.loops] == [(0x20, 0x80)]
    wgmma = sass_listing(text, name, "_ZN4cute14wgmma_mainloopILi128EEEvPK13__nv_bfloat16Pf")
    assert wgmma is not None and [(lp.start, lp.end) for lp in wgmma.loops] == [(0x50, 0x60)]
    row = next(r for r in wgmma.rows if r.address == 0x60)
    assert row.predicate == "@!P1" and row.opcode == "BRA" and row.cls == "branch" and row.loop_back


def test_hlo_text_is_cut_into_modules_and_fusion_bodies() -> None:
    modules = module_lines(HLO)
    assert list(modules) == ["jit_f", "jit_g"]
    assert modules["jit_f"][0].number == 1 and modules["jit_g"][0].text == "HloModule jit_g"
    fusions = fusion_texts(modules["jit_f"])
    assert list(fusions) == ["exp_fusion"]
    fusion = fusions["exp_fusion"]
    assert fusion.computation == "fused_computation" and fusion.call.number == 10
    assert [line.number for line in fusion.body] == [3, 4, 5, 6] and fusion.body[-1].text == "}"
    assert fusion_texts(modules["jit_g"]) == {}


def test_roofline_point_needs_flops_bytes_and_a_time() -> None:
    point = roofline_point(2e9, 1e9, 0.5)
    assert point is not None
    assert (point.intensity, point.flops_per_s, point.bytes_per_s) == (2.0, 4e9, 2e9)
    assert roofline_point(None, 1e9, 1.0) is None and roofline_point(1e9, 0, 1.0) is None
    assert roofline_point(1e9, 1e9, None) is None and roofline_point(1e9, 1e9, -1.0) is None


def test_the_roof_is_bandwidth_bound_below_the_ridge_and_compute_bound_above() -> None:
    peaks = RooflinePeaks(flops_per_s=100e12, bytes_per_s=1e12)
    assert peaks.ridge == 100
    assert attainable(peaks, 10) == 10e12 and attainable(peaks, 1000) == 100e12
    point = roofline_point(2e9, 1e9, 0.5)
    assert point is not None
    with_roof = roofline_figure(point, peaks, "tpu v5e")
    assert [t["name"] for t in with_roof["data"]] == ["roof", "this result"]
    assert "0.2% of the roof" in with_roof["layout"]["title"]["text"]  # 4 GFLOP/s of a 2 TFLOP/s roof at I=2
    unknown = roofline_figure(point, None, "cpu")
    assert [t["name"] for t in unknown["data"]] == ["this result"]
    assert "peak figures unknown" in unknown["layout"]["title"]["text"]
    low, high = unknown["layout"]["xaxis"]["range"]
    assert low < math.log10(2.0) < high


def test_numbers_read_with_units() -> None:
    assert format_ns(19850981.0) == "19.9 ms" and format_ns(11397.0) == "11.4 µs" and format_ns(850) == "850 ns"
    assert format_seconds(2.5) == "2.5 s" and format_seconds(None) == "–"
    assert format_si(16777216.0, "FLOP") == "16.8 MFLOP" and format_si(512, "B") == "512 B"
    assert format_share(0.9071) == "90.7%" and format_share(0.0004) == "<0.1%"


def test_mix_segments_and_colours_are_stable() -> None:
    segments = mix_segments({"load": 8, "vector_mul": 32, "gather": 0, "store": 8})
    assert [(s.name, s.count) for s in segments] == [("vector_mul", 32), ("load", 8), ("store", 8)]
    assert math.isclose(sum(s.share for s in segments), 1.0)
    assert class_colour("load") == class_colour("load") and class_colour("brand_new").startswith("#")
    assert mix_segments({}) == []
