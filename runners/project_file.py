"""A measured repository's KernelWatch settings: ``kernelwatch.toml`` at its root, else ``[tool.kernelwatch]`` in
its ``pyproject.toml``; read from the working copy the user points ``--repo`` at (not from each measured commit:
the benchmarks it names are applied to every commit, as asv's ``benchmark_dir``).

    # kernelwatch.toml (or [tool.kernelwatch] in pyproject.toml)
    benchmarks = "benchmarks"   # a directory of benchmark modules, relative to this file
    environment = "commit"      # run each commit in the environment its own lock declares (runners/envs.py);
                                # "runner" (the default): KernelWatch's own interpreter
    python = "/opt/py/bin/python"   # or: this interpreter, with the project's dependencies installed
    build = "python setup.py build_ext --inplace"   # how the project is installed at a commit, when importing it
                                # from the checkout is not enough (compiled extensions): run in each checkout,
                                # sandboxed, before its benchmarks (runners/build_step.py)
    name = "acme-kernels"       # the name its runs are stored under (default: the repository's folder name, or
                                # a runner's: its URL's last part); `run --repository-name` overrides it

No file: today's behaviour (the commit's own ``kernels_under_test/``). Keys it does not know are refused, so a
misspelt or not-yet-supported setting is never silently ignored.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners.build_step import parse_build
from service.contract.manifest import NAME_CHARACTERS, NAME_MAX_LENGTH

KNOWN_KEYS = ("benchmarks", "environment", "python", "build", "name")
ENVIRONMENTS = ("runner", "commit")


class ProjectFileError(ValueError):
    pass


@dataclass(frozen=True)
class ProjectSettings:
    source: Path | None  # the file they came from; None: no project file
    benchmarks: Path | None = None  # absolute
    environment: str | None = None  # one of ENVIRONMENTS; None: not set
    python: Path | None = None  # absolute
    build: tuple[str, ...] | None = None  # the command's words; None: nothing to build
    name: str | None = None  # the stored repository's name; None: the folder's (or the origin URL's)


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a stored repository (the manifest's pattern), or None where it can."""
    if not isinstance(name, str) or not 1 <= len(name) <= NAME_MAX_LENGTH or not set(name) <= NAME_CHARACTERS:
        return f"{str(name)[:80]!r} is not 1 to {NAME_MAX_LENGTH} ASCII letters, digits, '.', '_' or '-'"
    return None


def parse_settings(table: dict[str, Any], source: Path) -> ProjectSettings:
    """The settings of one ``[tool.kernelwatch]`` table (or a whole kernelwatch.toml) read from ``source``."""
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise ProjectFileError(f"{source}: unknown setting(s) {', '.join(unknown)} (known: {', '.join(KNOWN_KEYS)})")
    benchmarks = table.get("benchmarks")
    if benchmarks is not None and (not isinstance(benchmarks, str) or not benchmarks.strip()):
        raise ProjectFileError(f"{source}: benchmarks must be a directory path (a string), not {benchmarks!r}")
    path = (source.parent / benchmarks).resolve() if benchmarks else None
    if path is not None and not path.is_dir():
        raise ProjectFileError(f"{source}: benchmarks = {benchmarks!r}, but {path} is not a directory")
    environment, python = table.get("environment"), table.get("python")
    if environment is not None and environment not in ENVIRONMENTS:
        raise ProjectFileError(f"{source}: environment must be one of {', '.join(ENVIRONMENTS)}, not {environment!r}")
    if python is not None and (not isinstance(python, str) or not python.strip()):
        raise ProjectFileError(f"{source}: python must be an interpreter's path (a string), not {python!r}")
    if python is not None and environment is not None:
        raise ProjectFileError(f"{source}: environment and python both set: give one")
    interpreter = check_interpreter(source.parent / python, f"{source}: python = {python!r}") if python else None
    try:
        build = parse_build(table["build"], str(source)) if "build" in table else None
    except ValueError as exc:
        raise ProjectFileError(str(exc)) from None
    name = table.get("name")
    if name is not None and (problem := name_problem(name)) is not None:
        raise ProjectFileError(f"{source}: name {problem}")
    return ProjectSettings(source, path, environment, interpreter, build, name)


def check_interpreter(path: Path, what: str) -> Path:
    """A user-named interpreter, made absolute (not resolved: a virtual environment's python is a symlink whose
    own location says which environment it is); ProjectFileError unless it is an executable file."""
    absolute = Path(os.path.abspath(path))
    if not absolute.is_file() or not os.access(absolute, os.X_OK):
        raise ProjectFileError(f"{what}, but {absolute} is not an executable file")
    return absolute


def read_project_settings(repo: Path) -> ProjectSettings:
    """The settings of the repository at ``repo``; ``ProjectSettings(None)`` when it has no project file."""
    for name in ("kernelwatch.toml", "pyproject.toml"):
        path = repo / name
        if not path.is_file():
            continue
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            raise ProjectFileError(f"{path}: not readable TOML ({exc})") from None
        if name == "kernelwatch.toml":
            return parse_settings(document, path)
        table = document.get("tool", {}).get("kernelwatch") if isinstance(document.get("tool"), dict) else None
        if table is not None:
            if not isinstance(table, dict):
                raise ProjectFileError(f"{path}: [tool.kernelwatch] must be a table")
            return parse_settings(table, path)
    return ProjectSettings(None)
