"""The cache-aware roofline's memory roofs: which bandwidth bounds a working set, the levels drawn, and the
cache sizes read from sysfs."""

from __future__ import annotations

import pytest

from kernelwatch.hardware import Calibration, host_hardware
from kernelwatch.memory_hierarchy import (
    DRAM,
    FOOTPRINT_KEY,
    BandwidthPoint,
    CacheLevel,
    bandwidth_bound,
    caches_from_sysfs,
    envelope,
    format_bytes,
    level_of,
    memory_levels,
    parse_size,
    working_set,
)
from service.model.predict import Roofs
from service.model.result_roofline import result_figures

KIB, MIB = 2**10, 2**20
# A host like this one: L1 48 KiB and L2 1 MiB per core on two cores, a shared 32 MiB L3.
CACHES = (CacheLevel("L1", 96 * KIB), CacheLevel("L2", 2 * MIB), CacheLevel("L3", 32 * MIB))
CURVE = (BandwidthPoint(16 * KIB, 300e9), BandwidthPoint(64 * KIB, 310e9), BandwidthPoint(256 * KIB, 180e9),
         BandwidthPoint(1 * MIB, 250e9), BandwidthPoint(16 * MIB, 200e9), BandwidthPoint(64 * MIB, 60e9),
         BandwidthPoint(128 * MIB, 40e9))


def test_the_envelope_raises_a_dip_to_what_a_larger_working_set_reached() -> None:
    raised = envelope(CURVE)
    assert [p.bytes_per_s for p in raised] == [310e9, 310e9, 250e9, 250e9, 200e9, 60e9, 40e9]
    rates = [p.bytes_per_s for p in raised]
    assert rates == sorted(rates, reverse=True)


def test_a_working_set_is_bound_by_the_nearest_measured_point_at_or_below_it() -> None:
    assert bandwidth_bound(CURVE, 1 * KIB) == 310e9  # below every point: the first (enveloped) point's
    assert bandwidth_bound(CURVE, 16 * KIB) == 310e9
    assert bandwidth_bound(CURVE, 300 * KIB) == 250e9  # the 256 KiB dip is noise: the envelope's 250
    assert bandwidth_bound(CURVE, 20 * MIB) == 200e9  # in L3
    assert bandwidth_bound(CURVE, 40 * MIB) == 200e9  # just past L3 still hits it in part: not DRAM's 60
    assert bandwidth_bound(CURVE, 100 * MIB) == 60e9
    assert bandwidth_bound(CURVE, 10 * 2**30) == 40e9  # past the ladder: its last point
    # A bound never rises with the working set.
    sizes = [2**k for k in range(8, 34)]
    bounds = [bandwidth_bound(CURVE, s) for s in sizes]
    assert bounds == sorted(bounds, reverse=True)
    with pytest.raises(ValueError):
        bandwidth_bound((), 1)


def test_the_levels_name_where_data_lives_and_each_has_a_roof() -> None:
    assert level_of(CACHES, 64 * KIB) == "L1" and level_of(CACHES, 96 * KIB) == "L1"
    assert level_of(CACHES, 97 * KIB) == "L2" and level_of(CACHES, 20 * MIB) == "L3"
    assert level_of(CACHES, 33 * MIB) == DRAM and level_of((), 1) == DRAM
    levels = memory_levels(CURVE, CACHES)
    assert [(lv.name, lv.capacity_bytes) for lv in levels] == [("L1", 96 * KIB), ("L2", 2 * MIB),
                                                               ("L3", 32 * MIB), (DRAM, None)]
    # Each at its level's middle (half the capacity), DRAM at the largest working set measured.
    assert [lv.bytes_per_s for lv in levels] == [310e9, 250e9, 200e9, 40e9]
    assert memory_levels((), CACHES) == ()


