"""How a benchmark is timed.

Methodology: inputs are placed on the device first; the function is lowered and compiled once with the
compile time recorded apart; its output is checked against the reference before anything is timed; a few
warm-up calls absorb first-touch effects; then every sample is one call followed by ``block_until_ready()``,
so the clock covers the device work and not only the asynchronous dispatch. All samples are kept.

On an accelerator a second pass of as many calls runs under the profiler, and each call's device time is read
from the trace (runners/parsers/xplane_to_execution_times.py): the primary time there, with wall time beside it.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kernelwatch.memory_hierarchy import FOOTPRINT_KEY
from runners.capture import Capturer, footprint_bytes, memory_figures
from runners.parsers.xplane_to_execution_times import Executions, TraceError, per_call, xplane_to_executions
from runners.suite import BenchmarkInstance, Case, QualityMetric, benchmark_version, exception_text


@dataclass(frozen=True)
class TimingPlan:
    samples: int = 20
    warmup: int = 3
    # Stop taking samples past this many seconds of timed work, so one slow shape cannot stall a suite.
    max_seconds: float = 30.0
    # A second, profiled pass whose per-call execution times come from the trace. None: on accelerators only,
    # where the trace holds device time free of host dispatch; on a CPU it would only add run time.
    trace: bool | None = None


@dataclass(frozen=True)
class Measurement:
    """One result of one benchmark instance: its time, or one of its quality or bandwidth metrics."""

    key: str
    suite: str
    name: str
    params: dict[str, Any]
    unit: str
    direction: str
    status: str  # "ok" | "failed"
    samples: list[float]
    metric: str = "wall_time"
    compile_time_s: float | None = None
    flops: float | None = None
    bytes_accessed: float | None = None
    max_abs_error: float | None = None
    message: str | None = None
    artifacts: list[dict[str, Any]] | None = None  # ArtifactRefs as dicts: what was captured, by digest
    cost: dict[str, float] | None = None  # XLA's cost analysis of the compiled program
    benchmark_version: str | None = None  # runners.suite.benchmark_version: the benchmark's own code


class WrongAnswer(AssertionError):
    pass


def _block(value: Any) -> Any:
    import jax

    return jax.block_until_ready(value)


def check_against_reference(case: Case, output: Any) -> float | None:
    """Compare the kernel's output with the numpy reference; return the max abs error or raise WrongAnswer."""
    if case.reference is None:
        return None
    import jax

    expected_leaves = jax.tree_util.tree_leaves(case.reference())
    actual_leaves = jax.tree_util.tree_leaves(output)
    if len(expected_leaves) != len(actual_leaves):
        raise WrongAnswer(f"output has {len(actual_leaves)} arrays, the reference {len(expected_leaves)}")
    worst = 0.0
    for expected, actual in zip(expected_leaves, actual_leaves, strict=True):
        exp = np.asarray(expected, dtype=np.float64)
        act = np.asarray(actual, dtype=np.float64)
        if exp.shape != act.shape:
            raise WrongAnswer(f"output shape {act.shape} differs from the reference's {exp.shape}")
        if not np.allclose(act, exp, rtol=case.rtol, atol=case.atol):
            err = float(np.max(np.abs(act - exp)))
            raise WrongAnswer(f"output differs from the reference: max abs error {err:.3g} "
                              f"(rtol={case.rtol}, atol={case.atol})")
        if exp.size:
            worst = max(worst, float(np.max(np.abs(act - exp))))
    return worst


@dataclass(frozen=True)
class Timing:
    compile_time_s: float
    samples: list[float]
    max_abs_error: float | None
    quality: list[QualityMetric]
    traced: Executions | None = None  # per-call times from the profiler trace, when a traced pass ran
    footprint_bytes: int | None = None  # XLA's memory analysis: arguments + outputs - aliased + temporaries


def traced_pass(compiled: Callable[..., Any], args: Any, calls: int) -> tuple[Executions | None, bytes]:
    """Run ``calls`` calls under ``jax.profiler.trace``; each call's execution time from the trace (None where
    this JAX cannot read its own traces, or the trace holds no executions this parser knows), and the trace
    itself (the serialized XSpace). A trace the parser cannot read costs the result its traced times, never its
    wall time: the trace is still kept, for the drill-down and for the parser's next version."""
    import jax

    try:
        from jax.profiler import ProfileData
    except ImportError:  # an older JAX (a project's own, runners/envs.py): the trace is kept, not read here
        ProfileData = None  # noqa: N806
    with tempfile.TemporaryDirectory(prefix="kw-trace-") as directory:
        with jax.profiler.trace(directory):
            for _ in range(calls):
                _block(compiled(*args))
        paths = sorted(Path(directory).glob("plugins/profile/*/*.xplane.pb"))
        if not paths:
            raise TraceError("the profiler wrote no .xplane.pb")
        raw = paths[0].read_bytes()
    if ProfileData is None:
        return None, raw
    try:
        executions = xplane_to_executions(ProfileData.from_serialized_xspace(raw))
        return Executions(executions.source, per_call(executions.seconds, calls)), raw
    except TraceError as exc:
        print(f"kernelwatch: no traced times: {exc}", file=sys.stderr)
        return None, raw


