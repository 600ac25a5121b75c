"""Read side of the drill-down from one result to its assembly: header, op table, HLO module, kernels, listing.

Plain dataclasses out, no ORM object leaves a session; nothing is analysed here. The counts, times and fusions
are the parsed records (``op_stat``, ``hlo_module``, ``kernel_code``). The text of a module or a kernel is not
in the database: it is read from the result's content-addressed artifact, so :func:`hlo_view` and
:func:`kernel_listing` take the ``ArtifactStore`` (without one they return the records with no text, and say
so in ``note``).

Records belong to the result that captured the artifacts (a run's wall-time result); a benchmark's other
metrics in the same run (device time, GB/s...) show that result's records, named in ``records_result_id``.

The header also carries two checks read off the stored figures with the pure model (service/model/roofline.py),
one row's arithmetic, not analysis over series: where the benchmark's own FLOP and byte counts disagree with
XLA's stored cost analysis, and, for a collective, its algorithm and bus bandwidth against the interconnect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelwatch.hardware import hardware_for, hardware_label
from runners.artifacts import ArtifactError, ArtifactMissing, ArtifactStore
from runners.host_health import HEAVY_STEAL_FRACTION, heavy
from service.model.collective_kinds import bus_factor_formula, collective_kind, collective_size_bytes
from service.model.roofline import CostDisagreement, bus_factor, collective_bandwidth, cost_disagreements
from service.store.hlo_text import TextLine, fusion_texts, module_lines
from service.store.listings import ListingRow, LoopSpan, listing_from_artifact
from service.store.models import (
    Artifact,
    Benchmark,
    Commit,
    Environment,
    HloModuleRecord,
    KernelCode,
    OpStat,
    Repository,
    Result,
    ResultArtifact,
    Run,
    Series,
)
from service.store.queries import label_of

MAX_MODULE_LINES = 20_000  # past this a module's full text is cut; fusions keep their own bodies

__all__ = [
    "ArtifactInfo", "BandwidthView", "CostDisagreement", "FusionRow", "HloModuleView", "HloView", "KernelListing",
    "KernelSummary", "ListingRow", "LoopSpan", "OpRow", "ResultHeader", "StoredRoofline", "TextLine", "hlo_view",
    "kernel_listing", "kernels", "op_table", "records_result_id", "result_header",
]


@dataclass(frozen=True)
class StoredRoofline:
    """The roofline figures ingest stored for a result (service/model/result_roofline.py)."""

    intensity: float
    bound: str
    roofline_s: float
    achieved_fraction: float | None
    peak_flops_per_s: float
    peak_bytes_per_s: float
    peak_source: str
    above: bool = False  # measured faster than this roof allows: the roof does not bound the result


@dataclass(frozen=True)
class BandwidthView:
    """A collective result's bandwidth in the nccl-tests convention: algbw = S / t, busbw = algbw × bus factor,
    against one direction of the interconnect where its figure is published."""

    collective: str  # "all-reduce", "all-gather"...
    ranks: int
    size_bytes: float  # S: the per-rank buffer (see service/model/collective_kinds.py for where it comes from)
    seconds: float  # the time S took: this result's median
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    bus_factor: float
    bus_factor_formula: str  # "2(n−1)/n"...
    interconnect: str | None  # "NVLink"; None: no published interconnect figure for this hardware
    published_bytes_per_s: float | None  # the interconnect's figure as published (both directions for NVLink, ICI)
    bidirectional: bool
    peak_bytes_per_s: float | None  # per direction: what busbw is compared with
    fraction_of_peak: float | None
    peak_source: str | None  # the hardware and the document its figure is from


@dataclass(frozen=True)
class ArtifactInfo:
    name: str
    kind: str
    size: int
    sha256: str
    parse_error: str | None
    pruned_at: datetime | None = None  # retention removed its bytes (service/pipeline/prune.py)


@dataclass(frozen=True)
class ResultHeader:
    result_id: int
    series_id: int
    suite: str
    benchmark: str
    params: dict[str, Any]
    label: str
    metric: str
    unit: str
    direction: str
    status: str
    message: str | None
    samples: list[float]
    median: float | None
    mean: float | None
    stddev: float | None
    minimum: float | None
    maximum: float | None
    compile_time_s: float | None
    max_abs_error: float | None
    flops: float | None  # the benchmark's own count where it gave one, else XLA's cost analysis
    bytes_accessed: float | None
    cost_source: str | None  # "benchmark" | "XLA cost analysis" | None
    cost: dict[str, float]  # XLA's cost analysis as stored
    repository: str
    commit_sha: str
    commit_subject: str
    commit_position: int
    run_id: int
    run_uid: str
    branch: str | None
    trigger: str
    pr_number: int | None
    started_at: datetime
    backend: str
    device_kind: str
    device_count: int
    environment: dict[str, Any]  # the fingerprinted details: versions, flags, host ISA...
    records_result_id: int  # the result whose artifacts and parsed records these pages show
    # The run that captured them where it is not this result's own (a later round of the commit's session, whose
    # first round captured): the page names it, since its timeline is that run's, not this one's.
    records_run_uid: str | None = None
    artifacts: list[ArtifactInfo] = field(default_factory=list)
    roofline: StoredRoofline | None = None  # None: stored before ingest computed them, or no counts or peaks
    # Where the benchmark's own counts and XLA's differ by more than 10 %; empty where they agree or either
    # side is missing.
    cost_disagreements: list[CostDisagreement] = field(default_factory=list)
    bandwidth: BandwidthView | None = None  # for a collective's time or algbw result whose size is known
    # The run's host health (steal, busy, load, cores, GPUs) as its manifest reported it; None: not recorded.
    host_health: dict[str, Any] | None = None

    @property
    def hardware(self) -> str:
        return hardware_label(self.backend, self.device_kind, self.device_count)

    @property
    def heavy_steal(self) -> bool:
        return heavy(self.host_health)

    @property
    def heavy_steal_fraction(self) -> float:
        return HEAVY_STEAL_FRACTION

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOPs per byte accessed."""
        if self.flops is None or not self.bytes_accessed:
            return None
        return self.flops / self.bytes_accessed

    @property
    def seconds(self) -> float | None:
        """The median as a time, where this result measures one."""
        return self.median if self.unit == "s" and self.median else None


