"""Whole numbers as people and headers type them, checked before int() reads them."""

from __future__ import annotations


def is_whole(text: str) -> bool:
    """ASCII digits, at least one: str.isdigit() alone also takes "²" and other digits int() refuses (a
    ValueError where a clear message was due: a 500 on a page, a traceback at start-up)."""
    return text.isascii() and text.isdigit()
