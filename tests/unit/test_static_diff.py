"""Static diffs are exact: identical records never change, and every kind of difference is named."""

from __future__ import annotations

import json
from dataclasses import replace

from service.detect.static_diff import (
    FusionInfo,
    HloModuleInfo,
    KernelInfo,
    StaticRecords,
    diff_static,
    spills_of,
)


def module(**overrides: object) -> HloModuleInfo:
    base = HloModuleInfo(name="jit_f", fingerprint="a" * 64, instructions=9,
                         opcodes={"add": 1, "multiply": 1, "fusion": 2, "parameter": 2},
                         fusions=(FusionInfo("fusion", "kLoop", 4), FusionInfo("reduce_fusion", "kInput", 3)))
    return replace(base, **overrides)  # type: ignore[arg-type]


def kernel(**overrides: object) -> KernelInfo:
    base = KernelInfo(name="fusion", isa="x86-64", instructions=66,
                      mix={"vector_fma": 16, "load": 22, "store": 17, "other": 11}, digest="d1")
    return replace(base, **overrides)  # type: ignore[arg-type]


def records(modules: tuple[HloModuleInfo, ...] | None = None,
            kernels: tuple[KernelInfo, ...] | None = None) -> StaticRecords:
    return StaticRecords(modules=modules if modules is not None else (module(),),
                         kernels=kernels if kernels is not None else (kernel(), kernel(name="reduce_fusion")))


def test_identical_records_are_unchanged() -> None:
    diff = diff_static(records(), records())
    assert diff.changed is False and not diff.modules and not diff.kernels
    assert diff.magnitude == 0.0
    data = diff.as_dict()
    assert data["changed"] is False and data["summary"] == "no static change"
    assert json.loads(json.dumps(data)) == data


def test_opcode_deltas_and_fusions_added_removed_changed() -> None:
    after = module(fingerprint="b" * 64, instructions=11, opcodes={"add": 1, "tanh": 2, "fusion": 2, "parameter": 2},
                   fusions=(FusionInfo("fusion", "kLoop", 6), FusionInfo("tanh_fusion", "kLoop", 2)))
    diff = diff_static(records(), records(modules=(after,)))
    [m] = diff.modules
    assert m.status == "changed"
    assert dict(m.opcodes) == {"multiply": -1, "tanh": 2}
    assert [f.name for f in m.fusions_added] == ["tanh_fusion"]
    assert [f.name for f in m.fusions_removed] == ["reduce_fusion"]
    assert [(c.name, c.instructions_before, c.instructions_after) for c in m.fusions_changed] == [("fusion", 4, 6)]
    data = diff.as_dict()["modules"][0]
    assert data["fingerprint"] == {"before": "a" * 64, "after": "b" * 64}
    assert data["instructions"] == {"before": 9, "after": 11, "delta": 2}
    assert data["fusions"]["changed"][0]["kind"] == {"before": "kLoop", "after": "kLoop"}
    assert diff.changed and "tanh" in diff.summary()


def test_a_fusion_kind_change_is_a_change() -> None:
    after = module(fusions=(FusionInfo("fusion", "kInput", 4), FusionInfo("reduce_fusion", "kInput", 3)))
    [m] = diff_static(records(), records(modules=(after,))).modules
    assert [(c.kind_before, c.kind_after) for c in m.fusions_changed] == [("kLoop", "kInput")]


def test_kernel_count_mix_and_spill_deltas() -> None:
    grown = kernel(instructions=70, mix={"vector_fma": 19, "load": 23, "store": 17, "other": 11}, spills=2,
                   digest="d2")
    diff = diff_static(records(), records(kernels=(grown, kernel(name="reduce_fusion"))))
    [k] = diff.kernels
    assert k.name == "fusion" and k.status == "changed"
    assert dict(k.mix) == {"vector_fma": 3, "load": 1}
    assert diff.measure == "kernel_instructions"
    assert (diff.value_before, diff.value_after) == (132.0, 136.0)
    assert diff.magnitude == 4 / 132 and diff.direction == "regression"
    data = diff.as_dict()
    assert data["kernels"][0]["spills"] == {"before": 0, "after": 2, "delta": 2}
    assert data["totals"]["spills"]["delta"] == 2
    assert diff.summary().startswith("fusion 66 → 70 instructions (+4)")


