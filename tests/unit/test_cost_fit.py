"""service.model.cost_fit, and predict.estimate_efficiency's choice between it and the interpolation, on synthetic
families whose right answers are known."""

from __future__ import annotations

import pytest

from kernelwatch.memory_hierarchy import CacheLevel
from service.model.cost_fit import CostFit, fit_cost
from service.model.predict import (
    Measured,
    Roofs,
    Shape,
    estimate_efficiency,
    fitted_seconds,
    held_out_errors,
    interpolate_efficiency,
    predict,
)
from service.report.predict_text import PredictionReport, prediction_to_text

ROOFS = Roofs("synthetic", 100e9, 10e9)
# An AMX-like matmul: 20 µs per call, a byte 0.1 ns (the weight is packed on every call), a FLOP 10 ps: the sum of
# the two roofs' times plus a fixed cost, so never faster than the roof.
AMX = CostFit(fixed_s=20e-6, per_byte_s=1e-10, per_flop_s=1e-11)


def matmul(m: int, n: int, k: int) -> Shape:
    return Shape({"m": m, "n": n, "k": k}, 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n))


def timed(shape: Shape, cost: CostFit = AMX) -> Measured:
    return Measured(shape, cost.seconds(shape.flops, shape.bytes_accessed))


# Square matmuls and skinny ones over a 1024x1024 weight: at equal FLOPs the skinny ones move far more bytes.
SHAPES = [matmul(s, s, s) for s in (128, 256, 384, 512, 1024)] + [matmul(m, 1024, 1024) for m in (1, 4, 64, 256)]


def test_the_fit_recovers_the_costs_that_made_the_times() -> None:
    fit = fit_cost([(s.flops, s.bytes_accessed, AMX.seconds(s.flops, s.bytes_accessed)) for s in SHAPES])
    assert fit is not None
    assert fit.fixed_s == pytest.approx(AMX.fixed_s, rel=1e-6)
    assert fit.per_byte_s == pytest.approx(AMX.per_byte_s, rel=1e-6)
    assert fit.per_flop_s == pytest.approx(AMX.per_flop_s, rel=1e-6)


def test_no_cost_is_fitted_negative_and_too_little_data_fits_nothing() -> None:
    # Times that fall as the bytes grow: the unconstrained fit's cost per byte would be negative.
    falling = [(1e6, 1e6, 3e-3), (2e6, 4e6, 2e-3), (4e6, 16e6, 1e-3), (8e6, 64e6, 1e-3)]
    fit = fit_cost(falling)
    assert fit is not None
    assert min(fit.fixed_s, fit.per_byte_s, fit.per_flop_s) >= 0
    assert fit_cost(falling[:2]) is None  # fewer shapes than coefficients
    assert fit_cost([*falling[:2], (1e6, 1e6, 0.0)]) is None  # a time that is not positive
    streaming = fit_cost([(0.0, 1e6, 1e-3), (0.0, 2e6, 2e-3), (0.0, 4e6, 4e-3)])  # no FLOPs: bytes alone
    assert streaming is not None and streaming.per_byte_s == pytest.approx(1e-9)
    assert streaming.fixed_s == pytest.approx(0.0, abs=1e-12) and streaming.per_flop_s == 0.0


