"""Runs inside Otava's own virtual environment (bench/.otava-venv), never in KernelWatch's: it imports only
apache-otava, numpy and the standard library.

    bench/.otava-venv/bin/python bench/otava_side.py JOB.json OUT.json

JOB.json: ``{"groups": [{"name": str, "file": "x.npy"}]}``, each .npy (next to JOB.json) a float64 matrix of
per-commit values, one series per row. For every row it calls ``otava.analysis.compute_change_points`` with
Otava's defaults (window_len=50, max_pvalue=0.001, min_magnitude=0.0: those of ``otava.series.AnalysisOptions``
too), and writes to OUT.json per group: the change points of each row (their index is the first commit of the new
level) and ``seconds``, the wall time of the analysis calls alone (loading and converting the data excluded).

Each row is passed as a Python list of floats, as Otava's own ``Series`` does. (An ndarray would be wrong: its
windowed split step slices ``series[start:end]`` only for non-arrays, so with an ndarray each window would
analyse the whole series and shift the indices found.)
"""

from __future__ import annotations

import json
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np
from otava.analysis import compute_change_points


def main() -> None:
    job_path, out_path = Path(sys.argv[1]), Path(sys.argv[2])
    job = json.loads(job_path.read_text())
    out = {"otava_version": metadata.version("apache-otava"), "numpy_version": np.__version__, "groups": []}
    for group in job["groups"]:
        matrix = np.load(job_path.parent / group["file"])
        rows = [[float(v) for v in row] for row in matrix]
        started = time.perf_counter()
        found = [compute_change_points(row)[0] for row in rows]
        seconds = time.perf_counter() - started
        out["groups"].append({
            "name": group["name"],
            "series": len(rows),
            "seconds": seconds,
            "change_points": [[int(cp.index) for cp in cps] for cps in found],
        })
    out_path.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