@dataclass(frozen=True)
class OpRow:
    module: str
    op: str
    category: str
    occurrences: int
    total_ns: float
    self_ns: float
    share: float  # of the result's self time, 0..1: self times add up without counting a nested op twice
    kernel: str | None  # a kernel_code row of the same name, for a link to its listing
    in_hlo: bool  # a fusion of the stored HLO module has this name

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.occurrences if self.occurrences else self.total_ns


@dataclass(frozen=True)
class FusionRow:
    name: str
    kind: str | None
    instructions: int
    source: dict[str, Any] | None  # {"file", "line", "function"} of the user's code that made it
    self_ns: float | None  # from the op table, None when the trace does not name it
    total_ns: float | None
    occurrences: int | None
    share: float | None
    kernel_isas: list[str]  # ISAs of the kernel_code rows of the same name (its compiled code)
    computation: str | None = None
    call: TextLine | None = None
    body: list[TextLine] = field(default_factory=list)
    fingerprint: str | None = None  # of what it computes, names aside (None: parsed before it was stored)
    op_name: str | None = None
    shape: str | None = None  # its result shape (None: parsed before it was stored)


@dataclass(frozen=True)
class ProgramOpRow:
    """One of the program's steps that is not a fusion (a sort, a convolution, a custom call, a loop), with its
    time where the trace names it."""

    name: str
    opcode: str
    shape: str
    source: dict[str, Any] | None
    op_name: str | None
    fingerprint: str | None
    self_ns: float | None
    share: float | None


@dataclass(frozen=True)
class HloModuleView:
    name: str
    fingerprint: str
    instructions: int
    opcodes: dict[str, int]
    fusions: list[FusionRow]  # by self time, slowest first; untimed fusions after, by name
    lines: list[TextLine]  # the module's text, cut at MAX_MODULE_LINES
    total_lines: int
    artifact_name: str | None
    # The program's other ops by self time; None: not recorded (parsed before parser 3)
    program_ops: list[ProgramOpRow] | None = None


@dataclass(frozen=True)
class HloView:
    result_id: int
    records_result_id: int
    modules: list[HloModuleView]
    note: str | None = None  # why text is missing, when it is


