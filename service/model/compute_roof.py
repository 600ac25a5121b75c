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
- A calibrated host has the rates of the dtypes it measured (float32 and bfloat16 matmuls); a dtype it did not
  measure, and the work of a benchmark that names no dtype (a bf16 matmul whose inputs say what it computes in,
  its parameters nothing), is held to the fastest of them (said so): a measured roof must bound, and only the
  parameters are known here.
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


def declared_dtype(params: Mapping[str, object]) -> str | None:
    """The dtype a benchmark's parameters name, or None where they name none."""
    for name in DTYPE_PARAMS:
        value = params.get(name)
        if value is not None and str(value).strip():
            return str(value)
    return None


def params_dtype(params: Mapping[str, object]) -> str:
    """The dtype a benchmark computes in, from its parameters."""
    return declared_dtype(params) or DEFAULT_DTYPE


def compute_roof(hardware: Hardware, dtype: str, declared: bool = True) -> ComputeRoof | None:
    """The compute roof for work in ``dtype`` on ``hardware`` (see the module docstring); None where the hardware
    gives no compute figure at all. ``declared``: the dtype is one the benchmark's parameters name, not the
    default assumed for a benchmark that names none."""
    requested = dtype_key(dtype)
    if hardware.measured:
        rates = dict(hardware.matrix_flops_per_s)
        if requested in rates and declared:
            return ComputeRoof(requested, requested, rates[requested])
        if not rates:
            return None
        # A dtype the calibration did not measure: the fastest measured rate, a bound however the host runs it.
        used = max(rates, key=lambda k: rates[k])
        return ComputeRoof(requested, used, rates[used])
    candidates = [(key, peak) for key in (requested, *_FASTER_PATHS.get(requested, ()))
                  if (peak := hardware.peak_flops(key)) is not None]
    if not candidates and (fallback := hardware.peak_flops(FALLBACK_DTYPE)) is not None:
        candidates = [(FALLBACK_DTYPE, fallback)]
    if not candidates:
        return None
    # The fastest; on a tie the dtype's own figure (listed first) wins, so no stand-in is claimed needlessly.
    used, peak = max(candidates, key=lambda c: c[1])
    return ComputeRoof(requested, used, peak)
