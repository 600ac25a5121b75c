"""Turn a result's stored artifacts into records (op table, HLO modules, kernel code), replacing what an
earlier parse stored, in the caller's transaction.

A hostile or broken artifact never fails the run it belongs to: its error is recorded on the artifact and
the other artifacts are still parsed. A compressed artifact that expands past the store's cap (a decompression
bomb) is such an error, refused while it expands. Each artifact remembers the parser version that read it, so
`kernelwatch reparse` knows what a newer parser should read again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from runners.artifacts import ArtifactError, ArtifactStore
from runners.parsers.by_kind import PARSERS, ParseFailure, hlo_ops, parse
from runners.parsers.xplane_to_op_stats import HloOpInfo, kernel_hlo_names
from service.store import artifacts as artifact_rows
from service.store.locks import lock_results
from service.store.models import HloModuleRecord, KernelCode, OpStat


def _parser_kind(kind: str) -> str | None:
    return kind if kind in PARSERS else None


def parse_result(session: Session, store: ArtifactStore, result_id: int) -> int:
    """Parse every parseable artifact of one result; returns how many records were stored."""
    links = artifact_rows.links_of(session, result_id)
    if any(artifact.pruned_at is not None for _, artifact in links):
        # Retention removed some of its bytes: the records parsed before are all that is left of them, and
        # parsing again would delete those and find nothing to replace them with.
        return 0
    artifact_rows.delete_records(session, result_id)
    stored = 0
    done: set[int] = set()
    seen: set[tuple[str, ...]] = set()  # the first artifact naming a kernel, module or op wins
    # The HLO first: the trace's op table reads it (a GPU command buffer's kernels are named after the fusions
    # they run, in LLVM's spelling; categories come from the fusion kinds).
    links = sorted(links, key=lambda pair: pair[1].kind != "hlo")
    hlo_context: dict[str, dict[str, HloOpInfo]] = {}
    for link, artifact in links:
        kind = _parser_kind(artifact.kind)
        if kind is None:
            continue
        # Parsed for this result: its records are stored (or its error known). Kept per link, because the
        # records are per result: a new run naming bytes another run's parse already read has none until its
        # own parse, and static detection must not read that as its kernels having gone.
        link.parsed_version = PARSERS[kind].version
        if artifact.id in done:
            continue
        done.add(artifact.id)
        try:
            summary = parse(kind, store.get(artifact.sha256), link.name, max_bytes=store.max_bytes, hlo=hlo_context)
        except (ParseFailure, ArtifactError) as exc:
            artifact.parse_error = _error_text(exc)
            artifact.parsed_version = PARSERS[kind].version
            continue
        if kind == "hlo":
            hlo_context.update(hlo_ops(summary))
        rows = _rows(kind, summary, result_id, artifact.id, hlo_context)
        for row in rows:
            key = _row_key(row)
            if key not in seen:
                seen.add(key)
                session.add(row)
                stored += 1
        artifact.parsed_version = PARSERS[kind].version
        artifact.parse_error = None
    session.flush()
    return stored


def _error_text(exc: Exception) -> str:
    """The error as text any database stores: a hostile artifact's message may quote its bytes, and a NUL or a
    lone surrogate in it would fail this whole transaction (PostgreSQL refuses both)."""
    return _storable(str(exc)[:2000])


def _storable(text: str) -> str:
    """Text a parser read from an artifact (an op, kernel or module name, an error), made storable: NUL and lone
    surrogates escaped, so that one hostile name cannot fail the transaction that stores every record."""
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def _row_key(row: Any) -> tuple[str, ...]:
    """The row's identity within one result, as its table's unique constraint has it."""
    if isinstance(row, OpStat):
        return ("op", row.module, row.op)
    if isinstance(row, KernelCode):
        return ("kernel", row.isa, row.name)
    return ("module", row.name)


def _hlo_names(kernels: Sequence[str], hlo: Mapping[str, Mapping[str, HloOpInfo]]) -> dict[str, str]:
    """GPU kernels renamed to the HLO instruction their symbol spells (``kernel_hlo_names``: LLVM writes
    ``input_reduce_fusion.1`` as ``input_reduce_fusion_1``), where the result's HLO has that instruction and no
    other kernel of the listing spells it too (a sort's kernels ``sort_11_1__2`` and ``__3`` keep their symbols:
    one record per name). Named as the HLO and the op table name them, a kernel's code pairs with its fusion, and
    a renumbered fusion's kernel with its own kernel on the other side (service/detect/static_diff.py)."""
    names = {op: info for ops in hlo.values() for op, info in ops.items()}
    spelled = {}
    for kernel in kernels:
        if kernel not in names:
            found = next((n for n in kernel_hlo_names(kernel) if n in names), None)
            if found is not None:
                spelled[kernel] = names[found].of_fusion or found  # a fusion's root: the fusion
    taken = Counter(spelled.values())
    return {kernel: name for kernel, name in spelled.items() if taken[name] == 1 and name not in kernels}


