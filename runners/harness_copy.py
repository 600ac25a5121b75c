"""The harness as another interpreter imports it: a copy of the ``runners`` package (and the two standard-library-only
modules of ``service`` it reads) in a directory of its own, to put on that interpreter's PYTHONPATH.

A benchmark process may run in an environment built for the measured commit (runners/envs.py), with the
project's own JAX and nothing of KernelWatch's. Putting KernelWatch's own import root on its path would not do:
installed, that root is KernelWatch's site-packages, whose JAX would shadow the project's. So the harness, which
needs only the standard library and JAX (numpy comes with JAX), is copied out, named by the hash of what was
copied, once per KernelWatch version.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import runners

# What the harness imports from outside ``runners`` (runners/pinning.py, sandbox.py and calibrate.py): modules of
# the standard library alone. The packages above them get empty __init__ files, never the real ones.
SERVICE_MODULES = ("errors.py", "model/hardware.py")


def _sources() -> list[tuple[str, Path]]:
    """(path in the copy, file) for everything the copy holds, in a stable order."""
    package = Path(runners.__file__).resolve().parent
    service = package.parent / "service"
    files = [(f"runners/{p.relative_to(package).as_posix()}", p) for p in sorted(package.rglob("*.py"))]
    return files + [(f"service/{name}", service / name) for name in SERVICE_MODULES]


@functools.cache
def _digest() -> str:
    """The hash of what the copy holds: read once a process, not at every benchmark process's start."""
    digest = hashlib.sha256()
    for name, path in _sources():
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def harness_root(base: Path) -> Path:
    """The directory (under ``base``) that holds a copy of this harness, made when missing; atomic, so that two
    runners starting at once each see a whole copy or make their own."""
    sources = _sources()
    root = base / _digest()
    if root.is_dir():
        return root
    base.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=base))
    try:
        for name, path in sources:
            target = partial / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        for package in ("service", "service/model"):
            (partial / package / "__init__.py").touch()
        os.replace(partial, root)  # fails when another runner got there first: its copy is the same
    except OSError:
        if not root.is_dir():
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return root
