"""Server-side syntax highlighting of dump text (HLO), safe by construction.

Dump text is untrusted (a kernel's name, an op_name, a file path can hold anything). The text is cut into
tokens on the raw string, every piece is escaped on its own, and only the wrapping ``<span>`` tags, which come
from here, are markup; no input is ever marked safe unescaped.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

# One alternation, first match at each position wins; every branch is a bounded, linear pattern.
_HLO_TOKEN = re.compile(
    r"(?P<meta>\b(?:metadata|backend_config|frontend_attributes)=\{)"  # the rest of the line is annotation
    r"|(?P<shape>\b(?:pred|token|[suf](?:4|8|16|32|64)|bf16|f8e\w{1,12}|c64|c128)\[[0-9,\s]{0,200}\]"
    r"(?:\{[0-9,:A-Z()\s]{0,200}\})?)"
    r"|(?P<name>%[\w.\-]{1,500})"
    r"|(?P<keyword>\b(?:ROOT|ENTRY|HloModule)\b)"
    r"|(?P<attr>\b(?:kind|calls|to_apply|dimensions|slice|window|condition|body|lhs_contracting_dims|"
    r"rhs_contracting_dims|lhs_batch_dims|rhs_batch_dims|custom_call_target|direction)=)"
    r"|(?P<opcode>\b[a-z][a-z0-9\-]{0,60}(?=\())"
)

CLASSES = {"meta": "hl-meta", "shape": "hl-shape", "name": "hl-name", "keyword": "hl-kw", "attr": "hl-attr",
           "opcode": "hl-op"}


def highlight_hlo(line: str) -> Markup:
    """One line of HLO text as escaped HTML with opcodes, shapes, names and annotations wrapped in spans."""
    out: list[str] = []
    pos = 0
    for match in _HLO_TOKEN.finditer(line):
        kind = match.lastgroup or ""
        out.append(str(escape(line[pos:match.start()])))
        if kind == "meta":  # annotation to the end of the line, dimmed: it is long and rarely what one reads
            out.append(f'<span class="{CLASSES[kind]}">{escape(line[match.start():])}</span>')
            pos = len(line)
            break
        out.append(f'<span class="{CLASSES[kind]}">{escape(match.group())}</span>')
        pos = match.end()
    out.append(str(escape(line[pos:])))
    return Markup("".join(out))
