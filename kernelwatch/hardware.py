"""Published peak figures of the accelerators KernelWatch runs on, and the runner's own host from a calibration.

Every figure below is the vendor's published one, with its source beside it; where a vendor publishes none the
field is None (or the dtype is absent from a mapping), never an estimate. Units are SI: FLOP/s, bytes/s, bytes
(vendors' "GB" are 10^9 bytes, "GiB" 2^30).

Sources (as stored copies of the pages read in Nov 2026):
- Google Cloud TPU documentation, one page per version: cloud.google.com/tpu/docs/v4, /v5e, /v5p, /v6e
  ("System architecture" tables). The pages were revised over time; where two revisions disagree the comment
  names both.
- NVIDIA H100 Tensor Core GPU datasheet (2023) and NVIDIA H200 Tensor Core GPU datasheet (2024), SXM columns.
  Their tensor-core figures are quoted "with sparsity"; the dense figure is half, and only dense figures are kept.
- NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022) for the H100's L2 cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from kernelwatch.memory_hierarchy import BandwidthPoint, CacheLevel, MemoryLevel, bandwidth_bound, memory_levels

GB = 1e9
GIB = float(2**30)
TERA = 1e12

# What dtype names callers pass (numpy/JAX names, or the short ones) → the keys of the peak tables.
_DTYPE_ALIASES = {
    "bfloat16": "bf16", "bf16": "bf16",
    "float16": "fp16", "half": "fp16", "fp16": "fp16", "f16": "fp16",
    "float32": "fp32", "single": "fp32", "fp32": "fp32", "f32": "fp32",
    "float64": "fp64", "double": "fp64", "fp64": "fp64", "f64": "fp64",
    "tf32": "tf32", "tensorfloat32": "tf32",
    "int8": "int8", "i8": "int8", "s8": "int8", "uint8": "int8", "u8": "int8",
    "fp8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3": "fp8", "f8e4m3fn": "fp8",
    "f8e5m2": "fp8",
}


def dtype_key(dtype: str) -> str:
    """The peak table's name for a dtype: ``bfloat16`` → ``bf16``; an unknown name is returned lowercased."""
    name = dtype.strip().lower()
    return _DTYPE_ALIASES.get(name, name)


def _table(**peaks: float) -> Mapping[str, float]:
    return MappingProxyType(dict(peaks))


@dataclass(frozen=True)
class Interconnect:
    name: str
    bytes_per_s: float  # as published, per chip
    bidirectional: bool  # the published figure adds both directions (NVIDIA's NVLink and Google's ICI do)

    @property
    def per_direction_bytes_per_s(self) -> float:
        """What one direction carries: the figure nccl-tests' bus bandwidth is meant to be compared with, since
        its measurement "is of a unidirectional bandwidth" (nccl-tests doc/PERFORMANCE.md)."""
        return self.bytes_per_s / 2 if self.bidirectional else self.bytes_per_s


@dataclass(frozen=True)
class Hardware:
    """One chip's limits. Throughputs are per chip; a multi-chip result is compared with one chip's figures
    unless the caller scales them."""

    name: str
    matrix_flops_per_s: Mapping[str, float]  # dense matrix-unit peak by dtype_key (MXU / tensor cores)
    vector_flops_per_s: Mapping[str, float]  # vector-unit / CUDA-core peak by dtype_key, where published
    memory_bytes_per_s: float  # HBM (or, for a host, the calibrated DRAM) bandwidth
    memory_capacity_bytes: float | None
    on_chip_memory_bytes: float | None  # L2 / CMEM / VMEM as published; None where not
    interconnect: Interconnect | None
    source: str
    measured: bool = False  # True for a host entry from a calibration, not a datasheet
    # A calibrated host's streaming bandwidth by working set and its caches (kernelwatch/memory_hierarchy.py):
    # the cache-aware roofline's memory roofs. Empty for published chips and older calibrations: one roof then.
    memory_curve: tuple[BandwidthPoint, ...] = ()
    caches: tuple[CacheLevel, ...] = ()

    def memory_roof(self, working_set_bytes: float) -> float:
        """The memory roof a kernel streaming ``working_set_bytes`` is bound by: the hierarchy's where it was
        measured, else the one memory bandwidth."""
        if not self.memory_curve:
            return self.memory_bytes_per_s
        return bandwidth_bound(self.memory_curve, working_set_bytes)

    def memory_levels(self) -> tuple[MemoryLevel, ...]:
        """The roofs to draw, fastest first: one per level of a measured hierarchy, else the one memory roof."""
        if self.memory_curve:
            return memory_levels(self.memory_curve, self.caches)
        return (MemoryLevel("HBM" if not self.measured else "DRAM", None, self.memory_bytes_per_s),)

    def peak_flops(self, dtype: str) -> float | None:
        """The fastest published rate for this dtype: the matrix unit's where it has one, else the vector
        unit's; None where neither is published (e.g. fp32 on a TPU, whose MXU takes fp32 in bf16 passes)."""
        key = dtype_key(dtype)
        return self.matrix_flops_per_s.get(key) or self.vector_flops_per_s.get(key)

    def ridge_point(self, dtype: str) -> float | None:
        """FLOP per byte where the memory roof meets this dtype's compute roof."""
        peak = self.peak_flops(dtype)
        return None if peak is None else peak / self.memory_bytes_per_s


