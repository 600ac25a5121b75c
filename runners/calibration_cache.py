"""Where a runner keeps its host's calibrations: one JSON file of calibrations by key (runners/calibrate.py
calibration_key: one per host and environment), so that a host is measured once, not once per run.

The runner owns the file (runners/session.py): a benchmark process never sees it. On a miss the runner has the
host measured by a calibrate-only benchmark process, which imports nothing of the checkout, and keeps what it
sends only when it is well formed: a hostile repository's code cannot write the roofs of later runs. A missing
or unreadable file is an empty one (the next calibration rewrites it whole); writes go to a temporary file
renamed over the old, so a reader never sees half of one.

``KERNELWATCH_CALIBRATION_CACHE`` names the file; by default it is ``$XDG_CACHE_HOME/kernelwatch/
calibrations.json`` (``~/.cache`` without XDG_CACHE_HOME). Delete it to have the host measured again (after a
BIOS, kernel or power-setting change the key cannot see).

A calibration measured while the host stayed busy (no quiet spell in its wait: another job, a parallel build) is
kept *provisional*: its roofs may sit low, and every later result of a fast kernel would then read as above its
roof (a demo run beside another's build had its 512^3 fp32 matmuls flagged in every run after). The next runs
measure the host again, up to MAX_REMEASURES times, each keeping the faster of the two per figure (a roof is the
best the host does), until one is measured quiet.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernelwatch.hardware import Calibration, calibration_from_manifest
from kernelwatch.memory_hierarchy import MAX_CACHE_LEVELS, MAX_POINTS

CACHE_SETTING = "KERNELWATCH_CALIBRATION_CACHE"
MAX_ENTRIES = 64  # hosts x environments a runner has seen; the oldest go first
MAX_REMEASURES = 3  # of a provisional calibration: past that a host that is never quiet keeps what it has
# An entry's own fields, beside the calibration's figures; never part of a run's manifest.
KEPT_AT, PROVISIONAL, REMEASURES = "kept_at", "provisional", "remeasures"
_KEY = re.compile(r"^[0-9a-f]{32}$")


def cache_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(CACHE_SETTING):
        return Path(env[CACHE_SETTING])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "kernelwatch" / "calibrations.json"


def load(path: Path) -> dict[str, dict[str, Any]]:
    """The kept calibrations by key; entries that are not well-formed calibrations are left out."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested past Python's stack
        print(f"kernelwatch: ignoring the unreadable calibration cache {path}: {type(exc).__name__}",
              file=sys.stderr)
        return {}
    if not isinstance(raw, dict):
        return {}
    return {key: entry for key, entry in raw.items()
            if isinstance(key, str) and _KEY.match(key) and isinstance(entry, dict) and well_formed(entry)}


def well_formed(figures: Mapping[str, Any]) -> bool:
    """A calibration worth keeping: it parses, every rate is positive and finite, and its lists are short. Anything
    else in an entry (a number where a list goes: a file edited by hand, or by another program) makes it not
    well formed, never an error: the host is then measured again."""
    lists = [figures.get(name) for name in ("bandwidth", "caches")]
    if not all(value is None or isinstance(value, list) for value in lists):
        return False
    if len(lists[0] or ()) > MAX_POINTS or len(lists[1] or ()) > MAX_CACHE_LEVELS:
        return False
    try:
        calibration = calibration_from_manifest(dict(figures))
    except (TypeError, ValueError, KeyError, AttributeError):
        return False
    if calibration is None:
        return False
    rates = [calibration.flops_per_s, calibration.bytes_per_s, *(v for _, v in calibration.flops_by_dtype)]
    return all(math.isfinite(r) and r > 0 for r in rates)


def figures_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A kept entry's calibration figures, as a run's manifest carries them (the entry's own fields left out)."""
    return {k: v for k, v in entry.items() if k not in (KEPT_AT, PROVISIONAL, REMEASURES)}


def needs_measuring(entry: Mapping[str, Any] | None) -> bool:
    """Whether the host is to be measured (again): nothing kept, or a provisional calibration measured again
    fewer than MAX_REMEASURES times."""
    if entry is None:
        return True
    remeasures = entry.get(REMEASURES, 0)
    return entry.get(PROVISIONAL) is True and isinstance(remeasures, int) and remeasures < MAX_REMEASURES


def faster(kept: Mapping[str, Any], measured: Mapping[str, Any]) -> dict[str, Any]:
    """Two calibrations of one host as one: each figure the higher (a roof is the best the host does; a busy
    host only ever measures it low). The bandwidth curve point by point, over the working sets both measured."""
    merged = figures_of(measured)
    merged["flops_per_s"] = max(float(kept["flops_per_s"]), float(measured["flops_per_s"]))
    merged["bytes_per_s"] = max(float(kept["bytes_per_s"]), float(measured["bytes_per_s"]))
    rates = dict(kept.get("flops_by_dtype") or {})
    for dtype, rate in dict(measured.get("flops_by_dtype") or {}).items():
        rates[dtype] = max(float(rate), float(rates.get(dtype, 0.0)))
    if rates:
        merged["flops_by_dtype"] = rates
    old = {int(p["working_set_bytes"]): float(p["bytes_per_s"]) for p in kept.get("bandwidth") or ()}
    if measured.get("bandwidth"):
        merged["bandwidth"] = [{"working_set_bytes": p["working_set_bytes"],
                                "bytes_per_s": max(float(p["bytes_per_s"]),
                                                   old.get(int(p["working_set_bytes"]), 0.0))}
                               for p in measured["bandwidth"]]
    return merged


def store(path: Path, key: str, figures: Mapping[str, Any], provisional: bool = False, remeasures: int = 0) -> bool:
    """Keep ``figures`` under ``key``; False (nothing written) where either is not well formed. The entry gets
    the time it was kept, which orders eviction; ``provisional``: measured while the host stayed busy, to be
    measured again (the module's note), ``remeasures`` times so far."""
    if not _KEY.match(key) or not well_formed(figures):
        return False
    entries = load(path)
    entries[key] = {**figures_of(figures), KEPT_AT: time.time(),
                    **({PROVISIONAL: True, REMEASURES: remeasures} if provisional else {})}
    if len(entries) > MAX_ENTRIES:
        newest = sorted(entries, key=lambda k: float(entries[k].get("kept_at", 0)), reverse=True)[:MAX_ENTRIES]
        entries = {k: entries[k] for k in newest}
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".calibrations-", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(entries, out, indent=1, sort_keys=True)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True


def calibration_here() -> Calibration:
    """This process's host calibration (``kernelwatch predict`` on results stored without one): the kept one for
    this process's host and environment, else measured here now and kept."""
    from runners.calibrate import calibrate, host_key
    from runners.fingerprint import environment_info

    path, key = cache_path(), host_key(environment_info())
    kept = calibration_from_manifest(load(path).get(key))
    if kept is not None:
        return kept
    measured = calibrate()
    try:
        store(path, key, measured.as_manifest(), provisional=measured.measured_busy)
    except OSError as exc:  # not kept: measured again next time, which is no reason to fail this one
        print(f"kernelwatch: could not keep the host's calibration in {path} ({exc})", file=sys.stderr)
    return measured
