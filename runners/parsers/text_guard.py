"""The input-wide checks every line-oriented listing parser runs before any regex sees a line.

A listing is refused, with the line that broke the rule, when it is empty, holds a line longer than the limit
(so a 1 GiB line never reaches a regex), or holds control bytes (binary garbage); a long line is reported before
a control byte. Each parser passes its own error class, so its callers keep catching one typed error. The checks
run at C speed (``max`` over line lengths, ``str.isprintable``); a regex looks only at lines that are not plainly
printable. A parser that reads its text in pieces runs :func:`long_line` and :func:`control_byte` per piece.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import compress
from operator import not_

MAX_LINE_CHARS = 1 << 20
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])

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


def is_empty(text: str) -> bool:
    """Nothing but whitespace (``not text.strip()``, without copying the text)."""
    return not text or text.isspace()


def long_line(lines: Sequence[str], max_line_chars: int = MAX_LINE_CHARS) -> tuple[int, str] | None:
    """(index, message) of the first line longer than ``max_line_chars``, or None."""
    if not lines or max(map(len, lines)) <= max_line_chars:
        return None
    index = next(i for i, line in enumerate(lines) if len(line) > max_line_chars)
    return index, f"line of {len(lines[index])} characters exceeds {max_line_chars}"


def control_byte(lines: Sequence[str], text: str | None = None) -> tuple[int, str] | None:
    """(index of its line, message) of the first control byte in ``lines``, or None. ``text``, when given, is the
    lines joined by newlines, tested first as bytes (control bytes are ASCII, never part of a longer UTF-8
    sequence): one C pass instead of one call a line."""
    if text is not None:
        data = text.encode("utf-8", "surrogatepass")
        if len(data.translate(None, _CONTROL_BYTES)) == len(data):
            return None
    for index in compress(range(len(lines)), map(not_, map(str.isprintable, lines))):
        bad = _CONTROL.search(lines[index])
        if bad:
            return index, f"binary input: control byte {ord(bad.group()):#04x}"
    return None


def checked_lines(text: str, source: str, error: ErrorFactory, max_line_chars: int = MAX_LINE_CHARS) -> list[str]:
    """Lines of ``text`` (a trailing CR dropped) after the checks; raises ``error(source, line, message)``."""
    if is_empty(text):
        raise error(source, 1, "empty input")
    lines = text.split("\n")
    found = long_line(lines, max_line_chars) or control_byte(lines)  # a long line first: no regex runs on it
    if found:
        raise error(source, found[0] + 1, found[1])
    if "\r" not in text:
        return lines
    return [line[:-1] if line.endswith("\r") else line for line in lines]
