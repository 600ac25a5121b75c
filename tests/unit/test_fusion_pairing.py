"""Fusions paired by what they compute: hand-written HLO in which XLA's numbering moved, through the real parser
(which fingerprints each fused computation) and the pure pairing."""

from __future__ import annotations

from runners.parsers.hlo_text_to_module import parse_hlo_text
from service.detect.attribution import OpRecord, OpTable, Side, attribute
from service.detect.fusion_pairing import FusionShape, pair_fusions, source_text
from service.detect.static_diff import FusionInfo, HloModuleInfo, KernelInfo, StaticRecords, diff_static

ADD = """%fused_computation{n} (param_0.{n}: f32[64]) -> f32[64] {{
  %param_0.{n} = f32[64]{{0}} parameter(0)
  %constant.{n} = f32[] constant(1)
  %broadcast.{n} = f32[64]{{0}} broadcast(%constant.{n}), dimensions={{}}
  ROOT %add.{n} = f32[64]{{0}} add(%param_0.{n}, %broadcast.{n})
}}
"""
MUL = """%fused_computation{n} (param_0.{n}: f32[64]) -> f32[64] {{
  %param_0.{n} = f32[64]{{0}} parameter(0)
  ROOT %multiply.{n} = f32[64]{{0}} multiply(%param_0.{n}, %param_0.{n})
}}
"""
TANH = """%fused_computation{n} (param_0.{n}: f32[64]) -> f32[64] {{
  %param_0.{n} = f32[64]{{0}} parameter(0)
  %tanh.{n} = f32[64]{{0}} tanh(%param_0.{n})
  ROOT %multiply.{n} = f32[64]{{0}} multiply(%tanh.{n}, %tanh.{n})
}}
"""


def module(computations: list[tuple[str, str, str]]) -> str:
    """(fusion name, body template, computation suffix), called in order on the parameter, in one module."""
    bodies = "".join(body.format(n=suffix) for _, body, suffix in computations)
    calls = "".join(f"  %{name} = f32[64]{{0}} fusion(%p), kind=kLoop, calls=%fused_computation{suffix}\n"
                    for name, _, suffix in computations)
    names = ", ".join(f"%{name}" for name, _, _ in computations)
    shape = ", ".join("f32[64]" for _ in computations)
    return (f"HloModule jit_f\n\n{bodies}ENTRY %main (p: f32[64]) -> ({shape}) {{\n"
            f"  %p = f32[64]{{0}} parameter(0)\n{calls}  ROOT %t = ({shape}) tuple({names})\n}}\n")


def shapes(text: str) -> list[FusionShape]:
    [m] = parse_hlo_text(text)
    return [FusionShape(m.name, f.name, f.fingerprint, f.kind, f.instruction_count, f.op_name,
                        source_text({"file": f.source.file, "line": f.source.line}) if f.source else None)
            for f in m.fusions]


def statuses(base: str, head: str) -> dict[tuple[str | None, str | None], str]:
    pairing = pair_fusions(shapes(base), shapes(head))
    return {(p.base_name, p.head_name): p.status for p in pairing.pairs}


def test_a_fingerprint_ignores_names_and_numbering() -> None:
    [a] = shapes(module([("fusion.3", ADD, ".3")]))
    [b] = shapes(module([("fusion.7", ADD, ".12")]))
    [c] = shapes(module([("fusion.3", MUL, ".3")]))
    assert a.fingerprint == b.fingerprint and a.fingerprint != c.fingerprint


def test_renumbered_fusions_with_identical_bodies_pair_as_renamed() -> None:
    base = module([("fusion.3", ADD, ".3"), ("fusion.4", MUL, ".4")])
    head = module([("fusion.7", ADD, ".9"), ("fusion.8", MUL, ".1")])
    assert statuses(base, head) == {("fusion.3", "fusion.7"): "renamed", ("fusion.4", "fusion.8"): "renamed"}


def test_a_new_fusion_that_took_an_old_number_is_new_and_the_old_one_is_renamed() -> None:
    base = module([("fusion.3", ADD, ""), ("fusion.4", MUL, ".1")])
    head = module([("fusion.3", TANH, ""), ("fusion.4", ADD, ".1"), ("fusion.5", MUL, ".2")])
    assert statuses(base, head) == {("fusion.3", "fusion.4"): "renamed", ("fusion.4", "fusion.5"): "renamed",
                                    (None, "fusion.3"): "added"}


