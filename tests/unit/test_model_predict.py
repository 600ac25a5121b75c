"""service.model.predict on synthetic families whose right answers are known."""

from __future__ import annotations

import math

import pytest

from service.model.predict import (
    DEFAULT_EFFICIENCY,
    Measured,
    Roofs,
    Shape,
    interpolate_efficiency,
    predict,
    scale_by_flops,
)

# A 100 GFLOP/s, 10 GB/s machine: ridge at 10 FLOP/byte.
ROOFS = Roofs("synthetic", 100e9, 10e9)


def matmul(m: int, n: int = 512, k: int = 512) -> Shape:
    """A float32 matmul's counts: intensity grows with m, so small m is memory-bound and large m compute-bound."""
    return Shape({"m": m, "n": n, "k": k}, 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n))


def on_roof(shape: Shape, efficiency: float = 1.0) -> Measured:
    return Measured(shape, ROOFS.roofline_s(shape.flops, shape.bytes_accessed) / efficiency)


def test_the_ridge_is_where_the_roofs_meet() -> None:
    assert ROOFS.ridge == pytest.approx(10.0)
    assert ROOFS.bound(100.0, 10.0) == "compute"  # exactly at the ridge: compute-bound, as in roofline.py
    assert ROOFS.bound(99.0, 10.0) == "memory"
    assert matmul(1).intensity < 10 < matmul(4096).intensity


def test_a_perfectly_rooflined_family_is_predicted_exactly_on_both_sides_of_the_ridge() -> None:
    # A kernel at a constant 70 % of its roofline at every shape: any shape is predicted exactly, whichever roof
    # binds at it and at its measured neighbours.
    points = [on_roof(matmul(m), 0.7) for m in (1, 8, 64, 512, 4096)]
    for m in (2, 16, 100, 1000, 8192, 3):
        target = matmul(m)
        prediction = predict(matmul(8), target, points, ROOFS)
        truth = ROOFS.roofline_s(target.flops, target.bytes_accessed) / 0.7
        assert prediction.target.predicted_s == pytest.approx(truth, rel=1e-12)
        assert prediction.source.predicted_s == pytest.approx(points[1].seconds, rel=1e-12)


def test_a_change_across_the_ridge_is_reported_in_its_direction() -> None:
    points = [on_roof(matmul(m)) for m in (1, 4096)]
    up = predict(matmul(1), matmul(4096), points, ROOFS)
    assert (up.source.bound, up.target.bound) == ("memory", "compute")
    assert up.crosses_ridge and up.crossing == "memory-bound → compute-bound"
    down = predict(matmul(4096), matmul(1), points, ROOFS)
    assert down.crossing == "compute-bound → memory-bound"
    same = predict(matmul(2048), matmul(4096), points, ROOFS)
    assert not same.crosses_ridge and same.crossing is None
    assert same.ratio == pytest.approx(same.target.predicted_s / same.source.predicted_s)


def test_time_is_a_straight_line_in_roofline_time_between_neighbours() -> None:
    small, large = Shape({"n": 1}, 1e6, 1e9), Shape({"n": 100}, 1e8, 1e11)  # memory-bound, 100x the bytes
    points = [on_roof(small, 0.2), on_roof(large, 0.8)]  # 0.5 s at 0.1 s of roofline, 12.5 s at 10 s
    middle = Shape({"n": 10}, 1e7, 1e10)  # 1 s of roofline: 0.5 + 0.9 / 9.9 x 12 s
    estimate = interpolate_efficiency(middle.flops, middle.bytes_accessed, points, ROOFS)
    assert estimate.basis == "interpolated" and estimate.value == pytest.approx(1.0 / (0.5 + 0.9 / 9.9 * 12.0))
    assert list(estimate.neighbours) == points
    # A kernel with a fixed cost per call and a constant cost per unit of work is predicted exactly between its
    # measured sizes and below the smallest (its efficiency falling there as the fixed cost weighs more); past the
    # largest its efficiency is held.
    def fixed_plus_work(n: float) -> Measured:
        shape = Shape({"n": n}, 1e6 * n, 1e9 * n)
        return Measured(shape, 2e-3 + ROOFS.roofline_s(shape.flops, shape.bytes_accessed) / 0.8)

    family = [fixed_plus_work(n) for n in (1, 10, 100, 1000)]
    for n in (0.1, 0.5, 3, 30, 300):
        truth = fixed_plus_work(n)
        estimate = interpolate_efficiency(1e6 * n, 1e9 * n, family, ROOFS)
        assert estimate.basis == ("fixed cost" if n < 1 else "interpolated")
        assert ROOFS.roofline_s(1e6 * n, 1e9 * n) / estimate.value == pytest.approx(truth.seconds, rel=1e-12)
    beyond = interpolate_efficiency(1e6 * 5000, 1e9 * 5000, family, ROOFS)
    assert (beyond.basis, beyond.value) == ("nearest", pytest.approx(100 / (2e-3 + 100 / 0.8)))  # n=1000's