def time_case(case: Case, plan: TimingPlan, clock: Callable[[], int] = time.perf_counter_ns,
              capturer: Capturer | None = None) -> Timing:
    """Compile, check, warm up and sample one case; with a capturer, keep what the compile and a trace leave."""
    import jax

    args = jax.device_put(case.args)
    jitted = jax.jit(case.fn)
    if capturer is not None:
        capturer.start()
    start = clock()
    compiled = jitted.lower(*args).compile()
    compile_time = (clock() - start) / 1e9
    memory = memory_figures(compiled)
    if capturer is not None:
        capturer.after_compile(compiled, memory)
    footprint = footprint_bytes(memory)

    output = _block(compiled(*args))
    error = check_against_reference(case, output)
    if case.check is not None:
        try:
            case.check(output)
        except AssertionError as exc:
            raise WrongAnswer(f"output fails its check: {exc}") from None
    for _ in range(plan.warmup):
        _block(compiled(*args))

    samples: list[float] = []
    budget_ns = plan.max_seconds * 1e9
    spent = 0
    # At least 10 samples (or all asked for, if fewer) even past the time budget: fewer decide nothing.
    floor = min(plan.samples, 10)
    while len(samples) < plan.samples and (spent < budget_ns or len(samples) < floor):
        start = clock()
        _block(compiled(*args))
        elapsed = clock() - start
        spent += elapsed
        samples.append(elapsed / 1e9)
    quality = case.quality(output) if case.quality is not None else []
    trace = plan.trace if plan.trace is not None else (jax.default_backend() != "cpu" or capturer is not None)
    traced = None
    if trace:
        traced, xplane = traced_pass(compiled, args, len(samples))
        if capturer is not None:
            capturer.trace(xplane)
    return Timing(compile_time_s=compile_time, samples=samples, max_abs_error=error, quality=quality, traced=traced,
                  footprint_bytes=footprint)


def result_cost(capturer: Capturer | None, footprint: int | None) -> dict[str, float] | None:
    """A result's cost figures: XLA's cost analysis where it was captured, and the footprint the roofline
    chooses a memory level by (kernelwatch/memory_hierarchy.py) wherever XLA sized it."""
    cost = dict(capturer.cost) if capturer is not None else {}
    if footprint is not None:
        cost[FOOTPRINT_KEY] = float(footprint)
    return cost if cost or capturer is not None else None


def measure(instance: BenchmarkInstance, plan: TimingPlan, capturer: Capturer | None = None,
            untimeable: Callable[[], str | None] = lambda: None) -> list[Measurement]:
    """Run one benchmark instance: its time first, then any quality and bandwidth metrics.

    Any exception becomes one failed measurement that says why; the suite goes on. ``untimeable``, asked once
    the case is built (its imports made) and before any timing, may give a reason not to time it at all.
    """
    spec = instance.spec
    version = benchmark_version(spec.factory)

    def result(status: str, samples: list[float], metric: str = "wall_time", unit: str = spec.unit,
               direction: str = spec.direction, **extra: Any) -> Measurement:
        return Measurement(key=instance.key, suite=spec.suite, name=spec.name, params=dict(instance.params),
                           unit=unit, direction=direction, status=status, samples=samples, metric=metric,
                           benchmark_version=version, **extra)

    try:
        case = instance.make_case()
        problem = untimeable()
        if problem is not None:
            return [result("failed", [], message=problem[:5000])]
        timing = time_case(case, plan, capturer=capturer)
    except Exception as exc:  # a broken kernel is a result, not a crash of the suite
        return [result("failed", [], message=exception_text(exc)[:5000])]
    out = [result("ok", timing.samples, compile_time_s=timing.compile_time_s, flops=case.flops,
                  bytes_accessed=case.bytes_accessed, max_abs_error=timing.max_abs_error,
                  artifacts=[dataclasses.asdict(r) for r in capturer.refs] if capturer is not None else None,
                  cost=result_cost(capturer, timing.footprint_bytes))]
    if timing.traced is not None and (timing.traced.source == "device" or plan.trace):
        # Device time where the trace has a device plane: the number to trust on an accelerator. On a CPU host
        # the trace is kept for its per-op split; the span of each execution's ops is reported only when asked
        # for, since with XLA's thread pool on a shared machine it wanders more than the wall time does.
        metric = "device_time" if timing.traced.source == "device" else "execution_time"
        out.append(result("ok", timing.traced.seconds, metric=metric))
    if case.bytes_moved:
        gbps = [case.bytes_moved / t / 1e9 for t in timing.samples if t > 0]
        out.append(result("ok", gbps, metric="algbw", unit="GB/s", direction="higher_is_better"))
    for q in timing.quality:
        out.append(result("ok", [q.value], metric=q.name, unit=q.unit, direction=q.direction))
    return out
