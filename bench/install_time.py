"""How long `make test` takes to install this project into a fresh virtual environment: uv against pip.

CI starts from a clean clone, so the install is paid on every run. The Makefile creates the venv, upgrades pip,
installs uv with it (uv is a dependency already: it builds measured commits' environments), and has uv install
the project with its dev extra, compiled to bytecode as pip compiles it (own; bench/bytecode.py says why). The peer
is pip installing the same (``pip install -e '.[dev]'``), which is what the Makefile did before and still does where
uv cannot be had. Each side starts from ``python -m venv`` in a directory of its own; the sides alternate so that
the host's drift lands on both. Both read the same package indexes and caches the machine has; this times the
install, and checks that the two environments hold the same versions (names normalised as PEP 503 says).

    python bench/install_time.py                # about 2 minutes
    python bench/install_time.py --repeats 3
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.child_run import run_or_exit  # noqa: E402  (after the path set-up: the bench runs as a script)


def _run(cmd: list[str]) -> str:
    return run_or_exit(cmd, " ".join(cmd), cwd=ROOT, timeout=1800).stdout


def install(into: Path, with_uv: bool) -> float:
    """Seconds to create a venv at ``into`` and install the project with its dev extra there."""
    python = str(into / "bin" / "python")
    start = time.perf_counter()
    _run([sys.executable, "-m", "venv", str(into)])
    _run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"])
    if with_uv:
        _run([python, "-m", "pip", "install", "-q", "uv"])
        _run([python, "-m", "uv", "pip", "install", "-q", "--compile-bytecode", "--python", python, "-e", ".[dev]"])
    else:
        _run([python, "-m", "pip", "install", "-q", "-e", ".[dev]"])
    return time.perf_counter() - start


def versions(venv: Path) -> dict[str, str]:
    """Every distribution in ``venv`` but the project, pip, setuptools and uv: normalised name -> version."""
    listed = _run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "freeze"])
    found = {}
    for line in listed.splitlines():
        name, _, version = line.partition("==")
        key = re.sub(r"[-_.]+", "-", name).lower()
        if version and key not in {"kernelwatch", "pip", "setuptools", "uv"}:
            found[key] = version
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=2, help="installs per side")
    args = parser.parse_args(argv)
    own: list[float] = []
    peer: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kw-install-") as scratch:
        for i in range(args.repeats):
            own.append(install(Path(scratch, f"uv-{i}"), with_uv=True))
            peer.append(install(Path(scratch, f"pip-{i}"), with_uv=False))
        same = versions(Path(scratch, "uv-0")) == versions(Path(scratch, "pip-0"))
    print(f"{'fresh venv + project with its dev extra':<44} {'median':>8} {'each':>20}")
    for label, times in (("own (pip installs uv, uv the project)", own), ("peer (pip installs the project)", peer)):
        print(f"{label:<44} {statistics.median(times):>6.1f} s   {', '.join(f'{t:.1f}' for t in times)} s")
    print("the two environments hold " + ("the same versions" if same else "DIFFERENT versions"))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