def test_a_changed_body_under_its_name_is_changed() -> None:
    base = module([("fusion.3", ADD, ""), ("fusion.4", MUL, ".1")])
    head = module([("fusion.3", ADD, ""), ("fusion.4", TANH, ".1")])
    assert statuses(base, head) == {("fusion.3", "fusion.3"): "same", ("fusion.4", "fusion.4"): "changed"}


def test_identical_candidates_are_told_apart_by_source_line_then_name() -> None:
    def f(name: str, source: str | None, fp: str = "x") -> FusionShape:
        return FusionShape("m", name, fp, "kCustom", 3, "jit(f)/dot_general", source)

    base = [f("ynn_fusion", "k.py:6")]
    head = [f("ynn_fusion", "k.py:8"), f("ynn_fusion.1", "k.py:6")]
    pairing = pair_fusions(base, head)
    assert {(p.base_name, p.head_name): p.status for p in pairing.pairs} == {
        ("ynn_fusion", "ynn_fusion.1"): "renamed", (None, "ynn_fusion"): "added"}
    assert pairing.base_to_head() == {"ynn_fusion": "ynn_fusion.1"}
    # deterministic without sources: the names' order
    again = pair_fusions([f("a.2", None), f("a.1", None)], [f("a.4", None), f("a.3", None)])
    assert [(p.base_name, p.head_name) for p in again.pairs] == [("a.1", "a.3"), ("a.2", "a.4")]


def test_a_renumbered_and_changed_fusion_pairs_by_source_line() -> None:
    base = [FusionShape("m", "fusion.2", "a", "kLoop", 4, "jit(f)/add", "k.py:9")]
    head = [FusionShape("m", "fusion.5", "b", "kLoop", 6, "jit(f)/add", "k.py:9"),
            FusionShape("m", "fusion.2", "c", "kLoop", 6, "jit(f)/mul", "k.py:3")]
    got = {(p.base_name, p.head_name): p.status for p in pair_fusions(base, head).pairs}
    assert got == {("fusion.2", "fusion.5"): "changed", (None, "fusion.2"): "added"}


def test_a_renamed_and_changed_fusion_pairs_by_its_site_when_lines_above_it_moved() -> None:
    """multiply_add_fusion became add_add_fusion one line down (a line inserted above it, its computation changed):
    paired as changed by kind, op, file and function, where that site is one fusion's on each side. It read as one
    fusion removed and another added, and the finding's Diff page opened at a kernel 'every line deleted'."""
    step = "softmax.<locals>.step"
    base = [FusionShape("m", "multiply_add_fusion", "a", "kLoop", 8, "jit(s)/while/body/add", "k.py:26", step),
            FusionShape("m", "exp_fusion", "e", "kLoop", 3, "jit(s)/exp", "k.py:12", "softmax")]
    head = [FusionShape("m", "add_add_fusion", "b", "kLoop", 13, "jit(s)/while/body/add", "k.py:27", step),
            FusionShape("m", "exp_fusion", "e", "kLoop", 3, "jit(s)/exp", "k.py:12", "softmax")]
    got = {(p.base_name, p.head_name): p.status for p in pair_fusions(base, head).pairs}
    assert got == {("multiply_add_fusion", "add_add_fusion"): "changed", ("exp_fusion", "exp_fusion"): "same"}
    # Two fusions of that site on the head: which one is the base's is a guess, so neither is paired.
    twice = [*head, FusionShape("m", "add_fusion.3", "c", "kLoop", 5, "jit(s)/while/body/add", "k.py:29", step)]
    got = {(p.base_name, p.head_name): p.status for p in pair_fusions(base, twice).pairs}
    assert got[("multiply_add_fusion", None)] == "removed" and got[(None, "add_add_fusion")] == "added"
    # Another result shape at that site: another computation (a scale-and-shift that fused away, a sum of dots
    # that appeared), not one renumbered; records that name no shape pair as before.
    shaped_b = [FusionShape("m", "broadcast_add_fusion", "a", "kLoop", 8, "jit(f)/add", "k.py:20", "f",
                            "f32[512,512]{1,0}")]
    shaped_h = [FusionShape("m", "add_add_fusion", "b", "kLoop", 4, "jit(f)/add", "k.py:31", "f", "f32[512,256]{1,0}")]
    assert {p.status for p in pair_fusions(shaped_b, shaped_h).pairs} == {"removed", "added"}
    same_shape = [FusionShape("m", "add_add_fusion", "b", "kLoop", 4, "jit(f)/add", "k.py:31", "f",
                              "f32[512,512]{1,0}")]
    assert {p.status for p in pair_fusions(shaped_b, same_shape).pairs} == {"changed"}
    # Without a function (records that do not name one) nothing pairs on a moved line.
    bare = [FusionShape("m", "add_add_fusion", "b", "kLoop", 13, "jit(s)/while/body/add", "k.py:27")]
    assert {p.status for p in pair_fusions(base[:1], bare).pairs} == {"removed", "added"}