def test_one_outlying_measurement_is_smoothed_away_for_its_neighbours() -> None:
    sizes = (1, 10, 100, 1000, 10000)
    shapes = [Shape({"n": n}, 1e6 * n, 1e9 * n) for n in sizes]
    points = [on_roof(s, 0.1 if n == 100 else 0.5) for s, n in zip(shapes, sizes, strict=True)]  # one busy run
    between = interpolate_efficiency(3e7, 3e10, points, ROOFS)  # between n=10 and n=100
    assert between.basis == "interpolated" and between.value == pytest.approx(0.5)
    itself = interpolate_efficiency(1e8, 1e11, points, ROOFS)  # the outlier's own shape keeps its own figure
    assert (itself.basis, itself.value) == ("measured", pytest.approx(0.1))


def test_outside_the_measured_range_the_nearest_end_holds_unless_the_smallest_show_a_fixed_cost() -> None:
    small, large = Shape({"n": 1}, 1e6, 1e9), Shape({"n": 100}, 1e8, 1e11)
    # The efficiency falls toward the larger shape: no fixed cost to extrapolate, so both ends hold.
    points = [on_roof(small, 0.6), on_roof(large, 0.2)]
    below = interpolate_efficiency(1e5, 1e8, points, ROOFS)
    above = interpolate_efficiency(1e10, 1e13, points, ROOFS)
    assert (below.basis, below.value) == ("nearest", pytest.approx(0.6))
    assert (above.basis, above.value) == ("nearest", pytest.approx(0.2))
    # It rises toward the larger one: 0.5 s at 0.1 s of roofline, 16.7 s at 10 s, a fixed cost of 0.337 s, so a
    # shape of 0.01 s of roofline takes 0.337 + 0.01 x 1.633 s; past the largest, held.
    points = [on_roof(small, 0.2), on_roof(large, 0.6)]
    slope = (10 / 0.6 - 0.5) / 9.9
    below = interpolate_efficiency(1e5, 1e8, points, ROOFS)
    assert (below.basis, below.value) == ("fixed cost", pytest.approx(0.01 / (0.5 - 0.1 * slope + 0.01 * slope)))
    above = interpolate_efficiency(1e10, 1e13, points, ROOFS)
    assert (above.basis, above.value) == ("nearest", pytest.approx(0.6))


def test_a_measured_shape_keeps_its_own_time_and_repeats_take_their_median() -> None:
    shape = matmul(64)
    points = [Measured(shape, t) for t in (1e-3, 3e-3, 2e-3)] + [on_roof(matmul(4096))]
    prediction = predict(shape, matmul(4096), points, ROOFS)
    assert prediction.source.efficiency.basis == "measured"
    assert prediction.source.predicted_s == pytest.approx(2e-3)
    assert prediction.source.measured_s == 2e-3
    assert prediction.target.measured_s == pytest.approx(points[-1].seconds)


def test_without_measurements_the_roofline_is_scaled_by_the_default_efficiency() -> None:
    prediction = predict(matmul(1), matmul(4096), [], ROOFS)
    for estimate in (prediction.source, prediction.target):
        assert estimate.efficiency.basis == "default" and estimate.efficiency.value == DEFAULT_EFFICIENCY
        assert estimate.predicted_s == pytest.approx(estimate.roofline_s / DEFAULT_EFFICIENCY)
        assert estimate.measured_s is None
    assert predict(matmul(1), matmul(2), [], ROOFS, default=0.25).target.efficiency.value == 0.25