TPU_V4 = Hardware(
    name="TPU v4",
    # cloud.google.com/tpu/docs/v4: "Peak compute per chip 275 teraflops (bf16 or int8)".
    matrix_flops_per_s=_table(bf16=275 * TERA, int8=275 * TERA),
    vector_flops_per_s=_table(),  # not published
    # Same page: "HBM2 capacity and bandwidth 32 GiB, 1200 GBps".
    memory_bytes_per_s=1200 * GB,
    memory_capacity_bytes=32 * GIB,
    on_chip_memory_bytes=None,  # not on the Cloud TPU page
    interconnect=None,  # the v4 page gives pod all-reduce (1.1 PB/s) and bisection bandwidth, no per-chip figure
    source="Google Cloud TPU documentation, TPU v4 system architecture",
)

TPU_V5E = Hardware(
    name="TPU v5e",
    # cloud.google.com/tpu/docs/v5e: "Peak compute per chip (bf16) 197 TFLOPs", "(Int8) 393 TOPs" (an earlier
    # revision said 394).
    matrix_flops_per_s=_table(bf16=197 * TERA, int8=393 * TERA),
    vector_flops_per_s=_table(),
    # "HBM2 capacity and bandwidth 16 GB, 819 GBps" (a later revision writes "800 GiBps"; 819 GB/s kept).
    memory_bytes_per_s=819 * GB,
    memory_capacity_bytes=16 * GB,
    on_chip_memory_bytes=None,
    # "Bidirectional inter-chip interconnect (ICI) bandwidth (per chip) 400 GBps", 4 ICI ports.
    interconnect=Interconnect("ICI", 400 * GB, bidirectional=True),
    source="Google Cloud TPU documentation, TPU v5e system architecture",
)

TPU_V5P = Hardware(
    name="TPU v5p",
    # cloud.google.com/tpu/docs/v5p: "Peak compute per chip (BF16) 459", "(FP8) 459" TFLOPs.
    matrix_flops_per_s=_table(bf16=459 * TERA, fp8=459 * TERA),
    vector_flops_per_s=_table(),
    # "HBM2e capacity and bandwidth 95GB, 2765 GBps" (a later revision: 95 GiB; 2765 GBps = 2575 GiBps).
    memory_bytes_per_s=2765 * GB,
    memory_capacity_bytes=95 * GB,
    on_chip_memory_bytes=None,
    # "Bidirectional inter-chip interconnect (ICI) bandwidth per chip (GBps) 1200".
    interconnect=Interconnect("ICI", 1200 * GB, bidirectional=True),
    source="Google Cloud TPU documentation, TPU v5p system architecture",
)

TPU_V6E = Hardware(
    name="TPU v6e (Trillium)",
    # cloud.google.com/tpu/docs/v6e: "Peak compute per chip (bf16) 918 TFLOPs", "(Int8) 1836 TOPs".
    matrix_flops_per_s=_table(bf16=918 * TERA, int8=1836 * TERA),
    vector_flops_per_s=_table(),
    # "HBM capacity per chip 32 GB", "HBM bandwidth per chip 1638 GBps" (an earlier revision: 1640).
    memory_bytes_per_s=1638 * GB,
    memory_capacity_bytes=32 * GB,
    on_chip_memory_bytes=None,
    # "Bidirectional inter-chip interconnect (ICI) bandwidth (per chip) 800 GBps", 4 ICI ports.
    interconnect=Interconnect("ICI", 800 * GB, bidirectional=True),
    source="Google Cloud TPU documentation, TPU v6e system architecture",
)

# NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column. Tensor-core rows are "with sparsity"
# (footnote *): TF32 989, BF16 1,979, FP16 1,979, FP8 3,958 TFLOPS, INT8 3,958 TOPS; dense is half of each.
# FP64 Tensor Core 67 and FP32 67, FP64 34 TFLOPS are dense (CUDA-core FP32 is the vector peak).
_HOPPER_MATRIX = _table(fp64=67 * TERA, tf32=989 / 2 * TERA, bf16=1979 / 2 * TERA, fp16=1979 / 2 * TERA,
                        fp8=3958 / 2 * TERA, int8=3958 / 2 * TERA)
_HOPPER_VECTOR = _table(fp32=67 * TERA, fp64=34 * TERA)

H100_SXM = Hardware(
    name="NVIDIA H100 SXM",
    matrix_flops_per_s=_HOPPER_MATRIX,
    vector_flops_per_s=_HOPPER_VECTOR,
    memory_bytes_per_s=3.35 * TERA,  # datasheet: "GPU memory bandwidth 3.35TB/s"
    memory_capacity_bytes=80 * GB,  # "GPU memory 80GB"
    on_chip_memory_bytes=50e6,  # H100 architecture whitepaper (2022): H100 SXM5 has a 50 MB L2 cache
    interconnect=Interconnect("NVLink", 900 * GB, bidirectional=True),  # "NVIDIA NVLink: 900GB/s"
    source="NVIDIA H100 Tensor Core GPU datasheet (2023), SXM",
)

# NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column: the compute rows are the H100 SXM's (FP8 3,958,
# BF16 1,979 ... TFLOPS with sparsity; FP32 67, FP64 34), and so is NVLink; memory differs.
H200_SXM = replace(
    H100_SXM,
    name="NVIDIA H200 SXM",
    memory_bytes_per_s=4.8 * TERA,  # "GPU memory bandwidth 4.8TB/s"
    memory_capacity_bytes=141 * GB,  # "GPU memory 141GB"
    on_chip_memory_bytes=None,  # the H200 datasheet gives no cache size
    source="NVIDIA H200 Tensor Core GPU datasheet (2024), SXM",
)

ACCELERATORS: tuple[Hardware, ...] = (TPU_V4, TPU_V5E, TPU_V5P, TPU_V6E, H100_SXM, H200_SXM)

# JAX's ``device.device_kind`` (lowercased, spaces collapsed) → the table. TPU kinds come from libtpu: v5e
# reports "TPU v5 lite", v5p "TPU v5" (newer libtpu: "TPU v5p"), v6e "TPU v6 lite". GPU kinds are CUDA's device
# name: an H100 SXM reports "NVIDIA H100 80GB HBM3", an H200 SXM "NVIDIA H200". PCIe and NVL boards have other
# clocks, power and bandwidth (and names: "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL"), so they
# are deliberately absent rather than mapped to the SXM figures.
_TPU_KINDS: dict[str, Hardware] = {
    "tpu v4": TPU_V4,
    "tpu v5 lite": TPU_V5E, "tpu v5e": TPU_V5E,
    "tpu v5": TPU_V5P, "tpu v5p": TPU_V5P,
    "tpu v6 lite": TPU_V6E, "tpu v6e": TPU_V6E,
}
_GPU_KINDS: dict[str, Hardware] = {
    "nvidia h100 80gb hbm3": H100_SXM,
    "nvidia h200": H200_SXM,
}
_KINDS_BY_BACKEND: dict[str, dict[str, Hardware]] = {"tpu": _TPU_KINDS, "gpu": _GPU_KINDS, "cuda": _GPU_KINDS}


def hardware_for(backend: str, device_kind: str) -> Hardware | None:
    """The published figures for a JAX backend and device kind, case-insensitively; None for anything not in the
    table (a CPU, an unlisted board), so callers say "unknown" rather than borrow another chip's figures."""
    kinds = _KINDS_BY_BACKEND.get(backend.strip().lower())
    if kinds is None:
        return None
    return kinds.get(" ".join(device_kind.lower().split()))


