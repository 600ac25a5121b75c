"""A command a bench needs, run to its end, or the bench ended with what the command said: the benches that time
fresh processes or installs (process_start.py, install_time.py, bytecode.py) stop at the first failure rather than
time it."""

from __future__ import annotations

import subprocess
from typing import Any


def run_or_exit(cmd: list[str], what: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``cmd`` run with its output captured as text (``kwargs`` as subprocess.run takes them); SystemExit with the
    end of its stderr where it exits non-zero, ``what`` naming it."""
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed:\n{done.stderr[-2000:]}")
    return done
