"""The measured commit's own code, proven: the project's modules are imported from the checkout, whatever is
installed, and a module under test loaded from anywhere else fails the benchmark before it is timed.

Every developer has their project installed in their environment (``pip install -e .``): a ``.pth`` path entry
or an editable-install finder then points ``import mylib`` at their working copy, and a benchmark process that
merely appends the checkout to ``sys.path`` measures that working copy at every commit (both sides of a
comparison the same code, and the noise read as a change). So the benchmark process puts a finder of its own
first on ``sys.meta_path`` that serves the project's top-level names (the packages and modules at the checkout's
root, or under ``src/``) from the checkout, and nothing else: the checkout still cannot shadow the standard
library, other installed packages, or the harness itself (names already imported when the finder is made).
Then :func:`foreign_modules` checks, before each benchmark is timed, that every loaded module of those names
came from the checkout. Standard library only: this runs inside the benchmark process.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType


def source_roots(checkout: Path) -> list[Path]:
    """Where a project's importable code lives: ``src/`` (the src layout) before the checkout's root."""
    return [p for p in (checkout / "src", checkout) if p.is_dir()]


def project_names(roots: Sequence[Path], taken: Mapping[str, object]) -> dict[str, Path]:
    """The top-level names the project defines, each with the root it lives under: regular packages (a
    directory with ``__init__.py``) and modules (``name.py``). Not the standard library's names, nor ``taken``
    (modules already imported, the harness's own), nor names that are not identifiers."""
    names: dict[str, Path] = {}
    for root in roots:
        for entry in sorted(root.iterdir()):
            name = entry.name[:-3] if entry.is_file() and entry.name.endswith(".py") else entry.name
            if entry.is_dir() and not (entry / "__init__.py").is_file():
                continue
            if (not name.isidentifier() or name in names or name in sys.stdlib_module_names or name in taken
                    or name in ("setup", "conftest", "noxfile")):
                continue
            names[name] = root
    return names


class CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds the project's top-level names in the checkout, ahead of every other finder."""

    def __init__(self, names: Mapping[str, Path]) -> None:
        self.names = dict(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        root = self.names.get(fullname)
        if root is None:  # a submodule follows its package's __path__, which is the checkout's already
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [str(root)])


def install(checkout: Path) -> dict[str, Path]:
    """Serve the project's names from ``checkout`` first; the names, for :func:`foreign_modules`."""
    names = project_names(source_roots(checkout), sys.modules)
    sys.meta_path.insert(0, CheckoutFinder(names))
    for root in reversed(source_roots(checkout)):  # helpers beside the packages, after what is installed
        if str(root) not in sys.path:
            sys.path.append(str(root))
    return names


def foreign_modules(names: Mapping[str, Path], checkout: Path, modules: Mapping[str, ModuleType]) -> list[str]:
    """Each loaded module of the project's names whose file is not in the checkout, as "name (path)"."""
    inside = checkout.resolve()
    out = []
    for fullname, module in sorted(modules.items()):
        if fullname.partition(".")[0] not in names or module is None:
            continue
        origin = getattr(module, "__file__", None)
        if origin is None:
            continue
        if inside not in Path(origin).resolve().parents:
            out.append(f"{fullname} ({origin})")
    return out


def origin_problem(names: Mapping[str, Path], checkout: Path) -> str | None:
    """Why the benchmark must not be timed, or None: the message a failed benchmark carries."""
    foreign = foreign_modules(names, checkout, sys.modules)
    if not foreign:
        return None
    shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
    return (f"the code under test was not imported from the checkout of the measured commit ({checkout}): "
            f"{shown}; the numbers would be another copy's. Was it imported before the benchmark process "
            "started (sitecustomize, a .pth file that imports it)?")
