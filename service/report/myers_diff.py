"""Myers' O(ND) difference algorithm ("An O(ND) Difference Algorithm and Its Variations", 1986): the shortest
edit script between two sequences, as ``difflib``-style opcodes. PURE.

Greedy forward search, one frontier saved per edit count so the path can be walked back: time about N·D and
memory D² for D edits, hence the caller's bound on D.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Opcode = tuple[str, int, int, int, int]


def myers_opcodes(a: Sequence[int], b: Sequence[int], max_d: int) -> list[Opcode] | None:
    """Myers' O(ND) shortest edit script as difflib-style opcodes; None when more than ``max_d`` edits are needed.

    Unlike difflib's SequenceMatcher it needs no anchor lines, so a sequence of a few distinct values (an
    unrolled loop's instructions, once registers are masked) still aligns exactly when the change is small."""
    n, m = len(a), len(b)
    bound = min(n + m, max_d)
    offset = bound + 1
    v = [0] * (2 * bound + 3)
    trace: list[list[int]] = []
    end_d = -1
    for d in range(bound + 1):
        trace.append(v[:])
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                x = v[offset + k + 1]
            else:
                x = v[offset + k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[offset + k] = x
            if x >= n and y >= m:
                end_d = d
                break
        if end_d >= 0:
            break
    if end_d < 0:
        return None
    # Walk back through the saved frontiers: each edit, then the diagonal (equal lines) before it.
    moves: list[tuple[str, int, int]] = []  # (tag, i, j), in reverse
    x, y = n, m
    for d in range(end_d, 0, -1):
        prev = trace[d]
        k = x - y
        prev_k = k + 1 if k == -d or (k != d and prev[offset + k - 1] < prev[offset + k + 1]) else k - 1
        prev_x = prev[offset + prev_k]
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x, y = x - 1, y - 1
            moves.append(("equal", x, y))
        if x == prev_x:
            moves.append(("insert", x, prev_y))
        else:
            moves.append(("delete", prev_x, y))
        x, y = prev_x, prev_y
    while x > 0 and y > 0:
        x, y = x - 1, y - 1
        moves.append(("equal", x, y))
    return _as_opcodes(reversed(moves))


def _as_opcodes(moves: Iterable[tuple[str, int, int]]) -> list[Opcode]:
    """Single-line moves grouped into runs; a deletion run next to an insertion run becomes one replacement."""
    out: list[list[Any]] = []
    for tag, i, j in moves:
        di, dj = (1, 1) if tag == "equal" else (1, 0) if tag == "delete" else (0, 1)
        last = out[-1] if out else None
        if last is not None and (last[0] == tag or (tag != "equal" and last[0] in ("delete", "insert", "replace"))):
            if last[0] != tag:
                last[0] = "replace"
            last[2] += di
            last[4] += dj
        else:
            out.append([tag, i, i + di, j, j + dj])
    return [(str(t), int(i1), int(i2), int(j1), int(j2)) for t, i1, i2, j1, j2 in out]
