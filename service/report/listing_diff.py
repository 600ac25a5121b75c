"""Two assembly listings aligned side by side, as Compiler Explorer's diff view shows them. PURE: lines in, rows out.

Alignment vs display. Lines are *aligned* on a normalised key, but every row carries and shows the real text.
The key exists because one inserted instruction shifts every address after it, renumbers labels and often moves
register allocation, and a diff of the raw text would then call every following line changed. Rules
(``align_key``), in order:

1. the location prefix goes: ``0x0040  `` (x86, capstone), ``/*0040*/`` (SASS), ``17 :`` (an LLO bundle index);
2. ``/* ... */`` comments go (SASS encodings), and a trailing ``;``; whitespace is collapsed;
3. in the operands (never the mnemonic, so ``vfmadd231ps`` stays itself), hex literals become ``0x#``
   (branch targets, rip-relative displacements and constant-bank offsets all move with the code), local labels
   become ``.L#``, and the number of a register-like name becomes ``#`` (``ymm3`` → ``ymm#``, ``R12`` → ``R#``,
   ``v17`` → ``v#``); a dotted suffix such as ``.f32`` or ``.bf16`` is kept, since a dtype change is real.
   x86's named registers (``rax``, ``rcx``) have no number and stay: swapping them makes a ``replace`` row.

Two lines with one key align as ``same``; when their displayed text (rule 1 and 2 only) differs anyway, the row
is ``same`` with ``exact`` False and its segments mark what differs, so a renamed register or moved target is
visible without breaking the alignment.

The algorithm. Common prefix and suffix are cut first (linear; a local change leaves a small middle). The
middle is aligned with Myers' O(ND) diff (``myers_diff``: the shortest edit script, as ``git diff`` finds),
which needs no anchor lines, so an unrolled loop of a handful of distinct keys still aligns exactly. Myers costs
about D² steps for D edits, so past ``max_edits`` (or when a cheap lower bound on D already exceeds it: two
unrelated kernels) ``difflib.SequenceMatcher`` takes over on the display keys (rule 1 and 2 only: more lines are
distinct, so more can anchor a match), each block between its matches aligned again on the keys. Its
"autojunk" anchor filter is off while a block is under ``exact_limit`` cells and on beyond; on huge, very
different listings the alignment gets coarse, never quadratic. A moved block shows as one deletion and one
insertion. A replaced block is aligned again on the mnemonic alone, so that within it ``vmulps`` pairs with
``vmulps`` (a ``replace`` row, its differing tokens marked) and the rest are insertions and deletions; what that
leaves is paired in order. Token marks are computed for the first ``max_marked`` pairs; later changed lines are
marked whole.

HLO text aligns on its own keys (:func:`hlo_align_key`: name counters such as ``%add.12`` and ``metadata``
masked), its replaced blocks pair on the opcode.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from service.report.myers_diff import Opcode, myers_opcodes

RowKind = Literal["same", "insert", "delete", "replace"]

_LOCATION = re.compile(r"^\s*(?:/\*[0-9a-fA-F]+\*/|0x[0-9a-fA-F]+:?|(?=[0-9a-fA-F]*\d)[0-9a-fA-F]+\s*:)\s*")
_COMMENT = re.compile(r"/\*.*?\*/")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_LABEL = re.compile(r"\.L[\w$.]*")
# A name of letters then digits, not right after a dot or another word character: a register (ymm3, R12,
# UR4, P0, v17, s4, mrf0), not a dtype suffix (.f32) nor part of a longer word.
_REGISTER = re.compile(r"(?<![\w.])([A-Za-z]{1,4})\d+\b")
_TOKEN = re.compile(r"/\*.*?\*/|\w+|\s+|[^\w\s]")
_MNEMONIC = re.compile(r"^[A-Za-z_][\w.]*$")


def location_split(line: str) -> tuple[str, str]:
    """The line's location prefix (address, bundle index) and the rest, so that a renumbered address is shown
    but never counted as a difference."""
    match = _LOCATION.match(line)
    end = match.end() if match else 0
    return line[:end], line[end:]


def display_key(line: str) -> str:
    """What a reader compares: no location, no encoding comments, whitespace collapsed (rules 1 and 2)."""
    text = " ".join(_COMMENT.sub(" ", location_split(line)[1]).split())
    return text[:-2] if text.endswith(" ;") else text.rstrip(";")


def _split_mnemonic(text: str) -> tuple[str, str, str]:
    """(predicates, mnemonic, operands) of a display key; SASS guards such as ``@P0`` come before the mnemonic."""
    tokens = text.split(" ")
    i = 0
    while i < len(tokens) and tokens[i].startswith("@"):
        i += 1
    head = " ".join(tokens[:i])
    mnem = tokens[i] if i < len(tokens) else ""
    return head, mnem, " ".join(tokens[i + 1:])


def _mask(operands: str) -> str:
    operands = _HEX.sub("0x#", operands)
    operands = _LABEL.sub(".L#", operands)
    return _REGISTER.sub(r"\1#", operands)


def align_key(line: str) -> str:
    """The key two lines are aligned on (rules 1 to 3 of the module docstring)."""
    text = display_key(line)
    preds, mnem, operands = _split_mnemonic(text)
    if not _MNEMONIC.match(mnem):  # a label (``.L_x_3:``) or a bundle (``{s4 = ...}``): no mnemonic to protect
        return _mask(text)
    return " ".join(x for x in (_mask(preds), mnem, _mask(operands)) if x)


def mnemonic(line: str) -> str | None:
    """The instruction's mnemonic, or None for a line that is not an instruction (a label, a blank)."""
    mnem = _split_mnemonic(display_key(line))[1]
    return mnem if _MNEMONIC.match(mnem) and not mnem.endswith(":") else None