@dataclass(frozen=True)
class KernelSummary:
    name: str
    isa: str
    instructions: int | None
    bundles: int | None
    mix: dict[str, int]
    details: dict[str, Any]
    self_ns: float | None  # the op table's time for the op of the same name
    artifact_name: str | None

    @property
    def spills(self) -> int:
        """Spill operations or bytes, whichever the parser reports, summed (0: none reported)."""
        d = self.details
        total = sum(int(v) for v in (d.get("spills") or {}).values()) if isinstance(d.get("spills"), dict) else 0
        return total + int(d.get("spill_loads") or 0) + int(d.get("spill_stores") or 0)


@dataclass(frozen=True)
class KernelListing:
    name: str
    isa: str
    mix: dict[str, int]
    details: dict[str, Any]
    instructions: int | None
    bundles: int | None
    artifact_name: str | None
    columns: tuple[str, ...]  # LLO: the slot families, one column each; empty for x86 and SASS
    rows: list[ListingRow]
    loops: list[LoopSpan]
    total_rows: int
    note: str | None = None

    @property
    def is_bundled(self) -> bool:
        return self.isa == "tpu-llo"


def records_result_id(session: Session, result_id: int) -> int | None:
    """The result holding the artifacts for ``result_id``: itself, or the run's result of the same benchmark
    and environment that captured them (lowest id), or else one of another run of the same commit, benchmark and
    environment that did: of the same interleaved session first, else the newest. Only a session's first round
    captures (the rest time only), and the series' point opens its newest run, so a result page reached from the
    chart had no trace, HLO or assembly to show while its commit's compiled code and trace were stored a round
    before. None when the result does not exist."""
    result = session.get(Result, result_id)
    if result is None:
        return None
    own = session.scalar(select(ResultArtifact.result_id).where(ResultArtifact.result_id == result_id).limit(1))
    if own is not None:
        return result_id
    series = session.get(Series, result.series_id)
    assert series is not None  # a foreign key
    sibling = session.scalar(
        select(Result.id).join(Series, Series.id == Result.series_id)
        .join(ResultArtifact, ResultArtifact.result_id == Result.id)
        .where(Result.run_id == result.run_id, Series.benchmark_id == series.benchmark_id,
               Series.environment_id == series.environment_id)
        .order_by(Result.id).limit(1))
    if sibling is not None:
        return sibling
    run = session.get(Run, result.run_id)
    assert run is not None  # a foreign key
    captured = (select(Result.id).join(Series, Series.id == Result.series_id)
                .join(ResultArtifact, ResultArtifact.result_id == Result.id).join(Run, Run.id == Result.run_id)
                .where(Run.commit_id == run.commit_id, Series.benchmark_id == series.benchmark_id,
                       Series.environment_id == series.environment_id,
                       Series.benchmark_version == series.benchmark_version))  # the same benchmark code
    same_session = session.scalar(captured.where(Run.round_session == run.round_session).order_by(Result.id)
                                  .limit(1)) if run.round_session is not None else None
    other = same_session if same_session is not None else session.scalar(
        captured.order_by(Result.id.desc()).limit(1))
    return other if other is not None else result_id