def test_same_bytes_counted_differently_are_no_change() -> None:
    # One commit's listing, 158 lines unchanged, classed load 26 / store 20 in one run and load 10 / store 36 in
    # another (a parser that followed the hash seed, or two parser versions): the same digest, so the same code.
    once = kernel(instructions=158, mix={"load": 26, "store": 20, "other": 112})
    again = kernel(instructions=158, mix={"load": 10, "store": 36, "other": 112})
    diff = diff_static(records(kernels=(once, kernel(name="reduce_fusion"))),
                       records(kernels=(again, kernel(name="reduce_fusion", instructions=70))))
    assert not diff.changed and not diff.kernels and diff.summary() == "no static change"
    assert (diff.value_before, diff.value_after) == (224.0, 224.0)  # the totals count the same code the same
    # a real change beside it is sized by itself alone
    grown = kernel(name="reduce_fusion", instructions=80, digest="d2")
    diff = diff_static(records(kernels=(once, kernel(name="reduce_fusion"))), records(kernels=(again, grown)))
    assert [k.name for k in diff.kernels] == ["reduce_fusion"] and not diff.kernels[0].mix
    assert (diff.value_before, diff.value_after) == (224.0, 238.0) and diff.direction == "regression"


def test_counts_unchanged_without_digests_are_no_change_and_any_count_change_is_one() -> None:
    sass = KernelInfo(name="gemm", isa="sass", instructions=23, mix={"mma": 4, "load_global": 2}, spills=1)
    same = StaticRecords(modules=None, kernels=(sass,))
    assert not diff_static(same, StaticRecords(modules=None, kernels=(replace(sass),))).changed
    for changed in (replace(sass, instructions=24), replace(sass, mix={"mma": 3, "load_global": 3}),
                    replace(sass, spills=2)):
        diff = diff_static(same, StaticRecords(modules=None, kernels=(changed,)))
        assert diff.changed and diff.kernels[0].status == "changed", changed


def test_other_bytes_with_every_count_equal_report_nothing_so_are_no_finding() -> None:
    # The digest moved but nothing a finding reports did (counts, spills, mix): a "+0.0 %" finding with no
    # change to show is what this rules out.
    diff = diff_static(records(), records(kernels=(kernel(digest="other"), kernel(name="reduce_fusion"))))
    assert not diff.changed and not diff.kernels
    mixed = kernel(digest="other", mix={"vector_fma": 15, "load": 23, "store": 17, "other": 11})
    diff = diff_static(records(), records(kernels=(mixed, kernel(name="reduce_fusion"))))
    assert diff.changed and dict(diff.kernels[0].mix) == {"vector_fma": -1, "load": 1}


def test_a_diff_names_the_metric_and_unit_it_measures() -> None:
    grown = kernel(instructions=70, digest="d2")
    diff = diff_static(records(), records(kernels=(grown, kernel(name="reduce_fusion"))))
    assert (diff.metric, diff.unit) == ("kernel_instructions", "instructions")
    tpu = KernelInfo(name="fusion", isa="tpu-llo", instructions=400, bundles=120)
    diff = diff_static(records(kernels=(tpu,)), records(kernels=(replace(tpu, bundles=121),)))
    assert (diff.metric, diff.unit) == ("kernel_bundles", "bundles")
    diff = diff_static(records(), StaticRecords(modules=(module(fingerprint="z" * 64),), kernels=None))
    assert (diff.metric, diff.unit) == ("hlo_instructions", "instructions")


def test_kernels_added_and_removed_and_shrinking_code_is_an_improvement() -> None:
    diff = diff_static(records(), records(kernels=(kernel(name="fusion.2", instructions=30, digest="d2"),)))
    assert [(k.name, k.status) for k in diff.kernels] == [("fusion", "removed"), ("fusion.2", "added"),
                                                          ("reduce_fusion", "removed")]
    assert diff.direction == "improvement" and diff.magnitude < 0