def mnemonic_counts(lines: Iterable[str]) -> Counter[str]:
    return Counter(m for m in (mnemonic(line) for line in lines) if m is not None)


def op_mnemonic(op_text: str) -> str | None:
    """The opcode of one op of an LLO bundle (``v12 = vld.8x128 [vmem:$0x1200]`` → ``vld.8x128``)."""
    body = op_text.split(" = ", 1)[1] if " = " in op_text else op_text
    words = body.split()
    return words[0] if words and _MNEMONIC.match(words[0]) else None


# HLO text: instruction and computation names carry a counter (``%add.12``) that moves whenever an instruction
# is added before them, and ``metadata={...}`` carries source lines that move with every edit of the user's code.
_HLO_COUNTER = re.compile(r"(?<=[\w\-])\.\d+\b")
_HLO_METADATA = re.compile(r",?\s*metadata=\{[^{}]*\}")
_HLO_OPCODE = re.compile(r"=\s*(?:\([^=]*?\)|[^\s(]+)\s+([\w\-]+)\(")


def hlo_align_key(line: str) -> str:
    """What two lines of HLO text align on: metadata dropped, name counters masked, whitespace collapsed."""
    return _HLO_COUNTER.sub(".#", " ".join(_HLO_METADATA.sub("", line).split()))


def hlo_coarse_key(line: str) -> str:
    """The opcode of an HLO instruction line (``add``, ``fusion``), else its align key."""
    match = _HLO_OPCODE.search(line)
    return match.group(1) if match else hlo_align_key(line)


@dataclass(frozen=True)
class Segment:
    text: str
    changed: bool = False


@dataclass(frozen=True)
class ListingRow:
    """One row of the side-by-side view; numbers are 1-based lines of each listing, None on the empty side."""

    kind: RowKind
    base: str | None
    head: str | None
    base_number: int | None
    head_number: int | None
    exact: bool = True  # a ``same`` row whose displayed text differs is aligned, not identical
    base_segments: tuple[Segment, ...] = ()
    head_segments: tuple[Segment, ...] = ()