def test_the_flops_scaling_peer_scales_the_nearest_shape_in_flops() -> None:
    points = [Measured(matmul(8), 1e-4), Measured(matmul(1024), 1e-2)]
    assert scale_by_flops(matmul(16), points) == pytest.approx(2e-4)
    assert scale_by_flops(matmul(512), points) == pytest.approx(5e-3)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_impossible_figures_are_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        Roofs("x", bad, 1.0)
    if bad != 0.0:  # 0 FLOPs is a pure data-movement shape (test_a_shape_without_flops_is_memory_bound)
        with pytest.raises(ValueError):
            Shape({}, bad, 1.0)
    with pytest.raises(ValueError):
        Shape({}, 1.0, bad)
    with pytest.raises(ValueError):
        Measured(matmul(1), bad)
    with pytest.raises(ValueError):
        interpolate_efficiency(1.0, 1.0, [], ROOFS, default=bad)


def gather(kib: int) -> Shape:
    """An all-gather's counts: no arithmetic, 9 x the per-device buffer in bytes (8 devices)."""
    return Shape({"size_kib": kib}, 0.0, 9.0 * kib * 1024)


def test_a_shape_without_flops_is_pure_data_movement_predicted_from_its_bytes() -> None:
    assert gather(64).intensity == 0.0 and ROOFS.bound(0.0, 1.0) == "memory"
    # Measured at 20 % of the bandwidth roof at 64 KiB and 80 % at 4 MiB: every estimate is bytes / bandwidth
    # over an efficiency interpolated along the same log-roofline-time axis as any other family's.
    points = [on_roof(gather(64), 0.2), on_roof(gather(4096), 0.8)]
    prediction = predict(gather(64), gather(4096), points, ROOFS)
    assert (prediction.source.bound, prediction.target.bound) == ("memory", "memory")
    assert not prediction.crosses_ridge
    assert prediction.source.roofline_s == pytest.approx(9.0 * 64 * 1024 / 10e9)
    assert prediction.source.predicted_s == pytest.approx(points[0].seconds)
    assert prediction.target.predicted_s == pytest.approx(points[1].seconds)
    assert prediction.ratio == pytest.approx(points[1].seconds / points[0].seconds)
    # 512 KiB: on the straight line in time between them, 448 / 4032 of the way from 5x to 1.25x the roofline time
    # of each (5 x 64 and 1.25 x 4096 KiB-worths): 853.3 KiB-worths for 512, an efficiency of 60 %.
    middle = predict(gather(64), gather(512), points, ROOFS).target
    assert middle.efficiency.basis == "interpolated" and middle.efficiency.value == pytest.approx(0.6)
    # Past the largest measured: its efficiency, held.
    beyond = predict(gather(64), gather(65536), points, ROOFS).target
    assert beyond.efficiency.basis == "nearest" and beyond.efficiency.value == pytest.approx(0.8)
    # With nothing measured: the roofline at the default efficiency.
    alone = predict(gather(64), gather(8192), [], ROOFS).target
    assert alone.predicted_s == pytest.approx(9.0 * 8192 * 1024 / 10e9 / DEFAULT_EFFICIENCY)
    # The naive FLOP-scaling peer has nothing to scale by: a clear error, not a log(0).
    with pytest.raises(ValueError, match="pure data-movement"):
        scale_by_flops(gather(1024), points)


