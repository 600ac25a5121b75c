"""How a benchmark is timed.

Methodology: inputs are placed on the device first; the function is lowered and compiled once with the
compile time recorded apart; its output is checked against the reference before anything is timed; a few
warm-up calls absorb first-touch effects; then every sample is one call followed by ``block_until_ready()``,
so the clock covers the device work and not only the asynchronous dispatch. All samples are kept.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from runners.suite import BenchmarkInstance, Case


@dataclass(frozen=True)
class TimingPlan:
    samples: int = 20
    warmup: int = 3
    # Stop taking samples past this many seconds of timed work, so one slow shape cannot stall a suite.
    max_seconds: float = 30.0


@dataclass(frozen=True)
class Measurement:
    key: str
    suite: str
    name: str
    params: dict[str, Any]
    unit: str
    direction: str
    status: str  # "ok" | "failed"
    samples: list[float]
    compile_time_s: float | None = None
    flops: float | None = None
    bytes_accessed: float | None = None
    max_abs_error: float | None = None
    message: str | None = None


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


def time_case(case: Case, plan: TimingPlan, clock: Callable[[], int] = time.perf_counter_ns) -> tuple[
    float, list[float], float | None
]:
    """Compile, check, warm up and sample one case; returns (compile seconds, samples in seconds, error)."""
    import jax

    args = jax.device_put(case.args)
    jitted = jax.jit(case.fn)
    start = clock()
    compiled = jitted.lower(*args).compile()
    compile_time = (clock() - start) / 1e9

    error = check_against_reference(case, _block(compiled(*args)))
    for _ in range(plan.warmup):
        _block(compiled(*args))

    samples: list[float] = []
    budget_ns = plan.max_seconds * 1e9
    spent = 0
    while len(samples) < plan.samples and (spent < budget_ns or len(samples) < 3):
        start = clock()
        _block(compiled(*args))
        elapsed = clock() - start
        spent += elapsed
        samples.append(elapsed / 1e9)
    return compile_time, samples, error


def measure(instance: BenchmarkInstance, plan: TimingPlan) -> Measurement:
    """Run one benchmark instance; any exception becomes a failed measurement that says why."""
    spec = instance.spec

    def result(status: str, samples: list[float], case: Case | None = None, compile_time: float | None = None,
               error: float | None = None, message: str | None = None) -> Measurement:
        return Measurement(
            key=instance.key, suite=spec.suite, name=spec.name, params=dict(instance.params), unit=spec.unit,
            direction=spec.direction, status=status, samples=samples, compile_time_s=compile_time,
            flops=case.flops if case else None, bytes_accessed=case.bytes_accessed if case else None,
            max_abs_error=error, message=message,
        )

    try:
        case = instance.make_case()
        compile_time, samples, error = time_case(case, plan)
    except Exception as exc:  # a broken kernel is a result, not a crash of the suite
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return result("failed", [], message=detail[:5000])
    return result("ok", samples, case, compile_time, error)