@dataclass(frozen=True)
class ListingDiff:
    rows: tuple[ListingRow, ...]
    base_lines: int
    head_lines: int
    truncated: bool = False  # a side was longer than ``max_lines`` and only its start was compared
    counts: Mapping[RowKind, int] = field(default_factory=dict)

    @property
    def inexact(self) -> int:
        return sum(1 for r in self.rows if r.kind == "same" and not r.exact)

    @property
    def changed(self) -> bool:
        return any(r.kind != "same" for r in self.rows)


def _segments(a: str, b: str, max_chars: int = 400) -> tuple[tuple[Segment, ...], tuple[Segment, ...]]:
    """Token-level marks of what differs between two lines; the location prefix is never marked."""
    pa, ra = location_split(a)
    pb, rb = location_split(b)
    if len(ra) > max_chars or len(rb) > max_chars:  # a pathological line: mark it whole, do not diff it
        return _merged([Segment(pa), Segment(ra, True)]), _merged([Segment(pb), Segment(rb, True)])
    ta, tb = _TOKEN.findall(ra), _TOKEN.findall(rb)
    sa: list[Segment] = [Segment(pa)] if pa else []
    sb: list[Segment] = [Segment(pb)] if pb else []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        # Whitespace and comments (SASS encodings) are no change worth a mark: alignment ignores them too.
        changed = tag != "equal" and not (_is_noise(ta[i1:i2]) and _is_noise(tb[j1:j2]))
        if i2 > i1:
            sa.append(Segment("".join(ta[i1:i2]), changed))
        if j2 > j1:
            sb.append(Segment("".join(tb[j1:j2]), changed))
    return _merged(sa), _merged(sb)


def _is_noise(tokens: Sequence[str]) -> bool:
    return all(t.isspace() or t.startswith("/*") for t in tokens)


def _merged(segments: list[Segment]) -> tuple[Segment, ...]:
    out: list[Segment] = []
    for s in segments:
        if not s.text:
            continue
        if out and out[-1].changed == s.changed:
            out[-1] = Segment(out[-1].text + s.text, s.changed)
        else:
            out.append(s)
    return tuple(out)