def result_header(session: Session, result_id: int) -> ResultHeader | None:
    row = session.execute(
        select(Result, Series, Benchmark, Environment, Run, Commit, Repository.name)
        .join(Series, Series.id == Result.series_id).join(Benchmark, Benchmark.id == Series.benchmark_id)
        .join(Environment, Environment.id == Series.environment_id).join(Run, Run.id == Result.run_id)
        .join(Commit, Commit.id == Run.commit_id).join(Repository, Repository.id == Commit.repository_id)
        .where(Result.id == result_id)
    ).first()
    if row is None:
        return None
    r, s, b, env, run, commit, repo = row
    records_id = records_result_id(session, result_id) or result_id
    records_run = session.scalar(select(Run.run_uid).join(Result, Result.run_id == Run.id)
                                 .where(Result.id == records_id)) if records_id != result_id else None
    cost = {k: float(v) for k, v in (r.cost or {}).items()}
    flops, bytes_accessed, cost_source = r.flops, r.bytes_accessed, "benchmark" if r.flops is not None else None
    if flops is None and "flops" in cost:
        flops, bytes_accessed, cost_source = cost["flops"], cost.get("bytes accessed"), "XLA cost analysis"
    elif bytes_accessed is None and "bytes accessed" in cost:
        bytes_accessed = cost["bytes accessed"]
    linked = session.execute(
        select(ResultArtifact.name, Artifact).join(Artifact, Artifact.id == ResultArtifact.artifact_id)
        .where(ResultArtifact.result_id == records_id).order_by(ResultArtifact.name))
    artifacts = [ArtifactInfo(name, a.kind, a.size, a.sha256, a.parse_error, a.pruned_at) for name, a in linked]
    return ResultHeader(
        result_id=r.id, series_id=s.id, suite=b.suite, benchmark=b.name, params=dict(b.params),
        label=label_of(b.suite, b.name, b.params), metric=s.metric, unit=s.unit, direction=s.direction,
        status=r.status, message=r.message, samples=list(r.samples or []), median=r.median, mean=r.mean,
        stddev=r.stddev, minimum=r.minimum, maximum=r.maximum, compile_time_s=r.compile_time_s,
        max_abs_error=r.max_abs_error, flops=flops, bytes_accessed=bytes_accessed, cost_source=cost_source,
        cost=cost, repository=repo, commit_sha=commit.sha, commit_subject=commit.subject,
        commit_position=commit.position, run_id=run.id, run_uid=run.run_uid, branch=run.branch,
        trigger=run.trigger, pr_number=run.pr_number, started_at=run.started_at, backend=env.backend,
        device_kind=env.device_kind, device_count=env.device_count, environment=dict(env.details or {}),
        records_result_id=records_id, records_run_uid=records_run if records_run != run.run_uid else None,
        artifacts=artifacts, roofline=_stored_roofline(r),
        cost_disagreements=cost_disagreements(r.flops, r.bytes_accessed, cost),
        bandwidth=_bandwidth(b.name, b.params, s.metric, s.unit, r.median, env.backend, env.device_kind,
                             env.device_count),
        host_health=run.host_health)


# The harness's algorithm-bandwidth metric (runners/harness.py): samples of bytes_moved / t / 1e9.
ALGBW_METRIC, ALGBW_UNIT = "algbw", "GB/s"


def _bandwidth(benchmark: str, params: dict[str, Any], metric: str, unit: str, median: float | None,
               backend: str, device_kind: str, device_count: int) -> BandwidthView | None:
    """A collective result's bandwidth from its median: a time (wall, device) directly; the algbw series' GB/s
    back into the time of its size. None for anything else, or where the size is not known."""
    kind = collective_kind(benchmark)
    size = collective_size_bytes(params)
    if kind is None or size is None or median is None or not (median > 0 and math.isfinite(median)):
        return None
    if unit == "s":
        seconds = median
    elif metric == ALGBW_METRIC and unit == ALGBW_UNIT:
        seconds = size / (median * 1e9)
    else:
        return None
    # The ranks are the environment's devices: the runner gives the suite's 8-device collectives an 8-device
    # environment of their own on a CPU host, and they fail on fewer. The mesh itself is not stored, so a host
    # with more devices than a collective used (16 GPUs running an 8-rank mesh) would overstate n here.
    ranks = max(1, device_count)
    hardware = hardware_for(backend, device_kind)
    figures = collective_bandwidth(kind, size, seconds, ranks, hardware)
    link = hardware.interconnect if hardware is not None else None
    return BandwidthView(
        collective=kind, ranks=ranks, size_bytes=size, seconds=seconds,
        algbw_bytes_per_s=figures.algbw_bytes_per_s, busbw_bytes_per_s=figures.busbw_bytes_per_s,
        bus_factor=bus_factor(kind, ranks), bus_factor_formula=bus_factor_formula(kind),
        interconnect=link.name if link is not None else None,
        published_bytes_per_s=link.bytes_per_s if link is not None else None,
        bidirectional=link.bidirectional if link is not None else False,
        peak_bytes_per_s=figures.peak_bytes_per_s, fraction_of_peak=figures.fraction_of_peak,
        peak_source=f"{hardware.name}: {hardware.source}" if hardware is not None and link is not None else None)


def _stored_roofline(r: Result) -> StoredRoofline | None:
    if (r.roofline_intensity is None or r.roofline_bound is None or r.roofline_s is None
            or r.roofline_peak_flops_per_s is None or r.roofline_peak_bytes_per_s is None):
        return None
    return StoredRoofline(r.roofline_intensity, r.roofline_bound, r.roofline_s, r.roofline_fraction,
                          r.roofline_peak_flops_per_s, r.roofline_peak_bytes_per_s, r.roofline_peak_source or "",
                          bool(r.roofline_above))