def test_records_without_fingerprints_pair_by_name_and_say_so() -> None:
    [p] = pair_fusions([FusionShape("m", "fusion.1", None, "kLoop", 3)],
                       [FusionShape("m", "fusion.1", None, "kLoop", 3)]).pairs
    assert p.status == "same" and not p.structural and not p.unchanged


def _side(names_fps: list[tuple[str, str]], times: dict[str, float], code: dict[str, int]) -> Side:
    fusions = tuple(FusionInfo(n, "kLoop", 3, fp, "jit(f)/op", None) for n, fp in names_fps)
    return Side(OpTable([OpRecord("jit_f", n, "loop_fusion", 10, t) for n, t in times.items()], calls=10),
                StaticRecords((HloModuleInfo("jit_f", "f" * 64, 9, {"fusion": len(fusions)}, fusions),),
                              tuple(KernelInfo(n, "x86-64", i, digest=f"{n}-{i}") for n, i in code.items())))


def test_attribution_joins_renumbered_ops_and_leads_with_what_changed() -> None:
    # base: fusion.1 = A (10 µs), fusion.2 = B (20 µs). head: a new C took fusion.1; A is fusion.2, B fusion.3.
    # A and B are unchanged in HLO and code; B's time wobbled up a little, C is new.
    before = _side([("fusion.1", "A"), ("fusion.2", "B")], {"fusion.1": 100_000.0, "fusion.2": 200_000.0},
                   {"fusion.1": 10, "fusion.2": 20})
    after = _side([("fusion.1", "C"), ("fusion.2", "A"), ("fusion.3", "B")],
                  {"fusion.1": 300_000.0, "fusion.2": 100_000.0, "fusion.3": 240_000.0},
                  {"fusion.1": 30, "fusion.2": 10, "fusion.3": 20})
    # the kernels' digests follow the computation, as the real code bytes would
    after = Side(after.ops, StaticRecords(after.static.modules if after.static else None, (
        KernelInfo("fusion.1", "x86-64", 30, digest="C"), KernelInfo("fusion.2", "x86-64", 10, digest="fusion.1-10"),
        KernelInfo("fusion.3", "x86-64", 20, digest="fusion.2-20"))))
    result = attribute(before, after, direction=None, wall_ns_per_call=(30_000.0, 60_000.0))
    rows = {r["op"]: r for r in result["ops"]["rows"]}
    assert rows["fusion.2"]["base_op"] == "fusion.1" and rows["fusion.2"]["structure"] == "renamed"
    assert rows["fusion.2"]["status"] == "unchanged"
    assert rows["fusion.3"]["base_op"] == "fusion.2" and rows["fusion.3"]["self_ns_per_call"]["delta"] == 4_000.0
    assert rows["fusion.1"]["status"] == "appeared" and rows["fusion.1"]["structure"] == "added"
    assert not any(r["status"] == "vanished" for r in result["ops"]["rows"])
    assert result["summary"].startswith("fusion.1 appeared")
    [kernel] = result["static"]["kernels"]  # only the new kernel: the renumbered ones kept their code
    assert kernel["name"] == "fusion.1" and kernel["status"] == "added"
    assert result["fusions"][0]["name"] == "fusion.1"
    rec = result["ops"]["reconciliation"]
    assert rec["op_self_ns_delta"] == 34_000.0 and abs(rec["explained_share"] - 34 / 30) < 1e-9
    assert "explains >100 %" in rec["note"]


