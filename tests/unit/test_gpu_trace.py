"""Real GPU traces: three profiler traces KernelWatch's harness took on an NVIDIA H200 (jax 0.11.2, CUDA 13), kept in
tests/fixtures/xplane_gpu. A raw GPU trace has no "XLA Modules" line: its device plane holds CUPTI's kernels, one
line per stream, each with the correlation id of the host call that launched it. Each trace is of a traced pass
of ten calls; before parser 2 every benchmark on that GPU failed on "no 'XLA Modules' line"."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from jax.profiler import ProfileData

from runners.parsers.xplane_to_execution_times import _stats, per_call, xplane_to_executions

FIXTURES = Path(__file__).parent.parent / "fixtures" / "xplane_gpu"
CALLS = 10  # the traced pass's calls, one per sample of the run that took the trace


def profile(name: str) -> ProfileData:
    return ProfileData.from_serialized_xspace(gzip.decompress((FIXTURES / f"{name}.xplane.pb.gz").read_bytes()))


def device_events(data: ProfileData) -> list[tuple[float, float, dict[str, object]]]:
    (device,) = [p for p in data.planes if p.name == "/device:GPU:0"]
    return sorted((float(e.start_ns), float(e.start_ns + e.duration_ns), _stats(e)) for line in device.lines
                  for e in line.events)


@pytest.mark.parametrize("name, kernels_per_call", [
    ("h200_matmul_bf16_512", 2),  # a gemm fusion and a reduction, each launched on its own
    ("h200_layernorm_unfused", 15),  # a command buffer: one graph launch, 15 kernels under one correlation id
    ("h200_topp_bisect", 140),  # a while loop: a command buffer, then the loop body's kernels round after round
])
def test_each_call_is_the_span_of_the_kernels_it_launched(name: str, kernels_per_call: int) -> None:
    data = profile(name)
    events = device_events(data)
    assert len(events) == CALLS * kernels_per_call
    executions = xplane_to_executions(data)
    assert executions.source == "device" and len(executions.seconds) == CALLS
    per = per_call(executions.seconds, CALLS)
    # A reference walk: the calls ran one after another (the harness blocks on each), so the device events fall
    # into ten consecutive groups of equal size, each spanning from its first start to its last end.
    groups = [events[i * kernels_per_call:(i + 1) * kernels_per_call] for i in range(CALLS)]
    expected = [(max(end for _, end, _ in g) - min(start for start, _, _ in g)) / 1e9 for g in groups]
    assert per == pytest.approx(expected, rel=1e-9)
    # Device time is the kernels' own, with the gaps between them: at least their busy time, far under the
    # ~0.1 ms a call takes from Python on that host.
    for seconds, group in zip(per, groups, strict=True):
        assert sum(end - start for start, end, _ in group) / 1e9 <= seconds * (1 + 1e-9)


def test_a_trace_whose_kernels_map_to_no_host_execution_is_refused_not_guessed() -> None:
    from runners.parsers.xplane_to_execution_times import TraceError, gpu_executions

    data = profile("h200_matmul_bf16_512")
    (device,) = [p for p in data.planes if p.name == "/device:GPU:0"]
    assert gpu_executions(device, [device]) is None  # no host plane: no launches, no executions
    with pytest.raises(TraceError, match="no 'XLA Modules' line"):
        xplane_to_executions(type("OnlyDevice", (), {"planes": [device]})())


def test_kernels_of_a_command_buffer_are_counted_by_their_own_names() -> None:
    """XLA recorded the unfused layernorm's 15 kernels into one CUDA graph: each carries ``hlo_op``
    ``command_buffer_1``. The op table names the kernels, and where the module's HLO is given, the instruction
    each kernel's name spells (LLVM writes ``input_reduce_fusion.1`` as ``input_reduce_fusion_1``)."""
    from runners.parsers.xplane_to_op_stats import HloOpInfo, kernel_hlo_names, xplane_to_op_stats

    data = profile("h200_layernorm_unfused")
    plain = {s.op: s for s in xplane_to_op_stats(data)}
    assert "command_buffer_1" not in plain
    assert {"input_reduce_fusion", "input_reduce_fusion_1", "loop_add_fusion"} <= set(plain)
    assert all(s.source == "device" and s.occurrences % CALLS == 0 for s in plain.values())
    busy = sum(end - start for start, end, _ in device_events(data))
    assert sum(s.total_ns for s in plain.values()) == pytest.approx(busy)  # every kernel counted, once

    module = next(iter({s.module for s in plain.values()}))
    hlo = {module: {"input_reduce_fusion.1": HloOpInfo("fusion", "kInput"),
                    "loop_add_fusion": HloOpInfo("fusion", "kLoop")}}
    named = {s.op: s for s in xplane_to_op_stats(data, hlo)}
    assert "input_reduce_fusion.1" in named and "input_reduce_fusion_1" not in named
    assert named["input_reduce_fusion.1"].category == "input_fusion"
    assert named["input_reduce_fusion.1"].total_ns == plain["input_reduce_fusion_1"].total_ns
    assert named["loop_add_fusion"].category == "loop_fusion"

    assert kernel_hlo_names("sort_11_1__2") == ["sort_11_1__2", "sort_11_1", "sort_11.1", "sort.11.1"]
    assert kernel_hlo_names("loop_add_fusion") == ["loop_add_fusion"]