def _rows(kind: str, summary: dict[str, Any], result_id: int, artifact_id: int,
          hlo: Mapping[str, Mapping[str, HloOpInfo]]) -> list[Any]:
    version = int(summary["parser_version"])
    if kind == "xplane":
        return [OpStat(result_id=result_id, module=_storable(o["module"][:500]), op=_storable(o["op"][:500]),
                       category=_storable(o["category"]),
                       occurrences=o["occurrences"], total_ns=o["total_ns"], self_ns=o["self_ns"],
                       parser_version=version) for o in summary["ops"]]
    if kind == "hlo":
        return [HloModuleRecord(result_id=result_id, artifact_id=artifact_id, name=_storable(m["name"][:500]),
                                fingerprint=m["fingerprint"], instructions=m["instructions"], opcodes=m["opcodes"],
                                fusions=m["fusion_list"], ops=m.get("op_list"), parser_version=version)
                for m in summary["modules"]]
    if kind == "llo":
        return [KernelCode(result_id=result_id, artifact_id=artifact_id, name=_storable(p["name"][:1000]),
                           isa="tpu-llo", instructions=p["ops"], bundles=p["bundles"], mix=p["slots"],
                           details={k: p[k] for k in ("mxu_units", "mxu_bundle_share", "spills", "loops",
                                                      "ops_per_bundle")},
                           parser_version=version) for p in summary["programs"]]
    isa = summary.get("isa", "x86-64") if kind == "x86-obj" else "sass"
    renamed = _hlo_names([str(k["name"]) for k in summary["kernels"]], hlo) if kind == "sass" else {}
    rows = []
    for k in summary["kernels"]:
        details = {key: value for key, value in k.items()
                   if key not in ("name", "instructions", "mix", "disassembly")}
        name = renamed.get(k["name"], k["name"])
        if name != k["name"]:
            details["symbol"] = k["name"]  # the listing's own name: what its disassembly is found by
        rows.append(KernelCode(result_id=result_id, artifact_id=artifact_id, name=_storable(name[:1000]),
                               isa=f"sass-{k['arch']}" if kind == "sass" and k.get("arch") else isa,
                               instructions=k["instructions"], bundles=None, mix=k["mix"], details=details,
                               parser_version=version))
    return rows


def parse_results(session: Session, store: ArtifactStore, result_ids: Sequence[int]) -> int:
    lock_results(session, result_ids)
    stored = sum(parse_result(session, store, rid) for rid in result_ids)
    # Parsing may land after detection ran: static findings and attributions that read these results are
    # brought up to date (cheap and idempotent).
    from service.pipeline.static_detection import refresh_after_parse

    refresh_after_parse(session, list(result_ids), store)
    return stored


def stale_results(session: Session) -> list[int]:
    """Results with an artifact never parsed, or parsed by an older version of its parser; never a result with a
    pruned artifact (its stored records are kept as they are: see parse_result)."""
    found: set[int] = set()
    pruned: set[int] = set()
    for result_id, kind, parsed, pruned_at in artifact_rows.parse_states(session):
        if pruned_at is not None:
            pruned.add(result_id)
        parser_kind = _parser_kind(kind)
        if parser_kind is not None and (parsed is None or parsed < PARSERS[parser_kind].version):
            found.add(result_id)
    return sorted(found - pruned)


def overdue_parses(session: Session, finished_before: datetime, limit: int = 1000) -> list[int]:
    """Results of runs finished before ``finished_before`` with a parseable artifact still unread for them: their
    parse task was lost. Celery's Redis transport pops a task and only then records it as unacknowledged, so a
    worker killed in between loses it and late acknowledgement cannot bring it back (celery/celery#7950); the
    beat's sweep (service/tasks.py) queues these again. A pruned result is never overdue: its bytes are gone."""
    return artifact_rows.unread_results(session, sorted(PARSERS), finished_before, limit)