def test_where_the_family_s_time_is_additive_the_fit_is_chosen_and_predicts_it() -> None:
    """Shapes of equal FLOPs that differ in bytes sit at one roofline time, so the interpolation predicts them alike;
    the held-out errors of the family's own shapes say the fit does better, and the fit is used."""
    points = [timed(s) for s in SHAPES]
    errors = held_out_errors(points, ROOFS)
    assert errors is not None
    interpolated, fitted = errors
    assert fitted == pytest.approx(0.0, abs=1e-6) and interpolated > 0.05
    target = matmul(16, 1024, 1024)  # never measured; 256^3's FLOPs, so its roofline time too (both compute-bound)
    chosen = estimate_efficiency(target.flops, target.bytes_accessed, points, ROOFS)
    assert chosen.basis == "fitted" and len(chosen.neighbours) == len(points)
    truth = AMX.seconds(target.flops, target.bytes_accessed)
    assert ROOFS.roofline_s(target.flops, target.bytes_accessed) / chosen.value == pytest.approx(truth, rel=1e-6)
    alone = interpolate_efficiency(target.flops, target.bytes_accessed, points, ROOFS)
    assert abs(ROOFS.roofline_s(target.flops, target.bytes_accessed) / alone.value - truth) / truth > 0.05
    # A fit faster than the roof is not used: against roofs ten times lower the same points give no fitted time.
    slow = Roofs("slow", 10e9, 1e9)
    assert fitted_seconds(target.flops, target.bytes_accessed, points, slow) is None
    assert estimate_efficiency(target.flops, target.bytes_accessed, points, slow).basis != "fitted"
    # predict() goes through the same choice.
    prediction = predict(SHAPES[0], target, points, ROOFS)
    assert prediction.target.efficiency.basis == "fitted"
    # The report says which way was taken, and on what figures.
    text = prediction_to_text(PredictionReport("matmul/amx", "host", "bfloat16", prediction, len(points)))
    assert "efficiency from the fitted cost a + b x bytes + c x FLOPs: each measured shape left out in turn, " \
           f"the interpolation erred {interpolated:.1%} and the fitted cost 0.0%" in text
    # A shape that was measured keeps its own efficiency.
    assert estimate_efficiency(SHAPES[1].flops, SHAPES[1].bytes_accessed, points, ROOFS).basis == "measured"


def test_the_fit_is_made_from_the_shape_s_own_cache_level() -> None:
    """Past L2 the same matmuls pay 4x per byte: one line through both levels predicts neither, a fit per level
    predicts each exactly (as the interpolation reads each level's shapes only)."""
    mib = 2 ** 20
    cached = Roofs("host", 100e9, 10e9, caches=(CacheLevel("L2", 2 * mib), CacheLevel("L3", 32 * mib)))
    past_l2 = CostFit(fixed_s=AMX.fixed_s, per_byte_s=4 * AMX.per_byte_s, per_flop_s=AMX.per_flop_s)
    l3_shapes = [matmul(1024, 1024, 1024), matmul(1536, 1536, 1536), matmul(2048, 1024, 1024)] + [
        matmul(m, 4096, 4096) for m in (4, 64, 256)]
    l2_shapes = [s for s in SHAPES if s.params["m"] != 1024]  # 1024^3's working set is past L2
    assert {cached.level(s.bytes_accessed) for s in l2_shapes} == {"L2"}
    assert {cached.level(s.bytes_accessed) for s in l3_shapes} == {"L3"}
    points = [timed(s) for s in l2_shapes] + [timed(s, past_l2) for s in l3_shapes]
    for target, cost in ((matmul(16, 1024, 1024), AMX), (matmul(16, 4096, 4096), past_l2)):
        chosen = estimate_efficiency(target.flops, target.bytes_accessed, points, cached)
        assert chosen.basis == "fitted"
        assert {cached.level(n.shape.bytes_accessed) for n in chosen.neighbours} == {
            cached.level(target.bytes_accessed)}
        truth = cost.seconds(target.flops, target.bytes_accessed)
        assert cached.roofline_s(target.flops, target.bytes_accessed) / chosen.value == pytest.approx(truth, rel=1e-6)
    # One fit through both levels is far off past L2.
    across = fit_cost([(p.shape.flops, p.shape.bytes_accessed, p.seconds) for p in points])
    target = matmul(16, 4096, 4096)
    assert across is not None
    truth = past_l2.seconds(target.flops, target.bytes_accessed)
    assert abs(across.seconds(target.flops, target.bytes_accessed) - truth) / truth > 0.1


def test_a_family_of_too_few_shapes_is_only_interpolated() -> None:
    points = [timed(s) for s in SHAPES[:3]]
    assert held_out_errors(points, ROOFS) is None  # two left after one is held out: nothing to fit three costs to
    target = matmul(16, 1024, 1024)
    assert estimate_efficiency(target.flops, target.bytes_accessed, points, ROOFS) == interpolate_efficiency(
        target.flops, target.bytes_accessed, points, ROOFS)
    # Several measurements of one shape count as one shape: three shapes measured twice are still three.
    assert held_out_errors(points + points, ROOFS) is None
