"""The measured commit's own environment: an interpreter holding the dependencies that commit declares (its own JAX,
jaxlib, libtpu...), built with uv and cached by what it was built from, so two commits with the same lock share one.

What a commit declares, the first found at its root:

- ``uv.lock`` (beside its ``pyproject.toml``): the locked versions, exported by ``uv export --frozen``;
- ``requirements.txt``: as it is;
- ``pyproject.toml``'s ``[project] dependencies``: the declared ranges, resolved now (a lock is better: a range
  like ``jax>=0.8`` resolves to whatever JAX is newest today, which the project may not import under).

The project itself is never installed: the benchmark process imports it from the checkout
(runners/project_imports.py). The harness comes in from outside (runners/harness_copy.py), so the environment
needs nothing of KernelWatch's.

Why uv: it creates a virtual environment in a tenth of a second and installs JAX and jaxlib from its cache in about
two, where ``python -m venv`` plus pip takes tens of seconds a commit; a history of commits with a few distinct locks
costs a few builds, not one per commit.

What a hostile repository can do through its declarations is kept to fetching wheels: only binary wheels are
installed (``--only-binary :all:``: no sdist is built, so no build backend of the repository's choosing runs), uv
reads no configuration file (``--no-config``: none of the checkout's), and uv runs with a small environment of
its own, no token of the runner's in it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

BUILD_TIMEOUT_S = 1800.0  # a first build downloads jaxlib (and maybe CUDA or libtpu wheels): hundreds of MB
MARKER = "kernelwatch-environment.json"
# What uv may see of the runner's environment: where to find things and how to reach the package index.
_KEPT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "UV_CACHE_DIR", "UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL",
             "UV_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "HTTPS_PROXY", "HTTP_PROXY",
             "NO_PROXY", "https_proxy", "http_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR")


class EnvironmentBuildError(Exception):
    """The commit's environment could not be built; the message says why, in a line or a few."""


@dataclass(frozen=True)
class Declaration:
    """What one commit declares it needs: where that came from, and the requirements to install."""

    source: str  # uv.lock, requirements.txt or pyproject.toml
    requirements: str  # requirements.txt text


def _uv() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            raise EnvironmentBuildError("uv is not installed (pip install uv): it builds the commit's environment") \
                from None
        return found
    return str(find_uv_bin())


def _env() -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if k in _KEPT_ENV}
    return kept | {"UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1"}