def hardware_label(backend: str, device_kind: str, device_count: int) -> str:
    """The hardware a run measured, as the pages name it: "gpu · NVIDIA H200 ×8", "cpu". The device kind only where
    it says more than the backend (JAX's CPU device kind is "cpu"), the count only past one device (a count of 1
    beside a CPU read as one core)."""
    label = backend if " ".join(device_kind.lower().split()) == backend.lower() else f"{backend} · {device_kind}"
    return f"{label} ×{device_count}" if device_count > 1 else label


@dataclass(frozen=True)
class Calibration:
    """What the runner's calibration measured on its host (runners/calibrate.py): matmul FLOP/s per dtype, and
    the streaming bandwidth at a ladder of working sets with the cache sizes they cross (the cache-aware
    roofline's levels, kernelwatch/memory_hierarchy.py). ``flops_per_s`` is ``dtype``'s rate and ``bytes_per_s``
    the largest working set's (DRAM): the one-roof figures every calibration has, older ones nothing else."""

    flops_per_s: float
    bytes_per_s: float
    dtype: str
    flops_by_dtype: tuple[tuple[str, float], ...] = ()  # (dtype key, FLOP/s) of every dtype measured
    bandwidth: tuple[BandwidthPoint, ...] = ()
    caches: tuple[CacheLevel, ...] = ()
    # Measured while the host stayed busy (runners/calibrate.py): its roofs may sit low. Not a manifest field: the
    # runner's cache keeps it (runners/calibration_cache.py) and measures such a host again.
    measured_busy: bool = False

    def as_manifest(self) -> dict[str, Any]:
        """Shaped as the manifest's ``environment.calibration``."""
        shaped: dict[str, Any] = {"flops_per_s": self.flops_per_s, "bytes_per_s": self.bytes_per_s,
                                  "dtype": self.dtype}
        if self.flops_by_dtype:
            shaped["flops_by_dtype"] = dict(self.flops_by_dtype)
        if self.bandwidth:
            shaped["bandwidth"] = [{"working_set_bytes": p.working_set_bytes, "bytes_per_s": p.bytes_per_s}
                                   for p in self.bandwidth]
        if self.caches:
            shaped["caches"] = [{"name": c.name, "size_bytes": c.size_bytes} for c in self.caches]
        return shaped


def calibration_from_manifest(stored: Mapping[str, Any] | None) -> Calibration | None:
    """A calibration as a manifest (and Run.calibration) holds it, older one-roof shapes included; None where
    there is none or it is not one (a stored value is read, never trusted to be well formed)."""
    if not stored:
        return None
    try:
        calibration = Calibration(
            flops_per_s=float(stored["flops_per_s"]), bytes_per_s=float(stored["bytes_per_s"]),
            dtype=str(stored.get("dtype", "float32")),
            flops_by_dtype=tuple((dtype_key(str(k)), float(v))
                                 for k, v in dict(stored.get("flops_by_dtype") or {}).items()),
            bandwidth=tuple(BandwidthPoint(int(p["working_set_bytes"]), float(p["bytes_per_s"]))
                            for p in stored.get("bandwidth") or ()),
            caches=tuple(CacheLevel(str(c["name"]), int(c["size_bytes"])) for c in stored.get("caches") or ()))
    except (KeyError, TypeError, ValueError):
        return None
    return calibration if calibration.flops_per_s > 0 and calibration.bytes_per_s > 0 else None


def host_hardware(calibration: Calibration, name: str = "host (calibrated)") -> Hardware:
    """A table entry for a host without published figures: its measured matmul rates stand for the compute
    roofs of the dtypes measured, its bandwidth curve (or, from an older calibration, its one copy rate) for the
    memory roofs. Measured, so attainable roofs, not theoretical ones: kernels come close to them and, by the
    measurement's own spread, past them."""
    if not (calibration.flops_per_s > 0 and calibration.bytes_per_s > 0):
        raise ValueError(f"a calibration needs positive rates, got {calibration}")
    rates = {dtype_key(calibration.dtype): calibration.flops_per_s}
    rates.update({k: v for k, v in calibration.flops_by_dtype if v > 0})
    return Hardware(
        name=name, matrix_flops_per_s=_table(**rates),
        vector_flops_per_s=_table(), memory_bytes_per_s=calibration.bytes_per_s, memory_capacity_bytes=None,
        on_chip_memory_bytes=None, interconnect=None, source="calibration micro-benchmark", measured=True,
        memory_curve=calibration.bandwidth, caches=calibration.caches)
