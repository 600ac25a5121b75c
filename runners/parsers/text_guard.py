"""The input-wide checks every line-oriented listing parser runs before any regex sees a line.

A listing is refused, with the line that broke the rule, when it is empty, holds a line longer than the limit
(so a 1 GiB line never reaches a regex), or holds control bytes (binary garbage). Each parser passes its own
error class, so its callers keep catching one typed error.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MAX_LINE_CHARS = 1 << 20
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

ErrorFactory = Callable[[str, int, str], Exception]


class ListingParseError(ValueError):
    """A listing that breaks its grammar: ``source:line: reason``; ``line`` 0 means the input as a whole.

    Each parser subclasses it, so callers can catch one parser's errors or all of them."""

    def __init__(self, source: str, line: int, message: str) -> None:
        super().__init__(f"{source}:{line}: {message}")
        self.source = source
        self.line = line
        self.reason = message

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:
        # Rebuilt from its parts when it crosses a process boundary (Celery results, worker pools).
        return (type(self), (self.source, self.line, self.reason))


def checked_lines(text: str, source: str, error: ErrorFactory, max_line_chars: int = MAX_LINE_CHARS) -> list[str]:
    """Lines of ``text`` (a trailing CR dropped) after the checks; raises ``error(source, line, message)``."""
    if not text.strip():
        raise error(source, 1, "empty input")
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if len(line) > max_line_chars:
            raise error(source, number, f"line of {len(line)} characters exceeds {max_line_chars}")
    bad = _CONTROL.search(text)
    if bad:
        number = text.count("\n", 0, bad.start()) + 1
        raise error(source, number, f"binary input: control byte {ord(bad.group()):#04x}")
    return [line[:-1] if line.endswith("\r") else line for line in lines]
