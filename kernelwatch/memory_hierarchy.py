"""A CPU host's memory hierarchy as its calibration measured it, and the memory roof a working set is bound by:
the cache-aware roofline (Ilic, Pratas and Sousa, "Cache-aware Roofline model: Upgrading the loft", IEEE CAL
2014), where each level of the hierarchy has a bandwidth roof of its own and a kernel is bound by the level its
data lives in.

Pure: cache sizes and a measured bandwidth curve in, roofs out. The measuring is runners/calibrate.py's.

The calibration times one streaming pass (``v + 1``, in place, inside one compiled loop) at a ladder of working
sets from a fraction of L1 to several times the last-level cache. That curve, not one figure per level, is what a
bound is read from, because a level's bandwidth is not one number: a working set just past a cache's capacity
still hits it in part, and XLA splits a large elementwise op across threads where it leaves a small one on one,
so the measured curve has shoulders a per-level figure would cut through. Reading the bound is then:

- the curve is made an upper envelope first (each point raised to the best of every larger working set's), since
  a larger working set never has more bandwidth than a smaller one on real hardware, and a point below the
  envelope is the measurement's noise, not the host;
- a working set is bound by the envelope at the largest measured working set not above it (the nearest point on
  its left: more bandwidth than itself, never less); smaller than every measured point, the first point's.

A kernel's working set is the smaller of its bytes accessed (what it streams through the hierarchy) and its
footprint (its arguments, outputs and temporaries as XLA's memory analysis sizes them, which the runner records
in the result's cost figures under ``FOOTPRINT_KEY``): a kernel that reads its data twice streams twice its
footprint but its data still lives in the level its footprint fits, and the smaller estimate picks the faster
level, which keeps the roof a bound. The flag the ingest raises for a result faster than its roof is where a
case this misses shows.

The levels (L1, L2, L3, DRAM) are what the pages draw and name: each level's roof is the envelope at the middle
of the level (half its capacity; for DRAM the largest measured working set), the bandwidth a kernel whose data
fits that level streams at. Capacities are aggregates over the CPUs the process may use: a level private to each
core (L1, L2) holds as much as all of them together when XLA spreads one op over every core.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

DRAM = "DRAM"
FOOTPRINT_KEY = "footprint bytes"  # a result's cost figure: XLA's arguments + outputs - aliased + temporaries
MAX_POINTS = 64  # a calibration's curve: a few dozen working sets at most
MAX_CACHE_LEVELS = 8


@dataclass(frozen=True)
class BandwidthPoint:
    working_set_bytes: int  # the data the measured loop keeps resident (its array, updated in place)
    bytes_per_s: float  # bytes moved (read plus write) per second at that working set

    def __post_init__(self) -> None:
        if self.working_set_bytes < 1:
            raise ValueError(f"a working set must be at least one byte, got {self.working_set_bytes}")
        if not (self.bytes_per_s > 0 and math.isfinite(self.bytes_per_s)):
            raise ValueError(f"a bandwidth must be positive and finite, got {self.bytes_per_s!r}")


@dataclass(frozen=True)
class CacheLevel:
    name: str  # "L1", "L2", "L3": data (or unified) caches only
    size_bytes: int  # aggregate over the CPUs the process may use

    def __post_init__(self) -> None:
        if self.size_bytes < 1:
            raise ValueError(f"cache {self.name} has no size")


@dataclass(frozen=True)
class MemoryLevel:
    """One roof of the cache-aware roofline."""

    name: str
    capacity_bytes: int | None  # None: DRAM, bounded by nothing the roofline needs
    bytes_per_s: float


def envelope(curve: Iterable[BandwidthPoint]) -> tuple[BandwidthPoint, ...]:
    """The curve sorted by working set, each point raised to the best bandwidth of any larger working set (see the
    module docstring); one point per working set (the best)."""
    best: dict[int, float] = {}
    for p in curve:
        best[p.working_set_bytes] = max(best.get(p.working_set_bytes, 0.0), p.bytes_per_s)
    sizes = sorted(best)
    raised: list[BandwidthPoint] = []
    running = 0.0
    for size in reversed(sizes):
        running = max(running, best[size])
        raised.append(BandwidthPoint(size, running))
    return tuple(reversed(raised))


def bandwidth_bound(curve: Sequence[BandwidthPoint], working_set_bytes: float) -> float:
    """The most bytes/s a kernel streaming ``working_set_bytes`` can move on this host (module docstring)."""
    points = envelope(curve)
    if not points:
        raise ValueError("a bandwidth curve needs at least one point")
    sizes = [p.working_set_bytes for p in points]
    i = bisect.bisect_right(sizes, working_set_bytes) - 1
    return points[max(i, 0)].bytes_per_s


def level_of(caches: Sequence[CacheLevel], working_set_bytes: float) -> str:
    """The smallest level that holds the working set: "L1", "L2", ..., or DRAM past the last cache."""
    for cache in sorted(caches, key=lambda c: c.size_bytes):
        if working_set_bytes <= cache.size_bytes:
            return cache.name
    return DRAM


def memory_levels(curve: Sequence[BandwidthPoint], caches: Sequence[CacheLevel]) -> tuple[MemoryLevel, ...]:
    """One roof per level, fastest first: each cache's at half its capacity, DRAM's at the largest measured
    working set (module docstring). Without caches, the one DRAM roof."""
    points = envelope(curve)
    if not points:
        return ()
    levels = [MemoryLevel(c.name, c.size_bytes, bandwidth_bound(points, c.size_bytes / 2))
              for c in sorted(caches, key=lambda c: c.size_bytes)]
    levels.append(MemoryLevel(DRAM, None, points[-1].bytes_per_s))
    return tuple(levels)


def _count_cpus(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def parse_size(text: str) -> int:
    """A sysfs or lscpu cache size: "48K", "2048K", "32M", "1 MiB", "105 MiB (1 instance)"."""
    cleaned = text.strip().split("(")[0].strip().replace(" ", "").upper().removesuffix("B").removesuffix("I")
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    if cleaned and cleaned[-1] in units:
        return int(float(cleaned[:-1]) * units[cleaned[-1]])
    return int(cleaned)


def caches_from_sysfs(entries: Iterable[tuple[str, str, str, str]], cpus: Iterable[int]) -> tuple[CacheLevel, ...]:
    """Cache levels from ``/sys/devices/system/cpu/cpu*/cache/index*`` entries, each (level, type, size,
    shared_cpu_list) as the files hold them, for a process that may run on ``cpus``: data and unified caches,
    each distinct instance (by the CPUs that share it) counted once, so a per-core L2 on two usable cores counts
    twice and a shared L3 once."""
    allowed = set(cpus)
    instances: dict[int, dict[frozenset[int], int]] = {}
    for level, kind, size, shared in entries:
        if kind.strip() not in ("Data", "Unified"):
            continue
        sharing = frozenset(_count_cpus(shared))
        if allowed and not sharing & allowed:
            continue
        instances.setdefault(int(level), {})[sharing] = parse_size(size)
    levels = [CacheLevel(f"L{level}", sum(sizes.values())) for level, sizes in sorted(instances.items())]
    return tuple(c for c in levels if c.size_bytes > 0)[:MAX_CACHE_LEVELS]


def format_bytes(n: float) -> str:
    """A size in binary units, as cache sizes are written: 48 KiB, 2 MiB, 1.5 GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def working_set(bytes_accessed: float, cost: Mapping[str, float] | None) -> float:
    """The working set a result's memory roof is chosen by (module docstring)."""
    footprint = (cost or {}).get(FOOTPRINT_KEY)
    if footprint is not None and footprint > 0:
        return min(float(footprint), bytes_accessed)
    return bytes_accessed