def _uv_run(args: list[str], what: str, timeout_s: float = BUILD_TIMEOUT_S, cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run([_uv(), *args], capture_output=True, text=True, timeout=timeout_s, env=_env(),
                              cwd=cwd or tempfile.gettempdir(), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise EnvironmentBuildError(f"{what}: uv took longer than {timeout_s:.0f} s") from None
    except OSError as exc:
        raise EnvironmentBuildError(f"{what}: cannot start uv: {exc.strerror}") from None
    if proc.returncode != 0:
        tail = [line for line in proc.stderr.strip().splitlines() if line.strip()][-6:]
        raise EnvironmentBuildError(f"{what}: uv failed (exit {proc.returncode}): " + " / ".join(tail))
    return proc.stdout


def pyproject_dependencies(text: str, source: str = "pyproject.toml") -> list[str] | None:
    """The ``[project] dependencies`` of a pyproject.toml's text; None when it declares none (or no [project])."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EnvironmentBuildError(f"{source}: not readable TOML ({exc})") from None
    project = document.get("project")
    if not isinstance(project, dict) or "dependencies" not in project:
        return None
    dependencies = project["dependencies"]
    if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
        raise EnvironmentBuildError(f"{source}: [project] dependencies must be a list of strings")
    return dependencies


def find_declaration(checkout: Path, label: str | None = None) -> Declaration:
    """What the commit checked out at ``checkout`` declares (module docstring: which file wins); ``label`` names it in
    errors (its folder's name by default, which for a working copy is a digest)."""
    label = label or checkout.name
    lock, requirements, pyproject = (checkout / n for n in ("uv.lock", "requirements.txt", "pyproject.toml"))
    if lock.is_file() and pyproject.is_file():
        exported = _uv_run(["export", "--frozen", "--no-hashes", "--no-emit-project", "--no-dev", "--no-header",
                            "--format", "requirements-txt", "--project", str(checkout)], f"{lock}: exporting the lock")
        return Declaration("uv.lock", exported)
    if requirements.is_file():
        return Declaration("requirements.txt", requirements.read_text(encoding="utf-8", errors="replace"))
    if pyproject.is_file():
        dependencies = pyproject_dependencies(pyproject.read_text(encoding="utf-8", errors="replace"), str(pyproject))
        if dependencies is not None:
            return Declaration("pyproject.toml", "".join(f"{d}\n" for d in dependencies))
    raise EnvironmentBuildError(f"{label}: the commit declares no dependencies (no uv.lock, requirements.txt "
                                "or [project] dependencies): nothing to build its environment from")


@functools.cache
def _builder_version() -> str:
    """How environments are built, part of every environment's key: uv's version (asked once a process, not once a
    commit), and that they hold bytecode (environments built before they did are built again, not kept slow)."""
    return _uv_run(["--version"], "uv", timeout_s=60).strip() + " compiled"


def base_python() -> str:
    """The interpreter environments are made from: this one's base (not a virtual environment of its own)."""
    return str(getattr(sys, "_base_executable", None) or sys.executable)


def environment_key(declaration: Declaration, python: str, builder: str) -> str:
    """What an environment is the same for: the requirements, the interpreter and the builder."""
    blob = json.dumps({"requirements": declaration.requirements, "python": python, "builder": builder,
                       "only_binary": True}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def commit_python(checkout: Path, envs_dir: Path, label: str | None = None) -> Path:
    """The interpreter of the environment the commit at ``checkout`` declares: built under ``envs_dir`` when no
    environment of the same key is there, else the one there (atomic: a half-built one is never used). ``label``
    names the commit in what is said (a sha, "the working copy"); its folder's name by default."""
    label = label or checkout.name
    declaration = find_declaration(checkout, label)
    python = base_python()
    builder = _builder_version()
    key = environment_key(declaration, f"{python} {platform.python_version()}", builder)
    root = envs_dir / key
    interpreter = root / "bin" / "python"
    if (root / MARKER).is_file() and interpreter.exists():
        os.utime(root)  # its last use, which prune_environments goes by
        return interpreter
    envs_dir.mkdir(parents=True, exist_ok=True)
    # A minute or more of silence otherwise, before the first benchmark's line (uv downloads jax and jaxlib).
    print(f"building the environment of {label} from its {declaration.source} (uv; kept for every commit that "
          "declares the same)...", file=sys.stderr, flush=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=envs_dir))
    try:
        what = f"{label}: building its environment from {declaration.source}"
        _uv_run(["venv", "--quiet", "--python", python, str(partial)], what, timeout_s=120)
        requirements = partial / "requirements.txt"
        requirements.write_text(declaration.requirements, encoding="utf-8")
        # Compiled to bytecode once here: a benchmark process never writes bytecode (PYTHONDONTWRITEBYTECODE, so
        # that it writes nothing into the checkout), and without it every run would compile jax from source
        # before its first kernel: 2.8 s to jax's first operation against 1.0 (bench/bytecode.py).
        _uv_run(["pip", "install", "--quiet", "--python", str(partial / "bin" / "python"), "--only-binary", ":all:",
                 "--compile-bytecode", "-r", str(requirements)], what)
        (partial / MARKER).write_text(json.dumps({"key": key, "source": declaration.source, "python": python,
                                                  "builder": builder}) + "\n")
        try:
            os.replace(partial, root)
        except OSError:  # another runner finished the same environment first: use its
            if not (root / MARKER).is_file():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return interpreter


def prune_environments(envs_dir: Path, unused_for_s: float, now: float, dry_run: bool = False) -> list[Path]:
    """Delete the environments under ``envs_dir`` no run has used for ``unused_for_s`` seconds, and any left
    half-built; a run builds them again when it needs them. Returns what went (``dry_run``: what would)."""
    gone = []
    for path in sorted(envs_dir.iterdir()) if envs_dir.is_dir() else []:
        built = (path / MARKER).is_file()
        if path.is_dir() and path.name != "harness" and (not built or now - path.stat().st_mtime >= unused_for_s):
            if not dry_run:
                shutil.rmtree(path, ignore_errors=True)
            gone.append(path)
    return gone
