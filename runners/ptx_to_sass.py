"""SASS for the PTX XLA dumps on a GPU host: assemble with ``ptxas`` for the device's architecture, list with
``cuobjdump -sass`` (or ``nvdisasm``), where those tools exist.

XLA's GPU backend dumps each module's PTX but not the machine code the driver runs; what a kernel engineer
reads is SASS (HMMA/WGMMA, the loads, the spills ptxas reports). The tools come with the CUDA toolkit, or with
the pip packages jax[cuda] installs (``nvidia/cuda_nvcc/bin``), which are searched too. A host without them
captures the PTX alone: SASS is optional evidence, never a reason for a benchmark to fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

TOOL_TIMEOUT_S = 120


@dataclass(frozen=True)
class SassTools:
    ptxas: Path
    lister: Path  # cuobjdump (preferred: the listing format the SASS parser reads) or nvdisasm

    @property
    def lister_args(self) -> list[str]:
        return ["-sass"] if self.lister.name.startswith("cuobjdump") else ["-c"]


def _package_bins() -> list[Path]:
    """bin folders of NVIDIA's pip packages in this interpreter's site-packages."""
    found = []
    for site in map(Path, sys.path):
        nvidia = site / "nvidia"
        if nvidia.is_dir():
            found += [p for p in nvidia.glob("*/bin") if p.is_dir()]
    return found


def find_tools(search: list[Path] | None = None) -> SassTools | None:
    """ptxas and a SASS lister from ``search`` (default: PATH, then NVIDIA's pip packages), or None."""
    def which(name: str) -> Path | None:
        if search is None:
            hit = shutil.which(name)
            if hit:
                return Path(hit)
        for folder in search if search is not None else _package_bins():
            candidate = folder / name
            if candidate.is_file() and shutil.which(str(candidate)):
                return candidate
        return None

    ptxas = which("ptxas")
    lister = which("cuobjdump") or which("nvdisasm")
    return SassTools(ptxas, lister) if ptxas and lister else None


def sm_arch(compute_capability: str) -> str:
    """'9.0' (what a JAX GPU device reports) -> 'sm_90'."""
    major, _, minor = compute_capability.partition(".")
    if not (major.isdigit() and (minor or "0").isdigit()):
        raise ValueError(f"not a compute capability: {compute_capability!r}")
    return f"sm_{int(major)}{int(minor or 0)}"


_TARGET = re.compile(rb"^\s*\.target\s+(sm_\d+[a-z]?)\b", re.MULTILINE)


def ptx_arch(ptx: bytes, device_arch: str) -> str:
    """The architecture to assemble a module for: the PTX's own ``.target`` where it is the device's with a
    suffix (XLA writes ``sm_90a`` on Hopper, for wgmma and the tensor-memory copies, and ptxas refuses such PTX
    for plain ``sm_90``), else the device's."""
    found = _TARGET.search(ptx[:4096])
    target = found.group(1).decode() if found else None
    return target if target is not None and target.rstrip("abcdefghijklmnopqrstuvwxyz") == device_arch else device_arch


def sass_from_ptx(ptx: bytes, arch: str, tools: SassTools) -> str:
    """The SASS listing of one PTX module (assembled for ``ptx_arch(ptx, arch)``); raises RuntimeError with the
    tool's message when a tool fails."""
    arch = ptx_arch(ptx, arch)
    with tempfile.TemporaryDirectory(prefix="kw-sass-") as scratch:
        source, cubin = Path(scratch) / "module.ptx", Path(scratch) / "module.cubin"
        source.write_bytes(ptx)
        for argv in ([str(tools.ptxas), f"-arch={arch}", str(source), "-o", str(cubin)],
                     [str(tools.lister), *tools.lister_args, str(cubin)]):
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
            if proc.returncode != 0:
                raise RuntimeError(f"{Path(argv[0]).name} failed: {(proc.stderr or proc.stdout).strip()[:500]}")
        return proc.stdout