def _opcodes(a: Sequence[str], b: Sequence[str], max_edits: int, exact_limit: int,
             anchors: tuple[Sequence[str], Sequence[str]] | None = None) -> list[Opcode]:
    """The alignment of two key sequences: Myers while the edits are few; else SequenceMatcher on ``anchors``
    (lines less normalised than the keys, so more of them are distinct and can anchor a match), each block between
    its matches aligned again on the keys; else SequenceMatcher on the keys."""
    # Every occurrence of a line that one side has more often than the other costs an edit: a lower bound that
    # spares the quadratic search when it cannot succeed (two unrelated listings).
    ca, cb = Counter(a), Counter(b)
    lower_bound = sum(abs(ca[k] - cb[k]) for k in ca.keys() | cb.keys())
    found = None
    if lower_bound <= max_edits:
        codes: dict[str, int] = {}  # small ints compare faster than strings in Myers' inner loop
        ints_a = [codes.setdefault(k, len(codes)) for k in a]
        found = myers_opcodes(ints_a, [codes.setdefault(k, len(codes)) for k in b], max_edits)
    if found is not None:
        return found
    if anchors is not None:
        out: list[Opcode] = []
        matcher = difflib.SequenceMatcher(None, anchors[0], anchors[1], autojunk=len(a) * len(b) > exact_limit)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal" or i1 == i2 or j1 == j2:
                out.append((tag, i1, i2, j1, j2))
                continue
            out.extend((t, i1 + x1, i1 + x2, j1 + y1, j1 + y2)
                       for t, x1, x2, y1, y2 in _opcodes(a[i1:i2], b[j1:j2], max_edits, exact_limit))
        return out
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=len(a) * len(b) > exact_limit)
    return [(tag, i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]


class _Builder:
    def __init__(self, base: Sequence[str], head: Sequence[str], max_marked: int) -> None:
        self.base, self.head = base, head
        self._display: dict[str, str] = {}  # display keys, computed once per distinct line
        self.rows: list[ListingRow] = []
        # Token marks cost a small diff per pair; past this many pairs a changed line is marked whole, which
        # keeps two unrelated 20,000-line listings from spending seconds on marks nobody reads line by line.
        self.marks_left = max_marked

    def display(self, line: str) -> str:
        text = self._display.get(line)
        if text is None:
            text = self._display[line] = display_key(line)
        return text

    def _marks(self, a: str, b: str) -> tuple[tuple[Segment, ...], tuple[Segment, ...]]:
        if self.marks_left <= 0:
            pa, ra = location_split(a)
            pb, rb = location_split(b)
            return _merged([Segment(pa), Segment(ra, True)]), _merged([Segment(pb), Segment(rb, True)])
        self.marks_left -= 1
        return _segments(a, b)

    def same(self, i: int, j: int) -> None:
        a, b = self.base[i], self.head[j]
        if self.display(a) == self.display(b):
            whole_a, whole_b = (Segment(a),), (Segment(b),)
            self.rows.append(ListingRow("same", a, b, i + 1, j + 1, True, whole_a, whole_b))
        else:
            sa, sb = self._marks(a, b)
            self.rows.append(ListingRow("same", a, b, i + 1, j + 1, False, sa, sb))

    def replace(self, i: int, j: int) -> None:
        a, b = self.base[i], self.head[j]
        sa, sb = self._marks(a, b)
        self.rows.append(ListingRow("replace", a, b, i + 1, j + 1, False, sa, sb))

    def delete(self, i: int) -> None:
        a = self.base[i]
        self.rows.append(ListingRow("delete", a, None, i + 1, None, False, (Segment(a, True),)))

    def insert(self, j: int) -> None:
        b = self.head[j]
        self.rows.append(ListingRow("insert", None, b, None, j + 1, False, (), (Segment(b, True),)))


def _replace_block(out: _Builder, mnems_a: Sequence[str], mnems_b: Sequence[str], i1: int, i2: int, j1: int,
                   j2: int, max_edits: int, exact_limit: int) -> None:
    """A replaced block, aligned again on mnemonics: same mnemonic → a changed line, the rest paired in order."""
    if (i2 - i1) * (j2 - j1) > exact_limit:
        sub = [("replace", i1, i2, j1, j2)]
    else:
        sub = [(tag, i1 + a1, i1 + a2, j1 + b1, j1 + b2)
               for tag, a1, a2, b1, b2 in _opcodes(mnems_a[i1:i2], mnems_b[j1:j2], max_edits,
                                                                     exact_limit)]
    for tag, a1, a2, b1, b2 in sub:
        if tag == "equal":
            for k in range(a2 - a1):
                out.replace(a1 + k, b1 + k)
            continue
        paired = min(a2 - a1, b2 - b1) if tag == "replace" else 0
        for k in range(paired):
            out.replace(a1 + k, b1 + k)
        for i in range(a1 + paired, a2):
            out.delete(i)
        for j in range(b1 + paired, b2):
            out.insert(j)


def diff_listings(base: Sequence[str], head: Sequence[str], *, key: Callable[[str], str] = align_key,
                  coarse: Callable[[str], str] | None = None, max_lines: int = 20_000,
                  max_edits: int = 2_000, exact_limit: int = 4_000_000, max_marked: int = 2_000) -> ListingDiff:
    """Align two listings (see the module docstring); each side is cut at ``max_lines`` lines.

    ``key`` is what lines align on, ``coarse`` what lines of a replaced block pair on (default: the mnemonic of
    ``key``); :func:`hlo_align_key` and :func:`hlo_coarse_key` make it a diff of HLO text."""
    truncated = len(base) > max_lines or len(head) > max_lines
    base, head = list(base[:max_lines]), list(head[:max_lines])
    keys_a = [key(x) for x in base]
    keys_b = [key(x) for x in head]
    out = _Builder(base, head, max_marked)

    prefix = 0
    while prefix < min(len(keys_a), len(keys_b)) and keys_a[prefix] == keys_b[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < min(len(keys_a), len(keys_b)) - prefix
           and keys_a[len(keys_a) - 1 - suffix] == keys_b[len(keys_b) - 1 - suffix]):
        suffix += 1
    for k in range(prefix):
        out.same(k, k)

    lo_a, hi_a, lo_b, hi_b = prefix, len(keys_a) - suffix, prefix, len(keys_b) - suffix
    mnems_a = [coarse(x) for x in base] if coarse else [_split_mnemonic(k)[1] for k in keys_a]
    mnems_b = [coarse(x) for x in head] if coarse else [_split_mnemonic(k)[1] for k in keys_b]
    anchors = ([out.display(x) for x in base[lo_a:hi_a]], [out.display(x) for x in head[lo_b:hi_b]])
    for tag, i1, i2, j1, j2 in _opcodes(keys_a[lo_a:hi_a], keys_b[lo_b:hi_b], max_edits, exact_limit, anchors):
        i1, i2, j1, j2 = i1 + lo_a, i2 + lo_a, j1 + lo_b, j2 + lo_b
        if tag == "equal":
            for k in range(i2 - i1):
                out.same(i1 + k, j1 + k)
        elif tag == "delete":
            for i in range(i1, i2):
                out.delete(i)
        elif tag == "insert":
            for j in range(j1, j2):
                out.insert(j)
        else:
            _replace_block(out, mnems_a, mnems_b, i1, i2, j1, j2, max_edits, exact_limit)
    for k in range(suffix):
        out.same(hi_a + k, hi_b + k)

    counts: Counter[RowKind] = Counter(r.kind for r in out.rows)
    return ListingDiff(tuple(out.rows), len(base), len(head), truncated, dict(counts))


@dataclass(frozen=True)
class Fold:
    """Unchanged rows left out of a folded view: ``count`` of them, from 1-based base line ``base_number``."""

    count: int
    base_number: int | None
    head_number: int | None


def fold(rows: Sequence[ListingRow], context: int = 6) -> list[ListingRow | Fold]:
    """The rows with each run of exact ``same`` rows longer than ``2 * context + 1`` cut to its ``context``
    first and last rows and a :class:`Fold`: the change, and enough around it to read it."""
    out: list[ListingRow | Fold] = []
    run: list[ListingRow] = []

    def flush(at_start: bool, at_end: bool) -> None:
        lead = 0 if at_start else context
        tail = 0 if at_end else context
        if len(run) <= lead + tail + 1:
            out.extend(run)
        else:
            out.extend(run[:lead])
            first = run[lead]
            out.append(Fold(len(run) - lead - tail, first.base_number, first.head_number))
            out.extend(run[len(run) - tail:])
        run.clear()

    for row in rows:
        if row.kind == "same" and row.exact:
            run.append(row)
            continue
        if run:
            flush(at_start=not out, at_end=False)
        out.append(row)
    if run:
        flush(at_start=not out, at_end=True)
    return out


@dataclass(frozen=True)
class CountDelta:
    name: str
    base: int
    head: int

    @property
    def delta(self) -> int:
        return self.head - self.base


def count_deltas(base: Mapping[str, int], head: Mapping[str, int]) -> list[CountDelta]:
    """The counts that changed, largest change first (then by name, so the order is stable)."""
    deltas = [CountDelta(k, int(base.get(k, 0)), int(head.get(k, 0))) for k in set(base) | set(head)]
    return sorted((d for d in deltas if d.delta), key=lambda d: (-abs(d.delta), d.name))


def format_count_deltas(deltas: Sequence[CountDelta], limit: int = 8) -> str:
    """``+12 vmulps, -3 vmovups`` (and how many more), or ``no change``."""
    if not deltas:
        return "no change"
    text = ", ".join(f"{d.delta:+d} {d.name}" for d in deltas[:limit])
    return text + (f", … {len(deltas) - limit} more" if len(deltas) > limit else "")
