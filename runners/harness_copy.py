"""The harness as another interpreter imports it: a copy of the ``runners`` package (and of the standard-library-only
``kernelwatch`` package it reads) in a directory of its own, to put on that interpreter's PYTHONPATH.

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

import kernelwatch
import runners


def _sources() -> list[tuple[str, Path]]:
    """(path in the copy, file) for everything the copy holds, in a stable order: the ``runners`` package and the
    ``kernelwatch`` package (the error vocabulary and the hardware table, standard library alone), the only code
    of KernelWatch's the harness imports besides its own (tests/unit/test_import_contracts.py keeps it so)."""
    files: list[tuple[str, Path]] = []
    for package in (runners, kernelwatch):
        assert package.__file__ is not None  # regular packages, never namespace ones
        root = Path(package.__file__).resolve().parent
        files += [(f"{root.name}/{p.relative_to(root).as_posix()}", p) for p in sorted(root.rglob("*.py"))]
    return files


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
        os.replace(partial, root)  # fails when another runner got there first: its copy is the same
    except OSError:
        if not root.is_dir():
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return root
