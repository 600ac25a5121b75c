"""Numbers as people read them: times in ns/µs/ms/s, counts with SI prefixes, and one colour per class name.

Pure; registered as Jinja filters by the blueprints.
"""

from __future__ import annotations

import zlib

from service.model.result_roofline import roof_fraction_text

_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_seconds(seconds: float | None) -> str:
    """A time with the unit that puts it between 1 and 1000, three significant digits."""
    if seconds is None:
        return "–"
    magnitude = abs(seconds)
    for factor, unit in _TIME_UNITS:
        if magnitude >= factor:
            return f"{seconds / factor:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_ns(nanoseconds: float | None) -> str:
    return "–" if nanoseconds is None else format_seconds(nanoseconds * 1e-9)


def format_si(value: float | None, unit: str = "") -> str:
    """``1.68e7, "FLOP"`` → ``16.8 MFLOP``."""
    if value is None:
        return "–"
    for factor, prefix in _SI:
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}".rstrip()
    return f"{value:.3g} {unit}".rstrip()


def format_value(value: float | None, unit: str) -> str:
    """A measured value in its series' unit: times scaled, the rest with their unit."""
    if value is None:
        return "–"
    if unit == "s":
        return format_seconds(value)
    return f"{value:.4g} {unit}" if unit not in ("", "1") else f"{value:.4g}"


def format_share(share: float | None) -> str:
    if share is None:
        return "–"
    return f"{share:.1%}" if share >= 0.001 else "<0.1%"


def format_ratio(value: float | None) -> str:
    """How many times one count is another's: ``1.8`` → ``1.8×``."""
    return "–" if value is None else f"{value:.3g}×"


def format_relative(value: float | None) -> str:
    """A relative difference, signed: ``0.8`` → ``+80 %``, ``-0.5`` → ``-50 %``."""
    return "–" if value is None else f"{100 * value:+.0f} %"


def format_roof_fraction(fraction: float | None) -> str:
    """An achieved fraction of a roof on a page: one decimal, "on the roof" or "above the roof" past 100 %
    (service/model/result_roofline.py roof_fraction_text says why)."""
    return roof_fraction_text(fraction, decimals=1, sep=" ")


def format_fraction(fraction: float | None) -> str:
    """A fraction of a peak, not clipped at 100 % (past it, a figure is wrong, which is worth seeing)."""
    if fraction is None:
        return "–"
    return f"{100 * fraction:.3g} %"


# Classes of instructions and slot families, named in the parsers, get fixed colours so a listing, its mix bar
# and the op-time chart agree; a name not listed here gets a stable colour from its hash.
_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d",
            "#bab0ac", "#17becf", "#8c6d31")
CLASS_COLOURS = {
    # x86 classes
    "vector_fma": "#e45756", "vector_mul": "#f58518", "vector_add": "#eeca3b", "vector_other": "#b279a2",
    "load": "#4c78a8", "store": "#72b7b2", "gather": "#9d755d", "scalar_arith": "#54a24b", "branch": "#8c6d31",
    "other": "#bab0ac",
    # SASS categories
    "mma": "#e45756", "fma": "#f58518", "fp_arith": "#eeca3b", "int_arith": "#54a24b", "load_global": "#4c78a8",
    "store_global": "#72b7b2", "load_shared": "#17becf", "store_shared": "#9ecae9", "load_const": "#c6dbef",
    "other_memory": "#9d755d", "async_copy": "#ff9da6", "barrier": "#d62728", "predicate": "#b279a2",
    "move": "#c7c7c7", "convert": "#dbdb8d",
    # TPU LLO slot families
    "scalar": "#54a24b", "vector_alu": "#eeca3b", "vector_load": "#4c78a8", "vector_store": "#72b7b2",
    "mxu_push": "#ff9da6", "mxu_matmul": "#e45756", "mxu_pop": "#f58518", "xlu": "#b279a2", "eup": "#9d755d",
    "dma": "#17becf",
    # op-table categories
    "fusion": "#4c78a8", "loop_fusion": "#4c78a8", "input_fusion": "#72b7b2", "output_fusion": "#54a24b",
    "custom_fusion": "#b279a2", "convolution": "#e45756", "dot": "#e45756", "library": "#f58518",
}


def class_colour(name: str) -> str:
    return CLASS_COLOURS.get(name) or _PALETTE[zlib.crc32(name.encode()) % len(_PALETTE)]