def test_on_a_host_with_caches_a_shape_is_predicted_from_the_shapes_at_its_cache_level() -> None:
    """A streaming kernel at 50 % of its roof while half its bytes fit a 16 MiB L3, at 10 % past it (a cache
    cliff, which no line across it predicts): each side of the cliff from its own side's shapes."""
    from kernelwatch.memory_hierarchy import CacheLevel

    mib = 2.0 ** 20
    caches = (CacheLevel("L1", 32 * 1024), CacheLevel("L2", 2 * int(mib)), CacheLevel("L3", 16 * int(mib)))
    cached = Roofs("host", 100e9, 10e9, caches=caches)

    def stream(size_mib: float) -> Shape:
        return Shape({"bytes": size_mib}, size_mib * mib / 8, size_mib * mib)

    def at(size_mib: float, eff: float) -> Measured:
        shape = stream(size_mib)
        return Measured(shape, cached.roofline_s(shape.flops, shape.bytes_accessed) / eff)

    points = [at(8, 0.5), at(16, 0.5), at(24, 0.5), at(40, 0.1), at(56, 0.1)]
    assert cached.level(32 * mib) == "L3" and cached.level(48 * mib) == "DRAM"
    assert cached.level(1 * mib) == "L2" and ROOFS.level(1 * mib) is None
    inside = interpolate_efficiency(stream(30).flops, stream(30).bytes_accessed, points, cached)
    past = interpolate_efficiency(stream(48).flops, stream(48).bytes_accessed, points, cached)
    assert inside.value == pytest.approx(0.5) and inside.basis == "extrapolated"  # L3's own line, past 24 MiB
    assert past.value == pytest.approx(0.1) and {n.shape.params["bytes"] for n in past.neighbours} == {40, 56}
    # Without the caches, one line across the cliff: neither side's efficiency.
    plain = interpolate_efficiency(stream(36).flops, stream(36).bytes_accessed, points, ROOFS)
    assert 0.1 < plain.value < 0.5
    # A level with no measured shape of its own falls back to every shape.
    small = interpolate_efficiency(stream(0.5).flops, stream(0.5).bytes_accessed, points, cached)
    assert small.value == pytest.approx(0.5) and small.basis == "nearest"


def test_past_its_level_s_end_a_shape_follows_the_level_s_line_where_the_variant_goes_on_beyond() -> None:
    """A kernel with a fixed cost per call at one level (L3: 1 ms plus its work at 80 % of the roof) and shapes past
    the cliff (DRAM, 10 %): a shape past L3's largest measured one, still at L3, is on L3's line, not held at the
    largest's efficiency; past the variant's largest shape the efficiency is still held; a line that would put a
    shape above its roof is not followed."""
    from kernelwatch.memory_hierarchy import CacheLevel

    mib = 2.0 ** 20
    caches = (CacheLevel("L1", 32 * 1024), CacheLevel("L2", 2 * int(mib)), CacheLevel("L3", 64 * int(mib)))
    cached = Roofs("host", 100e9, 10e9, caches=caches)

    def stream(size_mib: float) -> Shape:
        return Shape({"bytes": size_mib}, size_mib * mib / 8, size_mib * mib)

    def l3(size_mib: float) -> float:  # the kernel's time at L3: a fixed cost plus its work
        shape = stream(size_mib)
        return 1e-3 + cached.roofline_s(shape.flops, shape.bytes_accessed) / 0.8

    def at(size_mib: float, seconds: float) -> Measured:
        return Measured(stream(size_mib), seconds)

    dram = [at(size, cached.roofline_s(stream(size).flops, stream(size).bytes_accessed) / 0.1) for size in (160, 200)]
    points = [at(8, l3(8)), at(16, l3(16)), *dram]
    assert cached.level(48 * mib) == "L3" and cached.level(160 * mib) != "L3"  # past the cliff
    past_end = interpolate_efficiency(stream(48).flops, stream(48).bytes_accessed, points, cached)
    assert past_end.basis == "extrapolated" and {n.shape.params["bytes"] for n in past_end.neighbours} == {8, 16}
    roofline = cached.roofline_s(stream(48).flops, stream(48).bytes_accessed)
    assert roofline / past_end.value == pytest.approx(l3(48), rel=1e-12)
    # Held as before, the largest L3 shape's efficiency would predict it 1.27x too slow.
    held = roofline / (cached.roofline_s(stream(16).flops, stream(16).bytes_accessed) / l3(16))
    assert held > 1.25 * l3(48)
    # Past the variant's largest shape: held (what lies beyond is a cliff more often than a trend).
    beyond = interpolate_efficiency(stream(400).flops, stream(400).bytes_accessed, points, cached)
    assert beyond.basis == "nearest" and beyond.value == pytest.approx(0.1)
    # A level whose line climbs past the roof (efficiency 0.5 then 0.95 a doubling later): held, not followed above.
    def efficient(size_mib: float, eff: float) -> Measured:
        return at(size_mib, cached.roofline_s(stream(size_mib).flops, stream(size_mib).bytes_accessed) / eff)

    steep = [efficient(8, 0.5), efficient(16, 0.95), *dram]
    over = interpolate_efficiency(stream(48).flops, stream(48).bytes_accessed, steep, cached)
    assert over.basis == "nearest" and over.value == pytest.approx(0.95)


