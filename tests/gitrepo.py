"""git for tests that build small repositories: one identity, failures raised, output returned; and the tiny
suite repositories several tests plant a change in."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# One benchmark scaling a vector, after DEPTH tanh: raising DEPTH adds HLO instructions and machine code.
SCALE_KERNEL = '''import jax
import jax.numpy as jnp
import numpy as np

from runners.suite import Case, benchmark

DEPTH = 0


def kernel(x):
    for _ in range(DEPTH):
        x = jnp.tanh(x)
    return x * 2.0 + 1.0


def reference(x):
    for _ in range(DEPTH):
        x = np.tanh(x)
    return x * 2.0 + 1.0


@benchmark(suite="tiny", params=[{"n": 1024}])
def scale(n: int) -> Case:
    x = np.linspace(0.0, 1.0, n, dtype=np.float32)
    return Case(fn=jax.jit(kernel), args=(jnp.asarray(x),), reference=lambda: reference(x), rtol=1e-4, atol=1e-4)
'''


# A kernel library shaped like a real one (tests/integration/test_own_repository.py, test_build_step.py): its
# chain's length is the planted slowdown.
FASTOPS_LIBRARY = '''"""fastops: a kernel library."""
import jax
import jax.numpy as jnp

STEPS = {steps}


def chain(x, w):
    return jax.lax.fori_loop(0, STEPS, lambda _, y: jnp.tanh(y @ w), x)
'''

FASTOPS_BENCHMARK = '''import jax.numpy as jnp
import numpy as np

import fastops
from runners.suite import Case, benchmark


@benchmark(suite="fastops", params=[{"n": 128}])
def chain(n: int) -> Case:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32))
    w = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32) / n)
    return Case(fn=fastops.chain, args=(x, w))
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=T", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def suite_repo(root: Path, source: str, module: str = "tiny") -> Path:
    """A new repository at ``root`` on ``main`` holding ``kernels_under_test/<module>.py``, not yet committed;
    the module's path, for the commits that change it."""
    path = root / "kernels_under_test" / f"{module}.py"
    path.parent.mkdir(parents=True)
    (path.parent / "__init__.py").write_text("")
    path.write_text(source)
    git(root, "init", "-q", "-b", "main")
    return path


def commit_all(repo: Path, message: str) -> str:
    """Stage everything and commit it; the new commit's sha."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def two_commit_suite_repo(root: Path, source: str, changed: str, messages: tuple[str, str]) -> list[str]:
    """A suite repository whose first commit holds ``source`` and whose second replaces it with ``changed``;
    the two shas, oldest first."""
    module = suite_repo(root, source)
    first = commit_all(root, messages[0])
    module.write_text(changed)
    return [first, commit_all(root, messages[1])]


def project_suite_repo(root: Path) -> Path:
    """A new repository at ``root`` holding a copy of this project's own suite (``kernels_under_test``) in one
    commit on ``main``."""
    root.mkdir()
    shutil.copytree(PROJECT_ROOT / "kernels_under_test", root / "kernels_under_test",
                    ignore=shutil.ignore_patterns("__pycache__"))
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "suite")
    return root