def _kernel_names(session: Session, result_id: int) -> set[str]:
    return set(session.scalars(select(KernelCode.name).where(KernelCode.result_id == result_id)))


def _fusion_names(session: Session, result_id: int) -> set[str]:
    names: set[str] = set()
    for fusions in session.scalars(select(HloModuleRecord.fusions).where(HloModuleRecord.result_id == result_id)):
        names.update(str(f.get("name")) for f in fusions or ())
    return names


def op_table(session: Session, result_id: int) -> list[OpRow]:
    """The result's op table, slowest self time first (ties: total time, then name)."""
    rid = records_result_id(session, result_id)
    if rid is None:
        return []
    stats = list(session.scalars(select(OpStat).where(OpStat.result_id == rid)))
    whole = sum(o.self_ns for o in stats)
    kernels, fusions = _kernel_names(session, rid), _fusion_names(session, rid)
    rows = [OpRow(module=o.module, op=o.op, category=o.category, occurrences=o.occurrences, total_ns=o.total_ns,
                  self_ns=o.self_ns, share=o.self_ns / whole if whole else 0.0,
                  kernel=o.op if o.op in kernels else None, in_hlo=o.op in fusions) for o in stats]
    rows.sort(key=lambda o: (-o.self_ns, -o.total_ns, o.module, o.op))
    return rows


def _artifact_text(session: Session, store: ArtifactStore, artifact_id: int) -> tuple[str | None, str | None]:
    """(text, error) of a stored artifact."""
    artifact = session.get(Artifact, artifact_id)
    if artifact is None:
        return None, "the artifact record is missing"
    try:
        return store.get(artifact.sha256).decode("utf-8", errors="replace"), None
    except ArtifactError as exc:
        return None, _unreadable(artifact, exc)


def _unreadable(artifact: Artifact, exc: ArtifactError) -> str:
    """Why an artifact's bytes cannot be shown: retention's date when it removed them, else the store's error."""
    if isinstance(exc, ArtifactMissing) and artifact.pruned_at is not None:
        return f"pruned by retention on {artifact.pruned_at:%Y-%m-%d}"
    return str(exc)


def _artifact_name(session: Session, result_id: int, artifact_id: int) -> str | None:
    return session.scalar(select(ResultArtifact.name).where(ResultArtifact.result_id == result_id,
                                                            ResultArtifact.artifact_id == artifact_id).limit(1))


def hlo_view(session: Session, result_id: int, store: ArtifactStore | None = None) -> HloView | None:
    """The result's optimized module(s) with fusions by time; with ``store``, the text and each fusion's body."""
    rid = records_result_id(session, result_id)
    if rid is None:
        return None
    ops = {o.op: o for o in op_table(session, result_id)}
    kernel_rows = session.execute(select(KernelCode.name, KernelCode.isa).where(KernelCode.result_id == rid)).all()
    kernels_by_name: dict[str, list[str]] = {}
    for name, isa in kernel_rows:
        kernels_by_name.setdefault(name, []).append(isa)
    notes: list[str] = []
    texts: dict[int, str | None] = {}
    modules = []
    for m in session.scalars(select(HloModuleRecord).where(HloModuleRecord.result_id == rid)
                             .order_by(HloModuleRecord.name)):
        if store is not None and m.artifact_id not in texts:
            texts[m.artifact_id], error = _artifact_text(session, store, m.artifact_id)
            if error:
                notes.append(f"text of {m.name} unavailable: {error}")
        text = texts.get(m.artifact_id)
        lines = module_lines(text).get(m.name, []) if text is not None else []
        bodies = fusion_texts(lines)
        fusions = []
        for f in m.fusions or ():
            name = str(f.get("name"))
            op, body = ops.get(name), bodies.get(name)
            fusions.append(FusionRow(
                name=name, kind=f.get("kind"), instructions=int(f.get("instructions") or 0), source=f.get("source"),
                self_ns=op.self_ns if op else None, total_ns=op.total_ns if op else None,
                occurrences=op.occurrences if op else None, share=op.share if op else None,
                kernel_isas=sorted(kernels_by_name.get(name, [])),
                computation=body.computation if body else None, call=body.call if body else None,
                body=body.body if body else [], fingerprint=f.get("fingerprint") or None, op_name=f.get("op_name"),
                shape=f.get("shape")))
        fusions.sort(key=lambda f: (f.self_ns is None, -(f.self_ns or 0.0), f.name))
        modules.append(HloModuleView(name=m.name, fingerprint=m.fingerprint, instructions=m.instructions,
                                     opcodes=dict(m.opcodes or {}), fusions=fusions,
                                     lines=lines[:MAX_MODULE_LINES], total_lines=len(lines),
                                     artifact_name=_artifact_name(session, rid, m.artifact_id),
                                     program_ops=_program_ops(m.ops, ops) if m.ops is not None else None))
    if store is None and modules:
        notes.append("module text not loaded (no artifact store given)")
    return HloView(result_id=result_id, records_result_id=rid, modules=modules,
                   note="; ".join(notes) if notes else None)


