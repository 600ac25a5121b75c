"""What one LLO program gathers while its listing is read, and the :class:`LloProgram` record it becomes.

Ops are counted per opcode (classed once per distinct opcode when the record is built); special ops (``vpop``,
MXU ops, branches, spills) add what :func:`llo_grammar.classify` found in them; bundles are kept as columns
(address, header line, place in the text) from which :class:`llo_grammar.Bundles` reads them back on demand.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Mapping

from runners.parsers.llo_grammar import Bundles, Classified, OpcodeInfo
from runners.parsers.llo_records import FAMILIES, MXU_FAMILIES, SPILL_KINDS, LloLoop, LloParseError, LloProgram


class ProgramBuilder:
    """What one program has gathered so far: per-bundle columns, ops counted per opcode, and what its special
    ops showed."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.addresses = array("Q")
        self.lines, self.starts, self.ends = array("q"), array("q"), array("q")  # header line, offsets in the text
        self.histogram: Counter[int] = Counter()  # ops in a bundle → bundles
        self.multi_line = False
        self.counts: Counter[str] = Counter()  # opcode → ops
        self.contextual = dict.fromkeys(FAMILIES, 0)  # families of ops classed by their operands (vpop)
        self.with_mxu = 0
        self.units: set[str] = set()
        self.back_branches: list[tuple[int, int, int]] = []  # (target, address, line) with target <= address
        self.spills = dict.fromkeys(SPILL_KINDS, 0)
        self.maybe_spills: list[tuple[str, tuple[str, ...]]] = []  # (kind, #allocations named)
        self.operands: list[str] = []
        self.allocations: dict[str, str] = {}
        self.ignored = 0

    def add_bundle(self, address: int, line: int, start: int, end: int, ops: int) -> None:
        self.addresses.append(address)
        self.lines.append(line)
        self.starts.append(start)
        self.ends.append(end)
        self.histogram[ops] += 1

    def apply(self, info: OpcodeInfo, found: Classified, address: int, line: int) -> bool:
        """Adds what a special op showed; True when it is an MXU op."""
        if info.contextual:
            self.contextual[found.family] += 1
        if found.mxu:
            self.units.add(found.mxu)
        if found.target is not None and found.target <= address:
            self.back_branches.append((found.target, address, line))
        if found.spill:
            self.spills[found.spill] += 1
        elif found.spill_refs:
            self.maybe_spills.append((f"{info.width}_spill_{info.direction}", found.spill_refs))
        return found.family in MXU_FAMILIES

    def build(self, text: str, source: str, default_name: str, infos: Mapping[str, OpcodeInfo]) -> LloProgram:
        """The program's record; ``text`` is the listing its bundles are read back from."""
        name = self.name or default_name
        if not self.addresses:
            raise LloParseError(source, 0, f"program {name} has no bundles")
        per_family = dict.fromkeys(FAMILIES, 0)
        for opcode, count in self.counts.items():
            if not infos[opcode].contextual:
                per_family[infos[opcode].family] += count
        for kind, count in self.contextual.items():
            per_family[kind] += count
        spill_allocations = frozenset(key for key, body in self.allocations.items() if "spill" in body.lower())
        spills = dict(self.spills)
        for kind, names in self.maybe_spills:
            if spill_allocations.intersection(names):
                spills[kind] += 1
        loops: dict[tuple[int, int], LloLoop] = {}
        addresses = self.addresses
        for target, address, line in self.back_branches:
            if (target, address) not in loops:
                inside = bisect_right(addresses, address) - bisect_left(addresses, target)
                loops[(target, address)] = LloLoop(target, address, inside, line)
        count = len(addresses)
        return LloProgram(
            name=name, source=source, form="B" if self.multi_line else "A", bundle_count=count,
            op_count=sum(per_family.values()), ops_per_family=per_family,
            mxu_units=tuple(sorted(self.units, key=lambda unit: int(unit[3:]))),
            ops_per_bundle=dict(sorted(self.histogram.items())),
            mxu_bundle_share=self.with_mxu / count,
            loops=tuple(sorted(loops.values(), key=lambda loop: (loop.start, loop.end))), spills=spills,
            slot_usage={}, ignored_lines=self.ignored, operands=tuple(self.operands),
            allocations=dict(self.allocations),
            bundles=Bundles(text, source, self.starts, self.ends, self.lines, spill_allocations),
        )