def test_a_kernel_named_after_a_fusions_root_is_the_fusions() -> None:
    """The real H200 HLO of an exact top-k: XLA ran the sort as a custom fusion ``%fusion`` whose computation's ROOT
    is ``%sort.1.1``, and its kernels are named after the root (``sort_1_1__2``, ``__3``): in the op table they are
    the fusion's, merged, with the fusion's category."""
    from runners.parsers.by_kind import hlo_ops, parse
    from runners.parsers.xplane_to_op_stats import _named_as_in_hlo

    hlo_text = (FIXTURES.parent / "hlo_gpu" / "h200_top_k_exact.after_optimizations.txt").read_bytes()
    summary = parse("hlo", hlo_text, "top_k.txt")
    [module] = summary["modules"]
    assert {f["name"]: f["root"] for f in module["fusion_list"]}["fusion"] == "sort.1.1"
    ops = hlo_ops(summary)["jit_top_k_exact"]
    assert ops["sort.1.1"].of_fusion == "fusion" and ops["fusion"].of_fusion is None
    table = {("jit_top_k_exact", "sort_1_1__2"): [10, 5.0, 5.0], ("jit_top_k_exact", "sort_1_1__3"): [10, 3.0, 3.0],
             ("jit_top_k_exact", "loop_divide_fusion"): [10, 1.0, 1.0]}
    assert _named_as_in_hlo(table, hlo_ops(summary)) == {("jit_top_k_exact", "fusion"): [20, 8.0, 8.0],
                                                          ("jit_top_k_exact", "loop_divide_fusion"): [10, 1.0, 1.0]}


def test_sass_kernels_take_their_fusions_name_where_one_kernel_spells_it() -> None:
    from runners.parsers.by_kind import hlo_ops, parse
    from service.pipeline.parse_artifacts import _hlo_names

    hlo = hlo_ops(parse("hlo", (FIXTURES.parent / "hlo_gpu" / "h200_top_k_exact.after_optimizations.txt")
                        .read_bytes(), "top_k.txt"))
    assert _hlo_names(["sort_1_1__2", "loop_divide_fusion", "wrapped_slice_1"], hlo) == {
        "sort_1_1__2": "fusion", "wrapped_slice_1": "wrapped_slice.1"}
    # Two kernels of one fusion: one record per name, so both keep their symbols.
    assert _hlo_names(["sort_1_1__2", "sort_1_1__3"], hlo) == {}
