"""A kernel family's cost as a fixed cost per call plus a cost per byte plus a cost per FLOP, fitted to its measured
shapes: time = a + b x bytes + c x FLOPs, with a, b, c >= 0.

Pure: (FLOPs, bytes, time) triples in, three coefficients out.

Why a second model beside the roofline's efficiency (service/model/predict.py): the efficiency is read along one axis,
the roofline time, so two shapes at one roofline time are predicted alike. On a host whose matmuls run on AMX tiles
(bf16 at 850-874 GFLOP/s here, 2026-12-06), a 16x1024x1024 matmul and a 256^3 one have the same FLOPs and took 0.191
and 0.105 ms; m = 1..16 over a 1024x1024 weight all took about 0.19 ms, whatever their FLOPs. What sets such a time is
a cost per weight byte (each call packs the weight into the tiles' layout) beside the cost per FLOP, and the fit
separates the two where the roofline's one axis adds them. It is the additive form of the roofline (no overlap of
memory and compute: the sum bounds the time from above as the max bounds it from below), with the family's own
effective bandwidth (1 / b) and FLOP rate (1 / c) in place of the host's peaks, and a's dispatch cost beside them.

What one line cannot cross is a cache cliff, so service.model.predict fits it to the shapes at a shape's own cache
level (``fitted_seconds``), as the interpolation reads only those; and no count separates shapes of equal bytes and
FLOPs that differ (a norm's byte twins). :func:`service.model.predict.estimate_efficiency` chooses between the fit
and the interpolation per family, by leave-one-out over its measured shapes.

Fitted in relative error (each measured shape weighs alike, a 0.05 ms shape as much as a 30 ms one), by non-negative
least squares: a negative cost per byte or per FLOP would be a fit of the noise, not of the hardware.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

# Three coefficients: the fewest measured shapes a fit is made from, and so (one shape left out to judge it) the
# fewest a family needs before the fit is a candidate at all.
COEFFICIENTS = 3


@dataclass(frozen=True)
class CostFit:
    fixed_s: float  # a: per call, whatever the shape
    per_byte_s: float  # b: 1 / the family's effective bandwidth
    per_flop_s: float  # c: 1 / the family's effective FLOP rate

    def seconds(self, flops: float, bytes_accessed: float) -> float:
        return self.fixed_s + self.per_byte_s * bytes_accessed + self.per_flop_s * flops


def fit_cost(shapes: Sequence[tuple[float, float, float]]) -> CostFit | None:
    """The non-negative (a, b, c) minimising the squared relative errors of time = a + b x bytes + c x FLOPs over
    ``shapes`` (FLOPs, bytes, seconds); None with fewer than COEFFICIENTS shapes, a time that is not positive, or a
    fit that predicts no positive time."""
    if len(shapes) < COEFFICIENTS:
        return None
    times = np.array([s for _, _, s in shapes], dtype=float)
    if not np.all(np.isfinite(times)) or np.any(times <= 0):
        return None
    design = np.array([[1.0, b, f] for f, b, _ in shapes], dtype=float) / times[:, None]
    # Columns scaled to unit length: bytes (1e6-1e8) and FLOPs (1e6-1e10) beside the constant would otherwise leave
    # the solver's tolerances meaningless for one of them.
    scale = np.linalg.norm(design, axis=0)
    scale[scale == 0] = 1.0
    weights, _ = nnls(design / scale, np.ones(len(shapes)))
    fixed, per_byte, per_flop = (float(w) for w in weights / scale)
    fit = CostFit(fixed, per_byte, per_flop)
    if not all(math.isfinite(v) for v in (fixed, per_byte, per_flop)) or any(
            fit.seconds(f, b) <= 0 for f, b, _ in shapes):
        return None
    return fit
