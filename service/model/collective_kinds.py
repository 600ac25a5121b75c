"""Which collective a benchmark measures, from its name, and the buffer size its bandwidth is reckoned over.

The bandwidth model (service/model/roofline.py: ``collective_bandwidth``, ``bus_factor``) needs the collective's
kind, the per-rank buffer size S in the nccl-tests convention, and the rank count. None of these is stored as
such: a benchmark's result keeps its name, its params and its environment. This module is the one place that
reads them out of those, so that the result page and anything after it agree on what a name means.

Pure: strings and mappings in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.model.roofline import Collective

# A benchmark name's words (split on "_", "-", " ", "."), as consecutive runs → the collective. Longest first, so
# "reduce_scatter" is never read as a "reduce", nor "all_reduce" as one.
_WORDS: tuple[tuple[tuple[str, ...], Collective], ...] = (
    (("all", "reduce"), "all-reduce"),
    (("allreduce",), "all-reduce"),
    (("psum",), "all-reduce"),
    (("all", "gather"), "all-gather"),
    (("allgather",), "all-gather"),
    (("reduce", "scatter"), "reduce-scatter"),
    (("reducescatter",), "reduce-scatter"),
    (("psum", "scatter"), "reduce-scatter"),
    (("all", "to", "all"), "all-to-all"),
    (("alltoall",), "all-to-all"),
)


def _words(name: str) -> list[str]:
    for separator in "-. /":
        name = name.replace(separator, "_")
    return [w for w in name.lower().split("_") if w]


def collective_kind(benchmark: str) -> Collective | None:
    """The collective a benchmark measures, from its name: ``all_reduce`` and ``ring_all_reduce_ppermute`` (an
    all-reduce built from ppermutes) → ``"all-reduce"``, ``all_gather`` → ``"all-gather"``, ``reduce_scatter``
    → ``"reduce-scatter"``; None for a name that names no collective (``rmsnorm``, ``matmul``).

    Where a name holds two (``psum_scatter`` is a reduce-scatter, not an all-reduce), the longest match wins;
    a bare "reduce" or "broadcast" is not matched, since names with them are mostly single-device work
    (``reduce_sum``, ``broadcast_multiply``).
    """
    words = _words(benchmark)
    best: tuple[int, Collective] | None = None
    for pattern, kind in _WORDS:
        n = len(pattern)
        if any(tuple(words[i:i + n]) == pattern for i in range(len(words) - n + 1)):
            if best is None or n > best[0]:
                best = (n, kind)
    return best[1] if best is not None else None


# How the bus factor of roofline.bus_factor reads, for a page to show beside the number.
_FORMULAS: dict[str, str] = {
    "all-reduce": "2(n−1)/n", "reduce-scatter": "(n−1)/n", "all-gather": "(n−1)/n", "all-to-all": "(n−1)/n",
    "broadcast": "1", "reduce": "1",
}


def bus_factor_formula(collective: Collective) -> str:
    return _FORMULAS[collective]


def collective_size_bytes(params: Mapping[str, Any]) -> float | None:
    """The buffer size S (bytes) of a collective's result, from its params: ``size_bytes`` where given, else
    ``size_kib`` × 1024 (kernels_under_test/collectives.py's grid), else None.

    The suite's cases know S exactly (``Case.bytes_moved``) but the runner does not store it: it only turns it
    into the ``algbw`` metric's samples. For that suite ``size_kib * 1024`` is the same number (each case's
    bytes_moved is the per-device buffer of ``size_kib`` KiB of float32), so it is read from the params.
    """
    for key, scale in (("size_bytes", 1.0), ("size_kib", 1024.0), ("size_mib", 1024.0 ** 2)):
        value = params.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value) * scale
    return None
