"""Which compute peak a result is measured against: one rule for ingest's stored figures, `kernelwatch predict`
and the /model page, so that the three never draw different ridges for the same benchmark.

Pure: a benchmark's parameters and a hardware entry in, the dtype whose peak is the roof (and why) out.

The rule:
- A benchmark computes in the dtype its ``dtype`` (or, for quantized kernels, ``act_dtype``) parameter names;
  with neither it computes in float32, JAX's default.
- A roof is an upper bound, so the compute roof is the fastest path that dtype's work can take on the chip:
  float32 dots run on the tensor cores as TF32 under JAX's default matmul precision on NVIDIA GPUs, so float32
  is measured against the faster of the fp32 and tf32 figures (elementwise float32 kernels are memory-bound
  there either way, so their figures do not move with the choice).
- A dtype the chip publishes nothing for (float32 on a TPU, whose MXU runs it as bf16 passes; fp8 on a v4) is
  measured against the bf16 peak, the fastest path such work can take there; a chip with neither has no compute
  roof.
- A calibrated host has one measured rate, for the dtype it calibrated; it stands in for every dtype (said so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kernelwatch.hardware import Hardware, dtype_key

DEFAULT_DTYPE = "float32"  # JAX's default dtype: what a benchmark with no dtype parameter computes in
DTYPE_PARAMS = ("dtype", "act_dtype")
FALLBACK_DTYPE = "bf16"
# The faster paths a dtype's work may take (see the module docstring); the dtype's own figure is always a candidate.
_FASTER_PATHS: Mapping[str, tuple[str, ...]] = {"fp32": ("tf32",)}


@dataclass(frozen=True)
class ComputeRoof:
    requested: str  # the dtype key the benchmark computes in (fp32, bf16, int8, ...)
    used: str  # the dtype key whose peak is the roof
    peak_flops_per_s: float

    @property
    def note(self) -> str | None:
        """Why the roof is another dtype's peak, in words; None where it is the dtype's own."""
        if self.used == self.requested:
            return None
        return f"the {self.used} peak stands in for {self.requested} (its fastest path on this hardware)"


def params_dtype(params: Mapping[str, object]) -> str:
    """The dtype a benchmark computes in, from its parameters."""
    for name in DTYPE_PARAMS:
        value = params.get(name)
        if value is not None and str(value).strip():
            return str(value)
    return DEFAULT_DTYPE


def compute_roof(hardware: Hardware, dtype: str) -> ComputeRoof | None:
    """The compute roof for work in ``dtype`` on ``hardware`` (see the module docstring); None where the hardware
    gives no compute figure at all."""
    requested = dtype_key(dtype)
    if hardware.measured:
        measured = next(iter(hardware.matrix_flops_per_s.items()), None)
        return None if measured is None else ComputeRoof(requested, measured[0], measured[1])
    candidates = [(key, peak) for key in (requested, *_FASTER_PATHS.get(requested, ()))
                  if (peak := hardware.peak_flops(key)) is not None]
    if not candidates and (fallback := hardware.peak_flops(FALLBACK_DTYPE)) is not None:
        candidates = [(FALLBACK_DTYPE, fallback)]
    if not candidates:
        return None
    # The fastest; on a tie the dtype's own figure (listed first) wins, so no stand-in is claimed needlessly.
    used, peak = max(candidates, key=lambda c: c[1])
    return ComputeRoof(requested, used, peak)
