"""Per-op statistics from a real CPU trace of jitted functions, synthetic device traces with exact totals (checked
against xprof's own hlo_stats), categories, and hostile bytes."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.profiler import ProfileData

from runners.parsers.xplane_to_op_stats import (
    UNKNOWN_MODULE,
    HloOpInfo,
    OpStat,
    TraceParseError,
    categorize,
    parse_xplane_bytes,
    parse_xplane_file,
    summary,
    xplane_to_op_stats,
)

CALLS = 3
TRIPS = 3


def chain(x: Any) -> Any:
    return jnp.tanh(jnp.exp(x) * 2.0 + 1.0)


def softmax(x: Any) -> Any:
    return jax.nn.softmax(x, axis=-1)


def loop(x: Any) -> Any:
    return jax.lax.fori_loop(0, TRIPS, lambda i, v: jnp.tanh(v) * 1.5 + jnp.sin(v).sum(), x)


FUNCTIONS = {"jit_chain": chain, "jit_softmax": softmax, "jit_loop": loop}


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    x = np.ones((64, 256), np.float32)
    jitted = [jax.jit(f) for f in FUNCTIONS.values()]
    for f in jitted:  # compile outside the trace
        f(x).block_until_ready()
    directory = tmp_path_factory.mktemp("trace")
    with jax.profiler.trace(str(directory)):
        for _ in range(CALLS):
            for f in jitted:
                f(x).block_until_ready()
    (path,) = directory.glob("plugins/profile/*/*.xplane.pb")
    return path


def by_op(stats: list[OpStat], module: str) -> dict[str, OpStat]:
    return {s.op: s for s in stats if s.module == module}


def test_cpu_ops_are_named_after_the_jitted_functions(cpu_trace: Path) -> None:
    stats = parse_xplane_file(cpu_trace)
    assert {s.module for s in stats} == set(FUNCTIONS)
    x = np.ones((64, 256), np.float32)
    for module, function in FUNCTIONS.items():
        text = jax.jit(function).lower(x).compile().as_text()
        for stat in by_op(stats, module).values():
            assert f"%{stat.op} = " in text, (module, stat.op)
            assert stat.source == "host" and stat.devices is None and stat.total_ns > 0 and stat.self_ns > 0


def test_cpu_occurrences_are_calls_times_ops_per_call(cpu_trace: Path) -> None:
    runs: dict[str, set[int]] = defaultdict(set)
    for line in ProfileData.from_file(str(cpu_trace)).find_plane_with_name("/host:CPU").lines:
        for event in line.events:
            event_stats = dict(event.stats)
            if "hlo_module" in event_stats:
                runs[event_stats["hlo_module"]].add(event_stats["run_id"])
    assert {module: len(ids) for module, ids in runs.items()} == dict.fromkeys(FUNCTIONS, CALLS)

    stats = parse_xplane_file(cpu_trace)
    for module in ("jit_chain", "jit_softmax"):  # straight-line programs: every op once per call, nothing nested
        assert all(s.occurrences == CALLS and s.self_ns == s.total_ns for s in by_op(stats, module).values())
    ops = by_op(stats, "jit_loop")
    (while_op,) = [s for s in ops.values() if s.op.startswith("while")]
    body = [s for s in ops.values() if s.occurrences == CALLS * TRIPS]
    assert while_op.occurrences == CALLS and while_op.category == "control_flow" and body
    assert {s.occurrences for s in ops.values()} == {CALLS, CALLS * TRIPS}
    # the body's ops run inside the while op's event: its self time is what is left
    assert while_op.self_ns == pytest.approx(while_op.total_ns - sum(s.total_ns for s in body))
    assert 0 < while_op.self_ns < while_op.total_ns


def test_cpu_categories_and_summary(cpu_trace: Path) -> None:
    stats = parse_xplane_file(cpu_trace)
    softmax_ops = by_op(stats, "jit_softmax")
    # default flags hand the softmax reductions to YNNPACK: kCustom fusions named ynn_fusion
    assert any(s.category == "library" for s in softmax_ops.values())
    totals = summary(stats)
    assert sum(totals.values()) == pytest.approx(sum(s.self_ns for s in stats))
    assert list(totals.values()) == sorted(totals.values(), reverse=True)
    (fused,) = by_op(stats, "jit_chain").values()
    assert fused.category == "fusion"  # by name alone the kind is unknown
    hlo = {"jit_chain": {fused.op: HloOpInfo("fusion", "kLoop")}}
    (with_hlo,) = by_op(parse_xplane_file(cpu_trace, hlo=hlo), "jit_chain").values()
    assert with_hlo.category == "loop_fusion" and with_hlo.total_ns == fused.total_ns


def hlo_stats_rows(xplane: Path) -> list[dict[str, Any]]:
    from xprof.convert import raw_to_tool_data

    data, content_type = raw_to_tool_data.xspace_to_tool_data([str(xplane)], "hlo_stats", {})
    assert content_type == "application/json" and data
    table = json.loads(data)
    ids = [column["id"] for column in table["cols"]]
    return [dict(zip(ids, [cell["v"] for cell in row["c"]], strict=True)) for row in table["rows"]]


def test_xprof_hlo_stats_is_empty_on_cpu(cpu_trace: Path, tmp_path: Path) -> None:
    # xprof builds per-op tools from device planes only, so on CPU there is nothing to cross-check against:
    # the cross-check below runs on a device trace. xprof writes caches beside the file: give it a copy.
    copy = tmp_path / cpu_trace.name
    shutil.copy(cpu_trace, copy)
    assert hlo_stats_rows(copy) == []
    assert parse_xplane_file(cpu_trace)  # while this parser does find the ops


# --- synthetic device traces -------------------------------------------------------------------------------------

def xla_ops_plane(name: str, stray: bool = True) -> str:
    """A TPU-like plane: two executions of jit_f(7), one of jit_g(8); a while op containing two fusions, one
    with device timing stats (device_duration_ps shorter than the event); with ``stray``, an op outside any
    module. Times in ps. Ops carry program and symbol ids in their metadata: xprof keys ops by them (ProfileData
    does not show metadata stats)."""
    modules = [(1, 0, 20_000_000), (1, 30_000_000, 5_000_000), (2, 40_000_000, 4_000_000)]
    ops = [(3, 1_000_000, 10_000_000, ""), (4, 2_000_000, 3_000_000, ""),
           (4, 6_000_000, 2_000_000, "stats { metadata_id: 4 int64_value: 1500000 } "
                                     "stats { metadata_id: 5 int64_value: 6000000 }"),
           (4, 31_000_000, 1_000_000, ""), (5, 41_000_000, 2_000_000, "")]
    ops += [(4, 50_000_000, 500_000, "")] if stray else []
    module_events = "".join(f"events {{ metadata_id: {m} offset_ps: {o} duration_ps: {d} }}\n" for m, o, d in modules)
    op_events = "".join(f"events {{ metadata_id: {m} offset_ps: {o} duration_ps: {d} {s} }}\n" for m, o, d, s in ops)

    def op_metadata(key: int, op: str, program: int, symbol: int) -> str:
        return (f'event_metadata {{ key: {key} value {{ id: {key} name: "{op}" stats {{ metadata_id: 1 '
                f"int64_value: {program} }} stats {{ metadata_id: 2 int64_value: {symbol} }} }} }}\n")

    return (f'planes {{ id: 1 name: "{name}"\n'
            f'lines {{ id: 1 name: "XLA Modules" timestamp_ns: 1000\n{module_events}}}\n'
            f'lines {{ id: 2 name: "XLA Ops" timestamp_ns: 1000\n{op_events}}}\n'
            'event_metadata { key: 1 value { id: 1 name: "jit_f(7)" } }\n'
            'event_metadata { key: 2 value { id: 2 name: "jit_g(8)" } }\n'
            + op_metadata(3, "while.1", 7, 11) + op_metadata(4, "fusion.2", 7, 12)
            + op_metadata(5, "all-reduce.3", 8, 13)
            + 'stat_metadata { key: 1 value { id: 1 name: "program_id" } }\n'
            'stat_metadata { key: 2 value { id: 2 name: "symbol_id" } }\n'
            'stat_metadata { key: 4 value { id: 4 name: "device_duration_ps" } }\n'
            'stat_metadata { key: 5 value { id: 5 name: "device_offset_ps" } }\n}\n')


def test_device_totals_are_exact() -> None:
    text = xla_ops_plane("/device:TPU:1") + xla_ops_plane("/device:TPU:0")
    stats = {(s.module, s.op): s for s in xplane_to_op_stats(ProfileData.from_text_proto(text))}
    assert set(stats) == {("jit_f", "while.1"), ("jit_f", "fusion.2"), ("jit_g", "all-reduce.3"),
                          (UNKNOWN_MODULE, "fusion.2")}
    while_op, fusion = stats["jit_f", "while.1"], stats["jit_f", "fusion.2"]
    assert (while_op.occurrences, while_op.total_ns, while_op.self_ns) == (1, 10_000.0, 5_500.0)
    assert (fusion.occurrences, fusion.total_ns, fusion.self_ns) == (3, 5_500.0, 5_500.0)
    reduce = stats["jit_g", "all-reduce.3"]
    assert (reduce.occurrences, reduce.total_ns, reduce.category) == (1, 2_000.0, "collective")
    assert stats[UNKNOWN_MODULE, "fusion.2"].total_ns == 500.0
    assert {s.source for s in stats.values()} == {"device"} and {s.devices for s in stats.values()} == {None}
    assert summary(stats.values())["control_flow"] == 5_500.0
    counted = xplane_to_op_stats(ProfileData.from_text_proto(text), count_devices=True)
    assert {s.devices for s in counted} == {2}


def test_device_totals_match_xprof_hlo_stats(tmp_path: Path) -> None:
    path = tmp_path / "device.xplane.pb"
    path.write_bytes(ProfileData.text_proto_to_serialized_xspace(xla_ops_plane("/device:TPU:0", stray=False)))
    ours = {(s.module, s.op): [s.occurrences, s.total_ns, s.self_ns] for s in parse_xplane_file(path)}
    programs = {"7": "jit_f", "8": "jit_g"}
    rows = hlo_stats_rows(path)
    theirs = {(programs[r["program_id"]], r["hlo_op_name"]): [r["occurrences"], r["total_time"] * 1000,
                                                              r["total_self_time"] * 1000] for r in rows}
    assert set(ours) == set(theirs) and len(rows) == 3
    for key, values in ours.items():
        assert values == pytest.approx(theirs[key]), key


def test_gpu_stream_lines_without_an_ops_line() -> None:
    # raw GPU planes: kernels on stream lines carry hlo_op ("outer::inner") and hlo_module stats
    def kernel(offset: int, duration: int, op: str) -> str:
        return (f'events {{ metadata_id: 1 offset_ps: {offset} duration_ps: {duration} '
                f'stats {{ metadata_id: 1 str_value: "{op}" }} stats {{ metadata_id: 2 str_value: "jit_h" }} }}\n')

    text = ('planes { id: 1 name: "/device:GPU:0"\n'
            'lines { id: 1 name: "Stream #13(compute)" timestamp_ns: 0\n'
            + kernel(0, 4_000_000, "fusion.1") + kernel(5_000_000, 1_000_000, "custom-call.2::gemm")
            + kernel(7_000_000, 2_000_000, "fusion.1")
            + 'events { metadata_id: 2 offset_ps: 0 duration_ps: 9000000 }\n}\n'
            'event_metadata { key: 1 value { id: 1 name: "kernel" } }\n'
            'event_metadata { key: 2 value { id: 2 name: "memcpy" } }\n'
            'stat_metadata { key: 1 value { id: 1 name: "hlo_op" } }\n'
            'stat_metadata { key: 2 value { id: 2 name: "hlo_module" } }\n}\n')
    stats = {s.op: s for s in xplane_to_op_stats(ProfileData.from_text_proto(text))}
    assert set(stats) == {"fusion.1", "gemm"} and {s.module for s in stats.values()} == {"jit_h"}
    assert (stats["fusion.1"].occurrences, stats["fusion.1"].total_ns) == (2, 6_000.0)


@pytest.mark.parametrize(("op", "info", "category"), [
    ("fusion.3", HloOpInfo("fusion", "kInput"), "input_fusion"),
    ("fusion.4", HloOpInfo("fusion", "kOutput"), "output_fusion"),
    ("triton_gemm", HloOpInfo("fusion", "kCustom", "__triton_gemm"), "custom_fusion"),
    ("ynn_fusion", HloOpInfo("fusion", "kCustom", "__ynn_fusion"), "library"),
    ("custom-call.1", HloOpInfo("custom-call", target="__onednn$matmul"), "library"),
    ("custom-call.2", HloOpInfo("custom-call", target="my_kernel"), "custom_call"),
    ("all-gather-start.1", HloOpInfo("all-gather-start"), "collective"),
    ("dot_general.0", HloOpInfo("dot"), "dot"),
    ("conditional.1", HloOpInfo("conditional"), "control_flow"),
    ("transpose.2", None, "transpose"),
    ("copy-start.1", None, "copy"),
    ("collective-permute-done.3", None, "collective"),
    ("convolution.1", None, "convolution"),
    ("dot_general.1", None, "dot"),
    ("cond.1.clone", None, "control_flow"),
    ("wrapped_copy", None, "fusion"),
    ("add.5", None, "other"),
])
def test_categories(op: str, info: HloOpInfo | None, category: str) -> None:
    assert categorize(op, info) == category


# --- hostile input -----------------------------------------------------------------------------------------------

def test_a_trace_without_ops_or_devices_is_an_error() -> None:
    empty_host = SimpleNamespace(planes=[SimpleNamespace(name="/host:CPU", lines=[
        SimpleNamespace(name="python", events=[SimpleNamespace(start_ns=0, duration_ns=5, stats=[("x", 1)])])])])
    with pytest.raises(TraceParseError, match="neither a device plane nor host op events"):
        xplane_to_op_stats(empty_host)
    with pytest.raises(TraceParseError, match="x.pb"):
        parse_xplane_bytes(b"", "x.pb")


def test_truncated_real_bytes_and_size_limit(cpu_trace: Path, tmp_path: Path) -> None:
    data = cpu_trace.read_bytes()
    for cut in range(1, len(data), max(1, len(data) // 40)):
        try:
            stats = parse_xplane_bytes(data[:cut], "cut.pb")
        except TraceParseError as exc:
            assert "cut.pb" in str(exc)
        else:  # a cut between two complete fields is a valid, shorter XSpace
            assert all(isinstance(s, OpStat) for s in stats)
    with pytest.raises(TraceParseError, match="limit"):
        parse_xplane_file(cpu_trace, max_bytes=len(data) - 1)
    with pytest.raises(TraceParseError, match="cannot read"):
        parse_xplane_file(tmp_path / "missing.xplane.pb")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_are_a_trace_parse_error(data: bytes) -> None:
    try:
        stats = parse_xplane_bytes(data, "random.pb")
    except TraceParseError:
        return
    assert all(isinstance(s, OpStat) for s in stats)


# --- the host walk against a straightforward reference -------------------------------------------------------------


def reference_host_stats(path: Path) -> dict[tuple[str, str], tuple[int, float, float]]:
    """Per (module, op): occurrences, total and self time, by the plainest walk: every event's stats as a dict,
    and each op event's time charged to the innermost op event of its line that contains it (latest start, then
    earliest end; identical spans nest in the order they were recorded)."""
    table: dict[tuple[str, str], list[float]] = {}
    for plane in ProfileData.from_file(str(path)).planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            events = []
            for event in line.events:
                stats = dict(event.stats)
                if "hlo_op" in stats and "hlo_module" in stats:
                    start = float(event.start_ns)
                    events.append((str(stats["hlo_module"]), str(stats["hlo_op"]), start, start + event.duration_ns))
            children = [0.0] * len(events)
            for index, (_, _, start, end) in enumerate(events):
                parents = [other for other, (_, _, s, e) in enumerate(events)
                           if other != index and s - 1e-3 <= start and end <= e + 1e-3
                           and ((s, -e) < (start, -end) or ((s, -e) == (start, -end) and other < index))]
                if parents:
                    children[max(parents, key=lambda p: (events[p][2], -events[p][3], p))] += end - start
            for (module, op, start, end), inner in zip(events, children, strict=True):
                row = table.setdefault((module, op), [0, 0.0, 0.0])
                row[0] += 1
                row[1] += end - start
                row[2] += end - start - inner
    return {key: (int(count), total, self_ns) for key, (count, total, self_ns) in table.items()}


def test_host_walk_matches_a_reference_walk_on_a_real_trace(cpu_trace: Path) -> None:
    expected = reference_host_stats(cpu_trace)
    stats = parse_xplane_file(cpu_trace)
    assert {(s.module, s.op) for s in stats} == set(expected) and expected
    for stat in stats:
        count, total, self_ns = expected[(stat.module, stat.op)]
        assert stat.occurrences == count
        assert stat.total_ns == pytest.approx(total, rel=1e-12) and stat.self_ns == pytest.approx(self_ns, rel=1e-9)
