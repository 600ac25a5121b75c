"""One entry to every parser, by artifact kind: bytes in, a JSON-ready summary out.

Both `kernelwatch parse KIND PATH` and the service's parsing of stored artifacts go through ``parse``, so the
command a person runs shows exactly the records the service stores. Every parser's errors are ValueErrors
naming the file (and line, for text formats); ``ParseFailure`` carries them out of here uniformly. Compressed
input is expanded here, and only here, through runners/bounded_decompress.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runners.bounded_decompress import DecompressionError, decompress_bounded, is_gzip
from runners.parsers import hlo_text_to_module, llo_to_bundles, sass_to_kernels, x86_obj_to_kernels, xplane_to_op_stats

Summary = dict[str, Any]
MAX_EXPANDED_BYTES = 256 << 20  # what a compressed artifact may expand to (the artifact store's own cap)


class ParseFailure(ValueError):
    pass


def _text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseFailure(f"{source}: not UTF-8 text (byte {exc.start})") from None


def _location(source: Any) -> dict[str, Any] | None:
    if source is None:
        return None
    return {"file": source.file, "line": source.line, "function": source.function}


def hlo_summary(data: bytes, source: str) -> Summary:
    modules = hlo_text_to_module.parse_hlo_text(_text(data, source), source)
    return {"parser_version": hlo_text_to_module.PARSER_VERSION, "modules": [
        {
            "name": m.name,
            "fingerprint": m.fingerprint,
            "instructions": m.instruction_count,
            "fusions": len(m.fusions),
            "opcodes": dict(sorted(m.opcodes.items())),
            "fusion_list": [{"name": f.name, "kind": f.kind, "instructions": f.instruction_count,
                             "source": _location(f.source), "op_name": f.op_name, "fingerprint": f.fingerprint,
                             "root": f.root, "shape": f.shape}
                            for f in m.fusions],
            "op_list": [{"name": o.name, "opcode": o.opcode, "shape": o.shape, "source": _location(o.source),
                         "op_name": o.op_name, "fingerprint": o.fingerprint} for o in m.ops],
        }
        for m in modules
    ]}


def hlo_ops(summary: Summary) -> dict[str, dict[str, xplane_to_op_stats.HloOpInfo]]:
    """From an HLO summary (``hlo_summary``), each module's fusions and program ops as the op table's parser
    reads them: by module name, by instruction name."""
    out: dict[str, dict[str, xplane_to_op_stats.HloOpInfo]] = {}
    for m in summary.get("modules", []):
        ops = out.setdefault(str(m["name"]), {})
        for f in m.get("fusion_list") or []:
            ops[str(f["name"])] = xplane_to_op_stats.HloOpInfo("fusion", f.get("kind"))
        for o in m.get("op_list") or []:
            ops.setdefault(str(o["name"]), xplane_to_op_stats.HloOpInfo(str(o["opcode"]), None))
        # A fusion's ROOT stands for the fusion where no step of the program has its name: a GPU kernel of a
        # custom fusion is named after its root (a sort's), and is the fusion's in the op table and the code.
        for f in m.get("fusion_list") or []:
            root = f.get("root")
            if isinstance(root, str) and root not in ops:
                ops[root] = xplane_to_op_stats.HloOpInfo("fusion", f.get("kind"), of_fusion=str(f["name"]))
    return out


def xplane_summary(data: bytes, source: str,
                   hlo: Mapping[str, Mapping[str, xplane_to_op_stats.HloOpInfo]] | None = None) -> Summary:
    """``hlo``: the result's HLO modules (``hlo_ops``), which name the kernels of a GPU command buffer and refine
    the categories."""
    stats = xplane_to_op_stats.parse_xplane_bytes(data, source, hlo)
    return {"parser_version": xplane_to_op_stats.PARSER_VERSION, "ops": [
        {"module": s.module, "op": s.op, "occurrences": s.occurrences, "total_ns": s.total_ns,
         "self_ns": s.self_ns, "category": s.category, "source": s.source}
        for s in stats
    ]}


def x86_summary(data: bytes, source: str) -> Summary:
    kernels = x86_obj_to_kernels.parse_x86_object(data, source)
    return {"parser_version": x86_obj_to_kernels.PARSER_VERSION, "isa": x86_obj_to_kernels.ISA, "kernels": [
        {"name": k.name, "instructions": k.instruction_count, "mix": dict(k.mix), "code_bytes": k.size_bytes,
         "vector_width_bits": k.vector_width_bits, "code_sha256": k.code_sha256,
         "disassembly": [f"{i.address:#06x}  {i.mnemonic} {i.operands}".rstrip() for i in k.instructions]}
        for k in kernels
    ]}


def sass_summary(data: bytes, source: str) -> Summary:
    kernels = sass_to_kernels.parse_sass(_text(data, source), source)
    return {"parser_version": sass_to_kernels.PARSER_VERSION, "kernels": [
        {"name": k.name, "short_name": k.short_name, "arch": k.arch, "instructions": k.instruction_count,
         "mix": dict(k.mix), "registers": k.registers, "spill_loads": k.spill_loads,
         "spill_stores": k.spill_stores, "disassembly": k.text.splitlines()}
        for k in kernels
    ]}


def llo_summary(data: bytes, source: str) -> Summary:
    programs = llo_to_bundles.parse_llo(_text(data, source), source, llo_to_bundles.program_name_from_path(source))
    return {"parser_version": llo_to_bundles.PARSER_VERSION, "programs": [
        {"name": p.name, "bundles": p.bundle_count, "ops": p.op_count, "slots": dict(p.ops_per_family),
         "mxu_units": list(p.mxu_units), "mxu_bundle_share": p.mxu_bundle_share, "spills": dict(p.spills),
         "ops_per_bundle": {str(k): v for k, v in p.ops_per_bundle.items()},
         "loops": [{"start": lp.start, "end": lp.end, "bundles": lp.bundle_count} for lp in p.loops]}
        for p in programs
    ]}


@dataclass(frozen=True)
class Parser:
    version: int
    summarize: Callable[[bytes, str], Summary]


PARSERS: dict[str, Parser] = {
    "hlo": Parser(hlo_text_to_module.PARSER_VERSION, hlo_summary),
    "xplane": Parser(xplane_to_op_stats.PARSER_VERSION, xplane_summary),
    "x86-obj": Parser(x86_obj_to_kernels.PARSER_VERSION, x86_summary),
    "sass": Parser(sass_to_kernels.PARSER_VERSION, sass_summary),
    "llo": Parser(llo_to_bundles.PARSER_VERSION, llo_summary),
}


def parse(kind: str, data: bytes, source: str, max_bytes: int = MAX_EXPANDED_BYTES,
          hlo: Mapping[str, Mapping[str, xplane_to_op_stats.HloOpInfo]] | None = None) -> Summary:
    """``data`` of ``kind`` summarized. Gzip-compressed data (``.xplane.pb.gz``, ``.txt.gz``: no format a parser
    reads starts with gzip's magic bytes) is parsed as what it holds, expanded through a cap of ``max_bytes``: a
    decompression bomb is a ParseFailure saying it expands past the cap, never a gigabyte in memory. ``hlo``: the
    result's HLO modules (``hlo_ops``), which a trace's op table reads (other kinds ignore it)."""
    parser = PARSERS.get(kind)
    if parser is None:
        raise ParseFailure(f"no parser for {kind!r}; kinds: {', '.join(sorted(PARSERS))}")
    if is_gzip(data):
        try:
            data = decompress_bounded(data, max_bytes, source, "gzip")
        except DecompressionError as exc:
            raise ParseFailure(str(exc)) from None
    try:
        if kind == "xplane" and hlo:
            return xplane_summary(data, source, hlo)
        return parser.summarize(data, source)
    except ParseFailure:
        raise
    except ValueError as exc:  # every parser's typed error is a ValueError that names the file and line
        raise ParseFailure(str(exc)) from exc