def _program_ops(records: list[dict[str, Any]], ops: dict[str, OpRow]) -> list[ProgramOpRow]:
    rows = []
    for o in records:
        name = str(o.get("name"))
        timed = ops.get(name)
        rows.append(ProgramOpRow(name=name, opcode=str(o.get("opcode")), shape=str(o.get("shape") or ""),
                                 source=o.get("source"), op_name=o.get("op_name"),
                                 fingerprint=o.get("fingerprint") or None,
                                 self_ns=timed.self_ns if timed else None, share=timed.share if timed else None))
    return sorted(rows, key=lambda r: (r.self_ns is None, -(r.self_ns or 0.0), r.name))


def kernels(session: Session, result_id: int) -> list[KernelSummary]:
    """The result's compiled kernels, slowest first where the op table times them, then by name."""
    rid = records_result_id(session, result_id)
    if rid is None:
        return []
    times = {o.op: o.self_ns for o in session.scalars(select(OpStat).where(OpStat.result_id == rid))}
    out = [KernelSummary(name=k.name, isa=k.isa, instructions=k.instructions, bundles=k.bundles,
                         mix=dict(k.mix or {}), details=dict(k.details or {}), self_ns=times.get(k.name),
                         artifact_name=_artifact_name(session, rid, k.artifact_id))
           for k in session.scalars(select(KernelCode).where(KernelCode.result_id == rid))]
    out.sort(key=lambda k: (k.self_ns is None, -(k.self_ns or 0.0), k.name, k.isa))
    return out


def kernel_listing(session: Session, result_id: int, name: str, store: ArtifactStore | None = None,
                   isa: str | None = None) -> KernelListing | None:
    """One kernel's code, one row per instruction (x86, SASS) or bundle (LLO); None when the result has no
    kernel of that name (and ISA, when given). Without ``store`` (or when its artifact cannot be read) the rows
    are empty and ``note`` says why; the counts come from the stored record either way."""
    rid = records_result_id(session, result_id)
    if rid is None:
        return None
    query = select(KernelCode).where(KernelCode.result_id == rid, KernelCode.name == name)
    if isa is not None:
        query = query.where(KernelCode.isa == isa)
    k = session.scalars(query.order_by(KernelCode.isa).limit(1)).first()
    if k is None:
        return None
    source = _artifact_name(session, rid, k.artifact_id) or name
    base = KernelListing(name=k.name, isa=k.isa, mix=dict(k.mix or {}), details=dict(k.details or {}),
                         instructions=k.instructions, bundles=k.bundles, artifact_name=source, columns=(), rows=[],
                         loops=[], total_rows=0)
    if store is None:
        return replace(base, note="code not loaded (no artifact store given)")
    artifact = session.get(Artifact, k.artifact_id)
    assert artifact is not None  # a foreign key
    try:
        parsed = listing_from_artifact(artifact.kind, store.get(artifact.sha256), source, k.name)
    except ArtifactError as exc:
        return replace(base, note=f"the code could not be read: {_unreadable(artifact, exc)}")
    except ValueError as exc:  # parsers raise ValueErrors naming the file and line
        return replace(base, note=f"the code could not be read: {exc}")
    if parsed is None:
        return replace(base, note=f"{source} no longer holds a kernel of this name")
    return replace(base, columns=parsed.columns, rows=parsed.rows, loops=parsed.loops, total_rows=parsed.total_rows,
                   note=parsed.note)
