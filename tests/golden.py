"""Golden files: a formatter's output compared with a file checked in beside the tests.

Set ``KERNELWATCH_UPDATE_GOLDEN=1`` to write the files from the current output instead (then read the diff).
"""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent / "unit" / "golden"
UPDATE_ENV = "KERNELWATCH_UPDATE_GOLDEN"


def assert_golden(name: str, actual: str) -> None:
    path = GOLDEN_DIR / name
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"no golden file {path}: run with {UPDATE_ENV}=1 to write it"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{name} differs from its golden file; {UPDATE_ENV}=1 rewrites it"