def test_bundles_size_the_code_where_there_are_bundles() -> None:
    tpu = KernelInfo(name="fusion", isa="tpu-llo", instructions=400, bundles=120, mix={"mxu": 10, "vpu": 50})
    more = replace(tpu, bundles=150, instructions=390, mix={"mxu": 10, "vpu": 40}, spills=3)
    diff = diff_static(records(kernels=(tpu,)), records(kernels=(more,)))
    assert diff.measure == "bundles" and (diff.value_before, diff.value_after) == (120.0, 150.0)
    assert diff.direction == "regression" and diff.magnitude == 0.25
    assert dict(diff.kernels[0].mix) == {"vpu": -10}


def test_an_unknown_layer_is_not_compared() -> None:
    unparsed = StaticRecords(modules=(module(fingerprint="z" * 64, instructions=10),), kernels=None)
    diff = diff_static(records(), unparsed)
    assert not diff.compared_kernels and not diff.kernels  # not "every kernel removed"
    assert diff.compared_hlo and diff.changed and diff.measure == "hlo_instructions"


def test_module_added_and_removed() -> None:
    diff = diff_static(records(), records(modules=(module(name="jit_g"),)))
    assert [(m.name, m.status) for m in diff.modules] == [("jit_f", "removed"), ("jit_g", "added")]


def test_spills_of_each_parser_spelling() -> None:
    assert spills_of({"spill_loads": 8, "spill_stores": 12}) == 20  # SASS
    assert spills_of({"spills": {"vector_spill_stores": 2, "scalar_spill_loads": 1}}) == 3  # LLO
    assert spills_of({"code_sha256": "x", "vector_width_bits": 256}) == 0  # x86


def test_one_kernel_whose_symbol_moved_between_identical_fusions_is_no_change() -> None:
    """XLA CPU emits one kernel for identical fusions and names it after one of them; a reorder that renumbered
    them moved the symbol (the same bytes), and read as one kernel removed and another added, a +0.0 % finding."""
    twins = (FusionInfo("wrapped_convert", "kLoop", 2, "c" * 64), FusionInfo("wrapped_convert.1", "kLoop", 2, "c" * 64))
    convert = kernel(name="wrapped_convert", instructions=93, digest="same-bytes")
    before = records(modules=(module(fusions=twins),), kernels=(kernel(), convert))
    after = records(modules=(module(fusions=twins),), kernels=(kernel(), replace(convert, name="wrapped_convert.1")))
    diff = diff_static(before, after)
    assert not diff.changed and not diff.kernels and diff.magnitude == 0.0
    # Other bytes under the moved symbol are a change still: removed and added, as before.
    other = replace(convert, name="wrapped_convert.1", digest="other-bytes", instructions=95)
    diff = diff_static(before, records(modules=(module(fusions=twins),), kernels=(kernel(), other)))
    assert [(k.name, k.status) for k in diff.kernels] == [("wrapped_convert", "removed"),
                                                          ("wrapped_convert.1", "added")]


def test_code_that_changed_at_the_same_size_is_looked_at_not_filed_as_an_improvement() -> None:
    same_size = kernel(mix={"vector_fma": 15, "load": 23, "store": 17, "other": 11}, digest="d3")
    diff = diff_static(records(), records(kernels=(same_size, kernel(name="reduce_fusion"))))
    assert diff.changed and diff.magnitude == 0.0 and diff.direction == "regression"


def test_a_module_whose_fingerprint_alone_differs_is_listed_and_no_finding() -> None:
    """A reorder of the source that left every fusion the same computation moved the order XLA printed the module
    in: its canonical text, so its fingerprint, differs and nothing a finding reports does."""
    diff = diff_static(records(), records(modules=(module(fingerprint="z" * 64),)))
    assert [m.name for m in diff.modules] == ["jit_f"] and not diff.changed
    diff = diff_static(records(), records(modules=(module(fingerprint="z" * 64, opcodes={"add": 2}),)))
    assert diff.changed  # an opcode moved: a change
