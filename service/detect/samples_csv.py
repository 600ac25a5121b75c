"""The engine as a tool on any data: a CSV of samples in, change points out (`kernelwatch detect`).

Input: a header ``series,position,value`` (in any column order; other columns are ignored) and one row per sample;
several rows with the same series and position are samples of one commit. Positions are integers in first-parent
order; they need not be contiguous (a commit that was not measured is just absent).

An optional ``run`` column names the run (benchmark process) that took each sample: a commit's level is then the
geometric mean of its runs' medians and the engine's test counts runs (``edivisive``). Without it the samples
of a commit are one run, whose median is its level.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from typing import Any

import numpy as np

from kernelwatch.errors import InvalidInput
from service.detect.changepoints import ChangePointParams, CommitRuns, commit_runs, detect_many

REQUIRED = ("series", "position", "value")
RUN = "run"  # optional
MAX_FIELD = 1000  # characters in one field: a series name, not a payload


def read_samples_csv(text: str, source: str = "input") -> dict[str, dict[int, list[list[float]]]]:
    """Samples per series, position and run (runs in order of first appearance; one per position without a
    ``run`` column); a clear error naming the line for anything else."""
    csv.field_size_limit(MAX_FIELD * 4)
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise InvalidInput(f"{source}: empty file; expected a header 'series,position,value'") from None
    except csv.Error as exc:
        raise InvalidInput(f"{source}:1: {exc}") from None
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        raise InvalidInput(f"{source}:1: header lacks {', '.join(missing)}; expected 'series,position,value'")
    col = {name: header.index(name) for name in REQUIRED}
    run_col = header.index(RUN) if RUN in header else None
    samples: dict[str, dict[int, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    try:
        for row in reader:
            line = reader.line_num
            if not row or all(not field.strip() for field in row):
                continue
            if len(row) < len(header):
                raise InvalidInput(f"{source}:{line}: {len(row)} fields, the header has {len(header)}")
            series = row[col["series"]].strip()
            if not series or len(series) > MAX_FIELD:
                raise InvalidInput(f"{source}:{line}: a series name of 1 to {MAX_FIELD} characters is needed")
            position, value = _integer(row[col["position"]], source, line), _positive(row[col["value"]], source, line)
            run = "" if run_col is None else row[run_col].strip()
            if len(run) > MAX_FIELD:
                raise InvalidInput(f"{source}:{line}: a run name of at most {MAX_FIELD} characters is needed")
            samples[series][position][run].append(value)
    except csv.Error as exc:
        raise InvalidInput(f"{source}:{reader.line_num}: {exc}") from None
    return {name: {position: list(runs.values()) for position, runs in points.items()}
            for name, points in samples.items()}


def _integer(field: str, source: str, line: int) -> int:
    try:
        return int(field.strip())
    except ValueError:
        raise InvalidInput(f"{source}:{line}: position {field.strip()[:40]!r} is not an integer") from None


def _positive(field: str, source: str, line: int) -> float:
    try:
        value = float(field.strip())
    except ValueError:
        raise InvalidInput(f"{source}:{line}: value {field.strip()[:40]!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        # Levels are compared as ratios (a change is x % of the level), which needs positive values.
        raise InvalidInput(f"{source}:{line}: value {value} must be a finite number > 0")
    return value


def change_points_report(samples: dict[str, dict[int, list[list[float]]]], params: ChangePointParams
                         ) -> dict[str, Any]:
    """``{"change_points": [{series, position, direction, magnitude, p_value, before, after}]}``, by series name
    then position; ``samples`` as ``read_samples_csv`` gives them. Series of one length are analysed together
    (the engine is vectorised across series)."""
    by_length: dict[int, list[tuple[str, list[int], CommitRuns]]] = defaultdict(list)
    for name, points in samples.items():
        positions = sorted(points)
        runs = commit_runs([[float(np.median(run)) for run in points[p]] for p in positions])
        by_length[len(positions)].append((name, positions, runs))
    found = []
    for group in by_length.values():
        matrix = np.array([runs.levels for _, _, runs in group], dtype=float)
        counts = np.array([runs.runs for _, _, runs in group], dtype=float)
        within = np.array([runs.within for _, _, runs in group], dtype=float)
        detected = detect_many(matrix, params, runs=counts, within=within)
        for (name, positions, _), changes in zip(group, detected, strict=True):
            for change in changes:
                found.append({
                    "series": name,
                    "position": positions[change.index],
                    "direction": "increase" if change.after > change.before else "decrease",
                    "magnitude": change.magnitude,
                    "p_value": change.p_value,
                    "before": change.before,
                    "after": change.after,
                    "previous_position": positions[change.index - 1],
                })
    found.sort(key=lambda c: (c["series"], c["position"]))
    return {"change_points": found}
