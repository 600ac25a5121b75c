"""Execution times from profiler traces: synthetic accelerator XSpaces (text protos) and a real CPU trace."""

from pathlib import Path
from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest
from jax.profiler import ProfileData

from runners.harness import TimingPlan, measure
from runners.parsers.xplane_to_execution_times import TraceError, host_executions, per_call, xplane_to_executions
from runners.suite import BenchmarkInstance, BenchmarkSpec, Case


def plane(name: str, durations_ps: list[int], line: str = "XLA Modules") -> str:
    events = "".join(f"events {{ metadata_id: 1 offset_ps: {i * 10**9} duration_ps: {d} }}\n"
                     for i, d in enumerate(durations_ps))
    return (f'planes {{ id: 1 name: "{name}" lines {{ id: 1 name: "{line}" timestamp_ns: 1000\n{events} }}\n'
            f'event_metadata {{ key: 1 value {{ id: 1 name: "jit_kernel(1)" }} }} }}\n')


def test_device_plane_gives_device_time_of_the_first_device() -> None:
    text = plane("/device:GPU:1", [9_000_000, 9_000_000]) + plane("/device:GPU:0", [5_000_000, 6_000_000])
    executions = xplane_to_executions(ProfileData.from_text_proto(text))
    assert executions.source == "device"
    assert executions.seconds == pytest.approx([5e-6, 6e-6])


def test_tpu_planes_count_too() -> None:
    executions = xplane_to_executions(ProfileData.from_text_proto(plane("/device:TPU:0", [2_000_000])))
    assert executions.source == "device" and executions.seconds == pytest.approx([2e-6])


def test_a_device_plane_without_module_line_is_an_error() -> None:
    with pytest.raises(TraceError, match="XLA Modules"):
        xplane_to_executions(ProfileData.from_text_proto(plane("/device:GPU:0", [1], line="Other")))


def test_host_ops_are_grouped_by_run() -> None:
    def ev(start: float, dur: float, run: int) -> SimpleNamespace:
        return SimpleNamespace(start_ns=start, duration_ns=dur, stats=[("hlo_op", "f"), ("run_id", run)])

    host = SimpleNamespace(name="/host:CPU", lines=[
        SimpleNamespace(name="a", events=[ev(100, 10, 7), ev(0, 5, 3), ev(20, 30, 3)]),
        SimpleNamespace(name="b", events=[ev(105, 20, 7), SimpleNamespace(start_ns=0, duration_ns=999, stats=[])]),
    ])
    assert host_executions([host]) == pytest.approx([50e-9, 25e-9])


def test_per_call_folds_several_programs_per_call() -> None:
    assert per_call([1.0, 2.0, 3.0, 4.0], 2) == [3.0, 7.0]
    with pytest.raises(TraceError, match="do not divide"):
        per_call([1.0, 2.0, 3.0], 2)


def test_a_traced_pass_on_this_cpu_reports_each_call() -> None:
    x = np.ones((128, 1024), dtype=np.float32)
    spec = BenchmarkSpec(suite="t", name="exp", grid=({},),
                         factory=lambda: Case(fn=lambda v: jnp.exp(v) * 2, args=(x,)))
    wall, traced = measure(BenchmarkInstance(spec=spec), TimingPlan(samples=4, warmup=1, trace=True))
    assert traced.metric == "execution_time" and traced.status == "ok"
    assert len(traced.samples) == len(wall.samples) == 4 and all(t > 0 for t in traced.samples)


def test_host_executions_match_a_reference_walk_on_a_real_trace(tmp_path: Path) -> None:
    import jax

    f = jax.jit(lambda v: jnp.tanh(jnp.exp(v) * 2.0))
    x = np.ones((64, 256), np.float32)
    f(x).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        for _ in range(3):
            f(x).block_until_ready()
    (path,) = tmp_path.glob("plugins/profile/*/*.xplane.pb")
    planes = list(ProfileData.from_file(str(path)).planes)
    spans: dict[object, list[float]] = {}
    for line in (line for plane in planes if plane.name == "/host:CPU" for line in plane.lines):
        for event in line.events:
            stats = dict(event.stats)
            if "run_id" in stats and "hlo_op" in stats:
                span = spans.setdefault(stats["run_id"], [float("inf"), float("-inf")])
                span[0] = min(span[0], float(event.start_ns))
                span[1] = max(span[1], float(event.start_ns) + float(event.duration_ns))
    assert host_executions(planes) == [(end - start) / 1e9 for start, end in sorted(spans.values())]
    assert len(spans) == 3
