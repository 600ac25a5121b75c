"""Long id lists cut into pieces for ``IN (...)`` lists and multi-row INSERTs: one helper, for every store module
that batches (issue 19: it was copied four times)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

IN_LIST = 500  # ids per IN (...) list


def chunks(items: Sequence[T], size: int = IN_LIST) -> Iterator[list[T]]:
    """``items`` in consecutive lists of at most ``size``, in order (none for no items)."""
    for start in range(0, len(items), size):
        yield list(items[start:start + size])
