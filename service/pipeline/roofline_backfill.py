"""Roofline figures for stored results that lack them: results stored before migration 0011 added the columns,
or (with ``recompute``) every result again after the model's rule changed. Ingest computes them for new
results; this gives old ones the same figures by the same functions (service/pipeline/result_roofline_rows.py),
so a page or a comparison never tells a result stored last year from one stored today.

What it does not do: derive the ``roofline_fraction`` efficiency series for old results. That series feeds
detection, and inserting history into it after the fact would raise findings dated at old commits; efficiency
series start at the first run ingested with the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from kernelwatch.hardware import Calibration, calibration_from_manifest
from kernelwatch.memory_hierarchy import working_set
from service.model.compute_roof import declared_dtype, params_dtype
from service.model.result_roofline import result_figures, run_hardware
from service.pipeline.result_roofline_rows import DEVICE_METRIC, ROOFLINE_METRIC, roofline_columns
from service.store.roofline import figure_inputs, write_figures

BATCH = 2000  # rows updated per round trip; a whole table is never held in memory


@dataclass
class BackfillCounts:
    filled: int = 0  # results given figures (or, recomputing, whose figures were written again)
    without_roof: int = 0  # counts, but no published figures and no calibration for their run's hardware
    without_counts: int = 0  # no FLOP or byte counts: nothing to place on a roofline


def _calibration(stored: object) -> Calibration | None:
    """A run's stored calibration, or None where it is absent or malformed (an old runner's)."""
    return calibration_from_manifest(stored) if isinstance(stored, dict) else None


def backfill_roofline(session: Session, recompute: bool = False) -> BackfillCounts:
    """Compute and store the figures of every ok wall-time result without them (all of them with ``recompute``).
    Idempotent; the caller's unit of work commits."""
    counts = BackfillCounts()
    last = 0
    while True:
        # Keyset batches by id: bounded memory, and no cursor held open across the updates.
        rows = figure_inputs(session, ROOFLINE_METRIC, last, BATCH, recompute, DEVICE_METRIC)
        if not rows:
            return counts
        last = rows[-1][0]
        updates: list[dict[str, object]] = []
        for result_id, flops, bytes_accessed, median, params, backend, device_kind, calibration, cost in rows:
            if flops is None or bytes_accessed is None:
                counts.without_counts += 1
                continue
            hardware = run_hardware(backend, device_kind, _calibration(calibration))
            figures = None if hardware is None else result_figures(hardware, params_dtype(params), flops,
                                                                      bytes_accessed, median,
                                                                      declared_dtype(params) is not None,
                                                                      working_set(bytes_accessed, cost))
            if figures is None:
                counts.without_roof += 1
                continue
            updates.append({"id": result_id, **roofline_columns(figures)})
        if updates:
            write_figures(session, updates)
            counts.filled += len(updates)
