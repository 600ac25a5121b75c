"""An HLO dump's text → the lines of each module, and each fusion's called computation.

Pure, and only line slicing: the stored module record (``hlo_module``) already has the fusions, their kinds and
sources; the text adds what a person reads, the instructions. The layout relied on is the one
``runners/parsers/hlo_text_to_module`` documents: ``HloModule`` starts a module, a computation header ends in
``{`` at column 0, its instructions are indented, and ``}`` at column 0 closes it; a fusion instruction names its
computation in ``calls=``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MODULE = re.compile(r"HloModule[ \t]+([^\s,]+)")
_COMPUTATION = re.compile(r"(?:ENTRY[ \t]+)?%?([\w.\-]+)[ \t]")
_ASSIGN = re.compile(r"[ \t]*(?:ROOT[ \t]+)?%?([\w.\-]+)[ \t]*=")
_CALLS = re.compile(r"calls=%?([\w.\-]+)")


@dataclass(frozen=True)
class TextLine:
    number: int  # 1-based, in the artifact
    text: str


@dataclass(frozen=True)
class FusionText:
    computation: str
    call: TextLine  # the fusion instruction in its caller
    body: list[TextLine]  # the called computation, header and closing brace included


def module_lines(text: str) -> dict[str, list[TextLine]]:
    """Each module's lines by module name, from its ``HloModule`` line up to the next one."""
    modules: dict[str, list[TextLine]] = {}
    current: list[TextLine] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _MODULE.match(line)
        if match:
            current = modules.setdefault(match.group(1), [])
        if current is not None:
            current.append(TextLine(number, line))
    return modules


def fusion_texts(lines: list[TextLine]) -> dict[str, FusionText]:
    """Per fusion instruction name, its call and the computation it calls (when the module text has it)."""
    computations: dict[str, list[TextLine]] = {}
    calls: dict[str, tuple[str, TextLine]] = {}
    open_name: str | None = None
    for line in lines:
        text = line.text
        if open_name is None:
            if text.endswith("{") and text[:1] not in (" ", "\t", "") and not text.startswith("HloModule"):
                match = _COMPUTATION.match(text)
                if match:
                    open_name = match.group(1)
                    computations[open_name] = [line]
            continue
        computations[open_name].append(line)
        if text.startswith("}"):
            open_name = None
            continue
        if " fusion(" in text:
            name, called = _ASSIGN.match(text), _CALLS.search(text)
            if name and called:
                calls[name.group(1)] = (called.group(1), line)
    return {name: FusionText(computation, call, computations.get(computation, []))
            for name, (computation, call) in calls.items()}