def test_an_output_of_32_mib_or_more_is_a_regime_of_its_own() -> None:
    """glibc serves 32 MiB or more from fresh pages on every call (FRESH_PAGES_BYTES): a shape whose output (half
    its bytes) is that large is at its level "with fresh pages", learned only from such shapes; the labels run in
    order of working set, whatever the caches' sizes."""
    from kernelwatch.memory_hierarchy import CacheLevel
    from service.model.predict import FRESH_PAGES_BYTES

    mib = 2 ** 20
    big_l3 = Roofs("host", 100e9, 10e9, caches=(CacheLevel("L2", 2 * mib), CacheLevel("L3", 480 * mib)))
    assert FRESH_PAGES_BYTES == 32 * mib
    assert big_l3.level(48 * mib) == "L3" and big_l3.level(64 * mib) == "L3, fresh pages"
    assert big_l3.level(2 * 1024 * mib) == "DRAM, fresh pages"
    assert big_l3.level_order() == ["L2", "L3", "L3, fresh pages", "DRAM, fresh pages"]
    small_l3 = Roofs("host", 100e9, 10e9, caches=(CacheLevel("L2", 2 * mib), CacheLevel("L3", 16 * mib)))
    assert small_l3.level_order() == ["L2", "L3", "DRAM", "DRAM, fresh pages"]

    def at(size_mib: float, eff: float) -> Measured:
        shape = Shape({"bytes": size_mib}, size_mib * mib / 8, size_mib * mib)
        return Measured(shape, big_l3.roofline_s(shape.flops, shape.bytes_accessed) / eff)

    # Softmax's sweep here: 4x slower per byte from a 32 MiB output on, with the L3 (nominally) holding it all.
    points = [at(16, 0.4), at(32, 0.4), at(48, 0.4), at(64, 0.1), at(128, 0.1)]
    fresh = Shape({"bytes": 96}, 96 * mib / 8, 96 * mib)
    assert interpolate_efficiency(fresh.flops, fresh.bytes_accessed, points, big_l3).value == pytest.approx(0.1)


def test_runs_that_kept_their_pages_map_afresh_only_what_a_thread_s_arena_cannot_hold() -> None:
    """With glibc's mmap threshold set (`--keep-pages`), an output is mapped afresh from the threshold or from
    64 MiB, the largest a thread's arena holds, whichever is smaller; unset, from glibc's dynamic maximum, 32 MiB."""
    from kernelwatch.memory_hierarchy import CacheLevel
    from service.model.predict import fresh_pages_bytes

    mib = 2 ** 20
    assert fresh_pages_bytes(None) == 32 * mib
    assert fresh_pages_bytes(2 ** 30) == 64 * mib and fresh_pages_bytes(16 * mib) == 16 * mib
    caches = (CacheLevel("L2", 2 * mib), CacheLevel("L3", 480 * mib))
    kept = Roofs("host", 100e9, 10e9, caches=caches, fresh_pages_bytes=fresh_pages_bytes(2 ** 30))
    assert kept.level(96 * mib) == "L3" and kept.level(128 * mib) == "L3, fresh pages"
    assert kept.level_order() == ["L2", "L3", "L3, fresh pages", "DRAM, fresh pages"]
    between = Roofs("host", 100e9, 10e9, caches=(CacheLevel("L2", 2 * mib), CacheLevel("L3", 48 * mib)),
                    fresh_pages_bytes=fresh_pages_bytes(2 ** 30))
    assert between.level_order() == ["L2", "L3", "DRAM", "DRAM, fresh pages"]
    with pytest.raises(ValueError, match="fresh-pages output size"):
        Roofs("host", 100e9, 10e9, fresh_pages_bytes=0)


