"""What a benchmark leaves behind besides its times: the optimized HLO, XLA's cost and memory analyses, the
compiler's dump files (CPU object files per fusion, GPU PTX), and the profiler trace of timed calls.

Everything goes into a content-addressed ArtifactStore (the runner's outbox) and is referenced from the
manifest by digest. Dump files are attributed to a benchmark by what appeared in the process's dump directory
while that benchmark compiled (benchmarks run one after another in a process).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runners.artifacts import ArtifactRef, ArtifactStore
from runners.ptx_to_sass import SassTools, sass_from_ptx

# Dump files worth keeping, by how their names end; the LLVM IR and the rest stay out of the store.
DUMP_KINDS: tuple[tuple[str, str], ...] = (
    ("after_optimizations.txt", "hlo"),
    ("before_optimizations.txt", "hlo-before"),
    ("buffer-assignment.txt", "buffer-assignment"),
    (".o", "x86-obj"),
    (".ptx", "ptx"),
    (".sass", "sass"),
    ("final_bundles.txt", "llo"),
)
MAX_DUMP_FILE_BYTES = 64 * 1024 * 1024
LLO_SUBDIR = "llo"  # where the runner points libtpu's --xla_jf_dump_to, inside the XLA dump directory
COST_KEYS = ("flops", "transcendentals", "bytes accessed", "optimal_seconds")
MEMORY_KEYS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
               "generated_code_size_in_bytes", "peak_memory_in_bytes")


def dump_kind(name: str) -> str | None:
    for suffix, kind in DUMP_KINDS:
        if name.endswith(suffix):
            return kind
    return None


def cost_figures(compiled: Any) -> dict[str, float]:
    """XLA's own FLOP and byte counts for the compiled program (some backends leave keys out)."""
    try:
        analysis = compiled.cost_analysis()
    except Exception:  # not every backend implements it; its absence is not a failure of the kernel
        return {}
    if isinstance(analysis, list):
        analysis = analysis[0] if analysis else {}
    # XLA says -1 for a figure it does not know (optimal_seconds on CPU): unknown is absent, not negative.
    figures = {k: float(v) for k, v in (analysis or {}).items() if k in COST_KEYS}
    return {k: v for k, v in figures.items() if math.isfinite(v) and v >= 0}


def footprint_bytes(memory: Mapping[str, int]) -> int | None:
    """What a compiled program keeps resident: its arguments, outputs (less what aliases an argument) and
    temporaries; None where the backend sizes none of them."""
    parts = [memory.get(k) for k in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")]
    if all(p is None for p in parts):
        return None
    total = sum(p or 0 for p in parts) - (memory.get("alias_size_in_bytes") or 0)
    return total if total > 0 else None


def memory_figures(compiled: Any) -> dict[str, int]:
    try:
        stats = compiled.memory_analysis()
    except Exception:
        return {}
    return {k: int(getattr(stats, k)) for k in MEMORY_KEYS if hasattr(stats, k)}


@dataclass
class Capturer:
    """Collects one benchmark's artifacts; ``dump_dir`` is the process's --xla_dump_to directory, if set."""

    store: ArtifactStore
    dump_dir: Path | None = None
    # On a GPU host with ptxas and cuobjdump/nvdisasm: the device's architecture (sm_90) and those tools, so
    # that every dumped PTX module also gets its SASS.
    sass_arch: str | None = None
    sass_tools: SassTools | None = None
    refs: list[ArtifactRef] = field(default_factory=list)
    cost: dict[str, float] = field(default_factory=dict)
    _before: set[str] = field(default_factory=set)

    def start(self) -> None:
        """Call right before compiling: what is in the dump directory now belongs to earlier benchmarks."""
        self.refs, self.cost = [], {}
        self._before = self._dump_names()

    def _dump_files(self) -> dict[str, Path]:
        """Files of the XLA dump directory and of libtpu's LLO directory inside it, by file name."""
        found: dict[str, Path] = {}
        if self.dump_dir is None:
            return found
        for directory in (self.dump_dir, self.dump_dir / LLO_SUBDIR):
            if directory.is_dir():
                found.update({p.name: p for p in directory.iterdir() if p.is_file()})
        return found

    def _dump_names(self) -> set[str]:
        return set(self._dump_files())

    def after_compile(self, compiled: Any, memory: Mapping[str, int] | None = None) -> None:
        """Keep what the compile left: the optimized HLO, XLA's cost and memory analyses (``memory``: the
        latter, where the caller has it already), and the dump files this compile wrote."""
        # The optimized module as the compiler holds it; on CPU byte-identical to the after_optimizations dump
        # (one artifact then, by digest), and the only HLO there is where no dump directory is set.
        self.refs.append(self.store.put(compiled.as_text().encode(), kind="hlo", name="as_text.txt"))
        self.cost = cost_figures(compiled)
        analyses = {"cost": self.cost, "memory": dict(memory) if memory is not None else memory_figures(compiled)}
        self.refs.append(self.store.put(json.dumps(analyses, sort_keys=True).encode(), kind="analysis",
                                        name="analysis.json"))
        if self.dump_dir is None:
            return
        files = self._dump_files()
        for name in sorted(set(files) - self._before):
            kind = dump_kind(name)
            path = files[name]
            if kind is None or path.stat().st_size > MAX_DUMP_FILE_BYTES:
                continue
            data = path.read_bytes()
            self.refs.append(self.store.put(data, kind=kind, name=name))
            if kind == "ptx" and self.sass_arch and self.sass_tools:
                self._sass(data, name)

    def _sass(self, ptx: bytes, name: str) -> None:
        try:
            listing = sass_from_ptx(ptx, self.sass_arch or "", self.sass_tools)  # type: ignore[arg-type]
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"kernelwatch: no SASS for {name}: {exc}", file=sys.stderr)  # the PTX is kept all the same
            return
        self.refs.append(self.store.put(listing.encode(), kind="sass", name=name.removesuffix(".ptx") + ".sass"))

    def trace(self, xplane: bytes) -> None:
        self.refs.append(self.store.put(xplane, kind="xplane", name="trace.xplane.pb"))