def test_an_op_table_far_from_the_time_per_call_gives_no_share_of_the_change() -> None:
    """On a CPU host a softmax's ops summed 8.8 ms a call over threads against a 3.0 ms median: the share of the
    time change the table 'explained' (57 %) compared a sum over threads with a wall time."""
    from service.detect.attribution import reconcile

    apart = reconcile(6.0e6, (3.03e6, 13.5e6), (8.83e6, 14.8e6))
    assert apart is not None and apart["explained_share"] is None
    assert "2.9x the base's time per call" in apart["note"] and "which ops moved" in apart["note"]
    near = reconcile(6.0e6, (3.0e6, 9.0e6), (3.3e6, 9.6e6))  # within COMPARABLE on both sides: a share
    assert near is not None and near["explained_share"] == 1.0 and "explains 100%" in near["note"]


def test_the_summary_does_not_lead_with_an_unchanged_fusion() -> None:
    before = _side([("fusion.1", "A"), ("fusion.2", "B")], {"fusion.1": 100_000.0, "fusion.2": 200_000.0},
                   {"fusion.1": 10, "fusion.2": 20})
    after = _side([("fusion.1", "A"), ("fusion.2", "B2")], {"fusion.1": 200_000.0, "fusion.2": 250_000.0},
                  {"fusion.1": 10, "fusion.2": 24})
    after = Side(after.ops, StaticRecords(after.static.modules if after.static else None, (
        KernelInfo("fusion.1", "x86-64", 10, digest="fusion.1-10"), KernelInfo("fusion.2", "x86-64", 24))))
    result = attribute(before, after, direction="regression")  # type: ignore[arg-type]
    assert result["ops"]["rows"][0]["op"] == "fusion.1"  # it moved most, but computes what it did
    assert result["summary"].startswith("fusion.2 self time +25%")
    assert result["fusions"][0]["name"] == "fusion.2" and result["fusions"][0]["structure"] == "changed"


def test_the_static_diff_does_not_report_a_renumbering() -> None:
    base = StaticRecords((HloModuleInfo("m", "f" * 64, 6, {}, (FusionInfo("fusion.1", "kLoop", 3, "A"),)),),
                         (KernelInfo("fusion.1", "x86-64", 10, digest="d"),))
    head = StaticRecords((HloModuleInfo("m", "f" * 64, 6, {}, (FusionInfo("fusion.4", "kLoop", 3, "A"),)),),
                         (KernelInfo("fusion.4", "x86-64", 10, digest="d"),))
    diff = diff_static(base, head)
    assert not diff.changed and diff.pairing is not None
    assert [(p.base_name, p.head_name, p.status) for p in diff.pairing.pairs] == [("fusion.1", "fusion.4", "renamed")]


def test_a_source_is_read_relative_to_the_commits_checkout() -> None:
    sha = "2eafce8026c1326b4256e34646ed73728a614a88"
    assert source_text({"file": f"/tmp/w/repo/{sha}/kernels/tiny.py", "line": 11}) == "kernels/tiny.py:11"
    assert source_text({"file": "/home/me/k.py", "line": 3}) == "/home/me/k.py:3"
    assert source_text({"file": "k.py"}) is None and source_text(None) is None


def test_a_name_is_reused_where_the_other_side_gives_it_to_another_computation() -> None:
    """The head's new fusion takes the name the base gave a fusion the head renumbered: the added one's name is
    another computation's on the base side (the Diff page says so beside it); a name only renumbered is not."""
    base = module([("fusion.3", ADD, ""), ("fusion.4", MUL, ".1")])
    taken = module([("fusion.3", TANH, ""), ("fusion.4", ADD, ".1"), ("fusion.5", MUL, ".2")])
    assert pair_fusions(shapes(base), shapes(taken)).reused_names() == {"fusion.3"}
    # A base fusion gone whose name a head fusion of another computation (renumbered) took.
    gone = module([("fusion.5", MUL, "")])
    assert pair_fusions(shapes(module([("fusion.5", ADD, ""), ("fusion.6", MUL, ".1")])),
                        shapes(gone)).reused_names() == {"fusion.5"}
    renumbered = module([("fusion.7", ADD, ".9"), ("fusion.8", MUL, ".1")])
    assert pair_fusions(shapes(base), shapes(renumbered)).reused_names() == set()
