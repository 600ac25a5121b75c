"""xprof's static LLO analysis, mode ``bundle_util`` (JSON) → the same program records a bundle listing gives,
holding what the analysis reports: bundle count, per-unit used/available slots, spill counts.

``xprof get_llo_static_analysis <xplane> --mode=bundle_util`` (FORMATS.md "TPU LLO") answers an object, or a list
of them, with ``total_bundles`` and ``<unit>_used``/``<unit>_avail`` for scalar_alu, vector_alu, vector_load,
vector_store, vector_eup and mxu; keys starting with ``_`` are comments. The MXU count is not split into push,
matmul and pop, so it stays in ``slot_usage`` only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runners.parsers.llo_records import LloParseError, LloProgram, SlotUsage, read_capped
from runners.parsers.text_guard import MAX_LINE_CHARS, checked_lines

MAX_JSON_BYTES = 64 << 20  # json.loads holds the whole document, many times its size: not the listings' 256 MiB

# bundle_util unit → op family
UNIT_FAMILY = {
    "scalar_alu": "scalar", "vector_alu": "vector_alu", "vector_load": "vector_load", "vector_store": "vector_store",
    "vector_eup": "eup",
}


def _count(value: Any, key: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LloParseError(source, 0, f"{key} is not a non-negative integer: {str(value)[:40]!r}")
    return value


def _from_bundle_util(obj: Any, name: str, source: str) -> LloProgram:
    if not isinstance(obj, dict):
        raise LloParseError(source, 0, "bundle_util entry is not a JSON object")
    if "total_bundles" not in obj:
        raise LloParseError(source, 0, "bundle_util entry has no total_bundles")
    total = _count(obj["total_bundles"], "total_bundles", source)
    usage: dict[str, SlotUsage] = {}
    for key, value in obj.items():
        if isinstance(key, str) and key.endswith("_used"):
            unit = key[: -len("_used")]
            used = _count(value, key, source)
            available = _count(obj[f"{unit}_avail"], f"{unit}_avail", source) if f"{unit}_avail" in obj else None
            if available is not None and used > available:
                raise LloParseError(source, 0, f"{unit}: {used} used of {available} available")
            usage[unit] = SlotUsage(used, available)
    spills = {key: _count(value, key, source) for key, value in obj.items()
              if "spill" in key and not key.startswith("_") and not isinstance(value, str)}
    label = obj.get("program", obj.get("name"))
    return LloProgram(
        name=label if isinstance(label, str) and label else name, source=source, form="bundle_util",
        bundle_count=total, op_count=None,
        ops_per_family={UNIT_FAMILY[unit]: slot.used for unit, slot in usage.items() if unit in UNIT_FAMILY},
        mxu_units=(), ops_per_bundle={}, mxu_bundle_share=None, loops=(), spills=spills, slot_usage=usage,
        ignored_lines=0, operands=(), allocations={}, bundles=(),
    )


def parse_bundle_util_json(text: str, source: str = "<bundle_util>", program: str | None = None) -> list[LloProgram]:
    """xprof ``get_llo_static_analysis --mode=bundle_util`` JSON (an object, or a list of them) → program records
    holding what it reports: bundle count, per-unit used/available slots, spill counts. Keys starting with ``_`` are
    comments."""
    checked_lines(text, source, LloParseError, MAX_LINE_CHARS)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LloParseError(source, exc.lineno, f"not JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # over-long integers, pathological nesting
        raise LloParseError(source, 0, f"not usable JSON: {type(exc).__name__}") from None
    entries = document if isinstance(document, list) else [document]
    if not entries:
        raise LloParseError(source, 0, "empty bundle_util list")
    default = program or (source if source.startswith("<") else Path(source).stem)
    return [_from_bundle_util(entry, default if len(entries) == 1 else f"{default}#{i}", source)
            for i, entry in enumerate(entries)]


def parse_bundle_util_file(path: str | Path, max_bytes: int = MAX_JSON_BYTES,
                           program: str | None = None) -> list[LloProgram]:
    return parse_bundle_util_json(read_capped(path, max_bytes), str(path), program)
