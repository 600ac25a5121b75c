"""A real run with capture on: its trace, HLO and object files become op, module and kernel records, linked by
fusion name; a broken artifact is recorded, not fatal; reparse is idempotent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from runners.local import RunRequest, run_at_commit
from runners.parsers.x86_obj_to_kernels import PARSER_VERSION as X86_PARSER_VERSION
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.jobs import JobEnv
from service.pipeline.parse_artifacts import parse_results, stale_results
from service.pipeline.queue import InProcessQueue
from service.pipeline.submit import submit_manifest
from service.store.db import unit_of_work
from service.store.models import Artifact, HloModuleRecord, KernelCode, OpStat, Result, ResultArtifact, Series
from tests.gitrepo import project_suite_repo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def submit_h200_layernorm(sessions: sessionmaker[Session], store: ArtifactStore, refs: list[Any]) -> None:
    """An H200 layernorm result with these artifacts and the real optimized HLO of its module (tests/fixtures)."""
    import dataclasses

    from tests import builders

    hlo = store.put((FIXTURES / "hlo_gpu" / "h200_layernorm_unfused.after_optimizations.txt").read_bytes(),
                    kind="hlo", name="module_133642.jit_layer_norm.sm_9.0a_gpu_after_optimizations.txt")
    result = builders.result(suite="norms", name="layernorm", samples=[2.1e-4] * 10,
                             artifacts=[dataclasses.asdict(r) for r in [*refs, hlo]])
    doc = builders.manifest(results=[result], environment=builders.environment(**builders.H200))
    submit_manifest(sessions, InProcessQueue(JobEnv(sessions, EDivisiveDetector(), store)), doc, store)


def counts(session: Session) -> tuple[int, int, int]:
    return (session.scalar(select(func.count(OpStat.id))) or 0, session.scalar(select(func.count(KernelCode.id))) or 0,
            session.scalar(select(func.count(HloModuleRecord.id))) or 0)


def test_captured_run_is_parsed_and_linked_by_fusion_name(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    request = RunRequest(repo=project_suite_repo(tmp_path / "repo"), rev="HEAD", samples=3, warmup=1,
                         suite="norms/rmsnorm", params="fused=True", quick=True, capture_dir=store.root)
    [manifest] = run_at_commit(request, tmp_path / "worktrees")
    submit_manifest(sessions, InProcessQueue(JobEnv(sessions, EDivisiveDetector(), store)), manifest, store)

    with sessions() as s:
        wall = s.scalars(select(Result).join(Series).where(Series.metric == "wall_time")).one()
        ops = list(s.scalars(select(OpStat).where(OpStat.result_id == wall.id)))
        kernels = list(s.scalars(select(KernelCode).where(KernelCode.result_id == wall.id)))
        [module] = s.scalars(select(HloModuleRecord).where(HloModuleRecord.result_id == wall.id))
        assert ops and kernels and module.name == "jit_rms_norm" and len(module.fingerprint) == 64
        assert all(op.module == "jit_rms_norm" and op.occurrences == 3 and op.total_ns > 0 for op in ops)
        # The fusion name links the layers: trace op = HLO fusion = object-file symbol.
        fusions = {f["name"] for f in module.fusions}
        generated = {k.name for k in kernels if k.isa == "x86-64"}
        traced = {op.op for op in ops}
        assert generated and generated <= fusions | traced, generated - fusions - traced
        assert generated & traced, (generated, traced)
        assert all(sum(k.mix.values()) == k.instructions for k in kernels)
        assert s.scalar(select(func.count(Artifact.id)).where(Artifact.parse_error.is_not(None))) == 0
        before = counts(s)
        assert stale_results(s) == []

    # A newer parser (simulated by forgetting the version) reads everything again: same records, not twice.
    with unit_of_work(sessions) as s:
        s.execute(update(ResultArtifact).values(parsed_version=None))
    with sessions() as s:
        assert stale_results(s) == [wall.id]
    with unit_of_work(sessions) as s:
        parse_results(s, store, [wall.id])
    with sessions() as s:
        assert counts(s) == before and stale_results(s) == []


def test_a_broken_artifact_is_recorded_and_the_rest_still_parsed(sessions: sessionmaker[Session],
                                                                 tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    request = RunRequest(repo=project_suite_repo(tmp_path / "repo"), rev="HEAD", samples=2, warmup=0,
                         suite="softmax_long/*", params="cols=32768", quick=True, capture_dir=store.root)
    [manifest] = run_at_commit(request, tmp_path / "worktrees")
    garbage = store.put(b"\x7fELF" + b"\xff" * 200, kind="x86-obj", name="hostile.o")
    result = next(r for r in manifest["results"] if r["metric"] == "wall_time")
    result["artifacts"].append({"kind": "x86-obj", "name": "hostile.o", "sha256": garbage.sha256,
                                "size": garbage.size})
    submit_manifest(sessions, InProcessQueue(JobEnv(sessions, EDivisiveDetector(), store)), manifest, store)
    with sessions() as s:
        bad = s.scalars(select(Artifact).where(Artifact.sha256 == garbage.sha256)).one()
        assert bad.parse_error and "hostile.o" in bad.parse_error and bad.parsed_version == X86_PARSER_VERSION
        assert (s.scalar(select(func.count(OpStat.id))) or 0) > 0
        linked = s.scalar(select(func.count()).select_from(ResultArtifact).where(ResultArtifact.name == "hostile.o"))
        assert linked == 1


def test_a_gpu_trace_is_parsed_with_its_result_s_hlo(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    """The real H200 trace and optimized HLO of an unfused layernorm (tests/fixtures): XLA replayed its kernels as
    one command buffer, so every kernel's ``hlo_op`` is ``command_buffer_1``. Parsed with the result's HLO, the op
    table names each fusion as the HLO does (``input_reduce_fusion.1``, not LLVM's ``input_reduce_fusion_1``) with
    its kind, so the layers link by name as they do on a CPU."""
    import gzip

    store = ArtifactStore(tmp_path / "artifacts")
    trace = gzip.decompress((FIXTURES / "xplane_gpu" / "h200_layernorm_unfused.xplane.pb.gz").read_bytes())
    submit_h200_layernorm(sessions, store, [store.put(trace, kind="xplane", name="trace.xplane.pb")])

    with sessions() as s:
        ops = {op.op: op for op in s.scalars(select(OpStat))}
        [module] = s.scalars(select(HloModuleRecord))
        fusions = {f["name"]: f["kind"] for f in module.fusions}
        assert "command_buffer_1" not in ops and s.scalar(
            select(func.count(Artifact.id)).where(Artifact.parse_error.is_not(None))) == 0
        named = {name for name in ops if name in fusions}
        assert {"input_reduce_fusion", "input_reduce_fusion.1", "loop_add_fusion"} <= named
        assert "input_reduce_fusion_1" not in ops
        assert ops["input_reduce_fusion.1"].category == "input_fusion" and fusions["input_reduce_fusion.1"] == "kInput"
        assert ops["loop_add_fusion"].category == "loop_fusion"
        assert all(op.module == module.name == "jit_layer_norm" and op.occurrences % 10 == 0 for op in ops.values())


def test_gpu_kernels_bear_the_name_of_the_fusion_they_run(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    """A GPU kernel's symbol is its fusion's name in LLVM's spelling (``input_reduce_fusion_1`` runs
    ``input_reduce_fusion.1``). Parsed with the result's HLO, its record bears the HLO's name, as the op table
    does, so the layers pair by name; the listing's own symbol is kept, and the disassembly is found by it.
    Kernels that spell one instruction between them (a sort's ``__2``/``__3``) or none keep their symbols."""
    from service.pipeline.result_records import DisassemblyLoader
    from service.store.records import kernel_source

    listing = (FIXTURES / "sass" / "h200_gemm_fusion_dot.sass").read_text()
    header, body = listing.split("\t\tFunction : gemm_fusion_dot\n")
    functions = ["input_reduce_fusion_1", "loop_add_fusion", "gemm_fusion_dot", "input_reduce_fusion__2",
                 "input_reduce_fusion__3"]
    sass = header + "".join(f"\t\tFunction : {name}\n{body}" for name in functions)
    store = ArtifactStore(tmp_path / "artifacts")
    submit_h200_layernorm(sessions, store, [store.put(sass.encode(), kind="sass",
                                                      name="module_133642.jit_layer_norm.sm_90a.sass")])

    with sessions() as s:
        kernels = {k.name: k for k in s.scalars(select(KernelCode))}
        assert set(kernels) == {"input_reduce_fusion.1", "loop_add_fusion", "gemm_fusion_dot",
                                "input_reduce_fusion__2", "input_reduce_fusion__3"}
        renamed = kernels["input_reduce_fusion.1"]
        assert renamed.details["symbol"] == "input_reduce_fusion_1" and renamed.isa == "sass-sm_90a"
        assert "symbol" not in kernels["loop_add_fusion"].details
        source = kernel_source(s, renamed.result_id, renamed.isa, "input_reduce_fusion.1")
        assert source is not None and source.symbol == "input_reduce_fusion_1"
        loader = DisassemblyLoader(s, store, {"after": renamed.result_id})
        listing_lines = loader("after", renamed.isa, "input_reduce_fusion.1")
        assert listing_lines is not None and listing_lines[0].strip() == "Function : input_reduce_fusion_1"
        other = loader("after", renamed.isa, "gemm_fusion_dot")  # the same code under its own name
        assert other is not None and other[1:] == listing_lines[1:]