def test_a_shape_alone_past_a_cliff_is_stepped_across_it_as_other_variants_step() -> None:
    """Softmax's 2048x4096, the only shape of its sweep past its cliff: its variant has nothing at that level to
    learn from, so it takes the last shape before the cliff times the step other kernels of the host take across
    the same cliff (two norms here, 5x and 4x slower per roofline byte past it: the geometric median, 4.5x)."""
    from kernelwatch.memory_hierarchy import CacheLevel
    from service.model.predict import cliff_steps, family_cliff_steps

    mib = 2.0 ** 20
    caches = (CacheLevel("L1", 32 * 1024), CacheLevel("L2", 2 * int(mib)), CacheLevel("L3", 32 * int(mib)))
    cached = Roofs("host", 100e9, 10e9, caches=caches)

    def at(size_mib: float, eff: float) -> Measured:
        shape = Shape({"bytes": size_mib}, size_mib * mib / 8, size_mib * mib)
        return Measured(shape, cached.roofline_s(shape.flops, shape.bytes_accessed) / eff)

    norm_a = [at(16, 0.5), at(32, 0.5), at(128, 0.1), at(256, 0.1)]
    norm_b = [at(8, 0.4), at(48, 0.4), at(96, 0.1), at(512, 0.09)]
    steps = cliff_steps([(norm_a, cached), (norm_b, cached)])
    assert steps[("L3", "DRAM, fresh pages")] == pytest.approx(math.sqrt(0.2 * 0.25))
    # A compute-bound kernel's efficiency does not fall off a memory cliff: its shapes teach no step.
    def compute_bound(size_mib: float, eff: float) -> Measured:
        shape = Shape({"bytes": size_mib}, size_mib * mib * 100, size_mib * mib)
        return Measured(shape, cached.roofline_s(shape.flops, shape.bytes_accessed) / eff)

    matmul = [compute_bound(16, 0.9), compute_bound(32, 0.9), compute_bound(128, 0.9)]
    assert cached.bound(matmul[0].shape.flops, matmul[0].shape.bytes_accessed) == "compute"
    assert cliff_steps([(norm_a, cached), (norm_b, cached), (matmul, cached)]) == steps
    # One variant's steps between the levels it has: the norm with an L2 shape steps L2 -> L3 too.
    assert cliff_steps([([at(1, 0.8), at(16, 0.4)], cached)]) == {("L2", "L3"): pytest.approx(0.5)}
    # The kernel's own family's step where one of its other variants was measured across the cliff; the host's
    # for the cliffs it was not.
    fused, small = [at(16, 0.5), at(128, 0.4)], [at(1, 0.8), at(16, 0.4)]
    host = [(norm_a, cached), (norm_b, cached), (fused, cached), (small, cached)]
    assert cliff_steps(host)[("L3", "DRAM, fresh pages")] == pytest.approx(0.25)  # of 0.2, 0.25 and 0.8
    assert family_cliff_steps([(fused, cached)], host) == {("L3", "DRAM, fresh pages"): pytest.approx(0.8),
                                                           ("L2", "L3"): pytest.approx(0.5)}
    softmax = [at(4, 0.6), at(16, 0.6), at(32, 0.6)]
    past = at(128, 0.6).shape
    stepped = interpolate_efficiency(past.flops, past.bytes_accessed, softmax, cached, steps=steps)
    assert stepped.basis == "across a cliff"
    assert stepped.value == pytest.approx(0.6 * math.sqrt(0.2 * 0.25))
    assert {n.shape.params["bytes"] for n in stepped.neighbours} == {32}
    # Without steps (or with none for this cliff), as before: the nearest end of every shape.
    assert interpolate_efficiency(past.flops, past.bytes_accessed, softmax, cached).value == pytest.approx(0.6)
    assert interpolate_efficiency(past.flops, past.bytes_accessed, softmax, cached,
                                  steps={("L2", "L3"): 0.5}).value == pytest.approx(0.6)
    # Backwards across the cliff: a small shape of a variant measured only past it is divided by the step.
    big_only = [at(128, 0.1), at(256, 0.1)]
    small = at(16, 0.1).shape
    back = interpolate_efficiency(small.flops, small.bytes_accessed, big_only, cached, steps=steps)
    assert back.value == pytest.approx(0.1 / math.sqrt(0.2 * 0.25))
