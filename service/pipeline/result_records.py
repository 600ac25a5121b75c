"""Read a benchmark's parsed records at some commits (op tables, HLO modules, kernel code) as the plain records
of ``service/detect/``, and re-derive a kernel's disassembly from its stored artifact.

Records belong to the result that captured the artifacts (the wall-time one), while findings sit on any time
series of the benchmark; so records are looked up by benchmark and environment, across every run at a commit.
A layer counts as known for a result only when every artifact of its kinds was parsed without error: a layer
still unparsed (parsing may land after detection) or half-broken is unknown, never "empty".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from runners.artifacts import ArtifactError, ArtifactStore
from runners.parsers.by_kind import ParseFailure, parse
from service.detect.attribution import OpRecord, OpTable, SideName
from service.detect.fusion_pairing import source_function, source_text
from service.detect.static_diff import FusionInfo, HloModuleInfo, KernelInfo, StaticRecords, spills_of
from service.store.models import HloModuleRecord, KernelCode, OpStat
from service.store.records import artifact_states, benchmark_results, kernel_source, records_by_result

TIME_METRICS = ("wall_time", "device_time", "execution_time")
LAYER_KINDS = {"hlo": ("hlo",), "kernels": ("x86-obj", "sass", "llo"), "ops": ("xplane",)}


@dataclass(frozen=True)
class CommitRecords:
    commit_id: int
    position: int
    static: StaticRecords | None  # from one result: the one with the most known layers (lowest id on ties)
    static_result_id: int | None
    ops: OpTable | None  # pooled over every result with a known op table
    op_result_ids: tuple[int, ...]


def _known_layers(session: Session, result_ids: Sequence[int]) -> dict[int, set[str]]:
    """Per result, the layers whose artifacts exist and were all parsed for that result without error."""
    state: dict[int, dict[str, bool]] = defaultdict(dict)
    layer_of = {kind: layer for layer, kinds in LAYER_KINDS.items() for kind in kinds}
    for result_id, kind, parsed, error in artifact_states(session, result_ids):
        layer = layer_of.get(kind)
        if layer is not None:
            ok = parsed is not None and error is None
            state[result_id][layer] = state[result_id].get(layer, True) and ok
    return {rid: {layer for layer, ok in layers.items() if ok} for rid, layers in state.items()}


def kernel_info(row: KernelCode) -> KernelInfo:
    return KernelInfo(name=row.name, isa=row.isa, instructions=row.instructions, bundles=row.bundles,
                      mix=dict(row.mix or {}), spills=spills_of(row.details or {}),
                      digest=(row.details or {}).get("code_sha256"))


def module_info(row: HloModuleRecord) -> HloModuleInfo:
    fusions = tuple(FusionInfo(str(f.get("name")), f.get("kind"), int(f.get("instructions") or 0),
                               f.get("fingerprint") or None, f.get("op_name"), source_text(f.get("source")),
                               source_function(f.get("source")), f.get("shape"))
                    for f in row.fusions or ())
    ops = None if row.ops is None else tuple(
        FusionInfo(str(o.get("name")), o.get("opcode"), 0, o.get("fingerprint") or None, o.get("op_name"),
                   source_text(o.get("source")), source_function(o.get("source")), o.get("shape")) for o in row.ops)
    return HloModuleInfo(name=row.name, fingerprint=row.fingerprint, instructions=row.instructions,
                         opcodes=dict(row.opcodes or {}), fusions=fusions, ops=ops)


def load_commit_records(session: Session, benchmark_id: int, environment_id: int,
                        commit_ids: Sequence[int] | None = None, *, default_branch_only: bool = False,
                        with_ops: bool = True) -> dict[int, CommitRecords]:
    """Per commit (the given ones, or every commit the benchmark ran at), its records in this environment."""
    rows = benchmark_results(session, benchmark_id, environment_id, commit_ids, default_branch_only)
    result_ids = [r.id for r in rows]
    known = _known_layers(session, result_ids)
    by_commit: dict[int, list[Any]] = defaultdict(list)
    for row in rows:
        by_commit[row.commit_id].append(row)
    chosen: dict[int, int] = {}  # commit → the result whose static records speak for it
    for commit_id, results in by_commit.items():
        best = 0
        for r in results:  # in id order: the first with the most known layers wins
            layers = len(known.get(r.id, set()) & {"hlo", "kernels"})
            if layers > best:
                chosen[commit_id], best = r.id, layers
    modules = records_by_result(session, HloModuleRecord, sorted(chosen.values()))
    kernels = records_by_result(session, KernelCode, sorted(chosen.values()))
    with_op_table = [rid for rid in result_ids if "ops" in known.get(rid, set())] if with_ops else []
    ops = records_by_result(session, OpStat, with_op_table)

    out = {}
    for commit_id, results in by_commit.items():
        static_rid = chosen.get(commit_id)
        static = None
        if static_rid is not None:
            known_here = known[static_rid]
            static = StaticRecords(
                modules=tuple(module_info(m) for m in modules[static_rid]) if "hlo" in known_here else None,
                kernels=tuple(kernel_info(k) for k in kernels[static_rid]) if "kernels" in known_here else None)
        pooled: dict[tuple[str, str], list[Any]] = {}
        calls = 0
        op_rids = []
        for r in results:
            if r.id not in ops or "ops" not in known.get(r.id, set()):
                continue
            op_rids.append(r.id)
            calls += r.sample_count  # the profiled pass makes as many calls as there are samples
            for o in ops[r.id]:
                acc = pooled.setdefault((o.module, o.op), [o.category, 0, 0.0, 0.0])
                acc[1] += o.occurrences
                acc[2] += o.self_ns
                acc[3] += o.total_ns
        table = None
        if op_rids:
            records = tuple(OpRecord(m, op, cat, n, self_ns, total)
                            for (m, op), (cat, n, self_ns, total) in sorted(pooled.items()))
            table = OpTable(ops=records, calls=calls or None)
        out[commit_id] = CommitRecords(commit_id, results[0].position, static, static_rid, table, tuple(op_rids))
    return out


class DisassemblyLoader:
    """The ``DisassemblyFn`` of attribution: a kernel's instructions, re-derived from the artifact it was parsed
    from (the stored records keep counts, not text). Each artifact is parsed at most once per loader."""

    def __init__(self, session: Session, store: ArtifactStore, results: dict[SideName, int | None]) -> None:
        self.session = session
        self.store = store
        self.results = results
        self._parsed: dict[int, dict[str, list[str]]] = {}

    def __call__(self, side: SideName, isa: str, name: str) -> Sequence[str] | None:
        result_id = self.results.get(side)
        if result_id is None:
            return None
        row = kernel_source(self.session, result_id, isa, name)
        if row is None:
            return None
        if row.artifact_id not in self._parsed:
            self._parsed[row.artifact_id] = self._disassemble(row.kind, row.sha256, row.name)
        return self._parsed[row.artifact_id].get(row.symbol)

    def _disassemble(self, kind: str, sha256: str, source: str) -> dict[str, list[str]]:
        try:
            summary = parse(kind, self.store.get(sha256), source)
        except (ParseFailure, ArtifactError):
            return {}
        return {str(k["name"])[:1000]: list(k["disassembly"]) for k in summary.get("kernels", ())
                if isinstance(k.get("disassembly"), list)}