def test_sysfs_caches_count_each_instance_the_process_may_use_once() -> None:
    entries = [("1", "Data", "48K", "0"), ("1", "Instruction", "32K", "0"), ("2", "Unified", "1024K", "0"),
               ("3", "Unified", "32768K", "0-1"),
               ("1", "Data", "48K", "1"), ("1", "Instruction", "32K", "1"), ("2", "Unified", "1024K", "1"),
               ("3", "Unified", "32768K", "0-1")]
    assert caches_from_sysfs(entries, {0, 1}) == CACHES
    # Pinned to one core: its own L1 and L2, the shared L3.
    assert caches_from_sysfs(entries, {1}) == (CacheLevel("L1", 48 * KIB), CacheLevel("L2", 1 * MIB),
                                               CacheLevel("L3", 32 * MIB))
    assert parse_size("105 MiB (1 instance)") == 105 * MIB and parse_size("48K") == 48 * KIB
    assert parse_size("2048") == 2048
    assert format_bytes(48 * KIB) == "48 KiB" and format_bytes(1.5 * 2**30) == "1.5 GiB"


def test_a_result_is_measured_against_its_own_level() -> None:
    host = host_hardware(Calibration(1e12, 40e9, "float32", bandwidth=CURVE, caches=CACHES))
    # 10 MiB streamed in 50 us: 210 GB/s, above DRAM's 40 but under L3's 200 + its working set's bound.
    small = result_figures(host, "float32", 0.0, 10 * MIB, 50e-6)
    assert small is not None and small.peak_bytes_per_s == 250e9 and not small.above
    assert "the bandwidth measured at a 10 MiB working set (in L3)" in small.peak_source
    large = result_figures(host, "float32", 0.0, 512 * MIB, 0.02)
    assert large is not None and large.peak_bytes_per_s == 40e9
    assert large.achieved_fraction == pytest.approx(512 * MIB / 40e9 / 0.02)
    # An older calibration (one roof) keeps its one figure.
    old = result_figures(host_hardware(Calibration(1e12, 40e9, "float32")), "float32", 0.0, 10 * MIB, 50e-6)
    assert old is not None and old.peak_bytes_per_s == 40e9 and old.above


def test_predictions_cross_a_cache_cliff_in_the_roofline_time() -> None:
    roofs = Roofs("host", 1e12, 40e9, CURVE)
    inside, outside = roofs.roofline_s(0.0, 16 * MIB), roofs.roofline_s(0.0, 128 * MIB)
    # 8x the bytes, but past L3: the roofline time grows by 8 x 200/40 = 40x, not 8x.
    assert outside / inside == pytest.approx(40.0)
    assert Roofs("host", 1e12, 40e9).roofline_s(0.0, 128 * MIB) / Roofs("host", 1e12, 40e9).roofline_s(
        0.0, 16 * MIB) == pytest.approx(8.0)
    # The ridge of the shape's own level: 10 FLOP/B is under DRAM's ridge (25) and over L1's (3.2).
    assert roofs.bound(10 * 32 * KIB, 32 * KIB) == "compute" and roofs.bound(10 * 256 * MIB, 256 * MIB) == "memory"


def test_the_working_set_is_the_smaller_of_the_traffic_and_the_footprint() -> None:
    assert working_set(64 * MIB, {FOOTPRINT_KEY: 32 * MIB}) == 32 * MIB  # two passes over 32 MiB of data
    assert working_set(8 * MIB, {FOOTPRINT_KEY: 32 * MIB}) == 8 * MIB  # touches a part of what it holds
    assert working_set(8 * MIB, {}) == working_set(8 * MIB, None) == working_set(8 * MIB, {FOOTPRINT_KEY: 0}) == 8 * MIB
    host = host_hardware(Calibration(1e12, 40e9, "float32", bandwidth=CURVE, caches=CACHES))
    # A norm that streams 64 MiB over a 16 MiB footprint lives in L3, not DRAM.
    by_traffic = result_figures(host, "float32", 0.0, 64 * MIB, 1e-3)
    by_footprint = result_figures(host, "float32", 0.0, 64 * MIB, 1e-3, working_set_bytes=16 * MIB)
    assert by_traffic is not None and by_footprint is not None
    assert (by_traffic.peak_bytes_per_s, by_footprint.peak_bytes_per_s) == (60e9, 200e9)
    assert "the bandwidth measured at a 16 MiB working set (in L3)" in by_footprint.peak_source
