"""The replay set shared by detect_quality.py and detect_speed.py, and the bridge to apache-otava.

A replay set is a list of conditions. Each condition is a matrix of per-commit values (one value per commit, like
the median of its samples; linear units, always > 0), one row per series, with the truth recorded per series: the
commits where the level really changed (the first commit of the new level) and by how much. Every condition draws
from its own generator, seeded from the run's seed and the condition's name, so a condition's series do not depend
on which other conditions are generated or on the size of the run.

Noise is multiplicative: ``value = base x level x (1 + noise)``, with ``base`` drawn per series log-uniformly
between 10 us and 10 ms (a detector must not care about units) and ``noise`` Gaussian with the given standard
deviation unless the condition says otherwise. Conditions:

- ``stable``: no change at all; noise 0.5, 1, 2, 3 %; 100 commits, and 200 at 1 % noise.
- ``heavy``: no change, 1 % Gaussian noise plus heavy tails: 2 % of commits slow by 5-50 % (uniform), or the noise
  drawn from Student's t with 3 degrees of freedom and scale 1 % (its standard deviation is 1.7 %).
- ``step``: one step of +-1, 2, 3, 5, 10 % at a position drawn uniformly from commits 20..80 of 100, at each noise
  level; a 3 % step at 1 % noise among 200 commits (position 40..160); and +-3 % steps with the 2 % slow outliers.
- ``drift``: a linear ramp (+5 % over 100 commits, at 0.5 and 1 % noise; -5 % over 100; +10 % over 100; +5 % over 50
  commits starting at commit 25). Neither a step nor stable: what a detector reports on them is shown apart.
- ``multi``: 2-4 steps of +-3, 5, 10 % in 200 commits, and 2 steps in 100 commits, positions at least 15 commits
  apart and at least 15 from either end; 1 % noise.

Sizes: ``--series N`` (default 2,000; ``--quick`` 100) is the number of series per no-change condition; each step
condition gets N/4, each drift and multi-step condition N/4.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

FULL_SERIES = 2000
QUICK_SERIES = 100
NOISES = (0.005, 0.01, 0.02, 0.03)
STEP_SIZES = (-0.10, -0.05, -0.03, -0.02, -0.01, 0.01, 0.02, 0.03, 0.05, 0.10)
MIN_SPACING = 15


@dataclass
class Condition:
    name: str
    kind: str  # "stable", "heavy", "step", "drift" or "multi"
    noise: float  # the Gaussian noise's standard deviation (or the t distribution's scale), relative
    values: np.ndarray  # (series, commits), > 0
    truth: list[list[int]]  # per series: the first commits of new levels (empty: no step)
    sizes: list[list[float]]  # per series, parallel to truth: the relative size of each step
    step: float | None = None  # for kind "step": the planted size
    tails: str = "gaussian"  # "gaussian", "outliers" or "t3"
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def series(self) -> int:
        return self.values.shape[0]

    @property
    def commits(self) -> int:
        return self.values.shape[1]


def rng_for(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def noise_matrix(rng: np.random.Generator, n: int, commits: int, noise: float, tails: str) -> np.ndarray:
    """The multiplicative factor of each commit's value: 1 + noise, with heavy tails if asked."""
    if tails == "t3":
        factor = 1.0 + noise * rng.standard_t(3, size=(n, commits))
    else:
        factor = 1.0 + noise * rng.standard_normal((n, commits))
    if tails == "outliers":
        slow = rng.random((n, commits)) < 0.02
        factor[slow] *= 1.0 + rng.uniform(0.05, 0.50, int(slow.sum()))
    return np.maximum(factor, 0.05)  # a t(3) draw 95 scales below zero is vanishingly rare; keep values > 0


def bases(rng: np.random.Generator, n: int) -> np.ndarray:
    return 10.0 ** rng.uniform(-5, -2, n)


def make(rng: np.random.Generator, n: int, commits: int, noise: float, tails: str,
         steps: list[list[tuple[int, float]]] | None = None, ramp: np.ndarray | None = None) -> np.ndarray:
    level = np.ones((n, commits))
    for row, planted in enumerate(steps or []):
        for at, size in planted:
            level[row, at:] *= 1.0 + size
    if ramp is not None:
        level *= ramp[None, :]
    return bases(rng, n)[:, None] * level * noise_matrix(rng, n, commits, noise, tails)


def no_change(seed: int, name: str, kind: str, n: int, commits: int, noise: float, tails: str = "gaussian",
              note: str = "") -> Condition:
    rng = rng_for(seed, name)
    values = make(rng, n, commits, noise, tails)
    return Condition(name, kind, noise, values, [[] for _ in range(n)], [[] for _ in range(n)], tails=tails,
                     note=note)


def single_step(seed: int, name: str, n: int, commits: int, noise: float, size: float, lo: int, hi: int,
                tails: str = "gaussian") -> Condition:
    rng = rng_for(seed, name)
    positions = rng.integers(lo, hi + 1, n)
    steps = [[(int(at), size)] for at in positions]
    values = make(rng, n, commits, noise, tails, steps=steps)
    return Condition(name, "step", noise, values, [[int(at)] for at in positions], [[size] for _ in positions],
                     step=size, tails=tails)


def spaced_positions(rng: np.random.Generator, k: int, commits: int, spacing: int = MIN_SPACING) -> list[int]:
    """k sorted positions in [spacing, commits - spacing], each at least ``spacing`` from the next: the free
    room left after the mandatory gaps is shared out at random."""
    room = commits - 2 * spacing - (k - 1) * spacing
    cuts = np.sort(rng.integers(0, room + 1, k))
    return [int(spacing + i * spacing + c) for i, c in enumerate(cuts)]


def multi_step(seed: int, name: str, n: int, commits: int, noise: float, counts: tuple[int, ...]) -> Condition:
    rng = rng_for(seed, name)
    truth, sizes = [], []
    for _ in range(n):
        k = int(rng.choice(counts))
        truth.append(spaced_positions(rng, k, commits))
        sizes.append([float(rng.choice((-1, 1)) * rng.choice((0.03, 0.05, 0.10))) for _ in range(k)])
    steps = [list(zip(t, s, strict=True)) for t, s in zip(truth, sizes, strict=True)]
    values = make(rng, n, commits, noise, "gaussian", steps=steps)
    return Condition(name, "multi", noise, values, truth, sizes)


def reverted(seed: int, name: str, n: int, commits: int, noise: float, widths: tuple[int, int],
             sizes: tuple[float, ...]) -> Condition:
    """A regression reverted ``widths`` commits later (a bump: a level that came and went), at a random place:
    two true points, the step and its revert, closer than the multi-step conditions' spacing."""
    rng = rng_for(seed, name)
    truth, steps = [], []
    for _ in range(n):
        width = int(rng.integers(widths[0], widths[1] + 1))
        at = int(rng.integers(20, commits - 20 - width))
        size = float(rng.choice(sizes))
        truth.append([at, at + width])
        steps.append([(at, size), (at + width, 1.0 / (1.0 + size) - 1.0)])
    values = make(rng, n, commits, noise, "gaussian", steps=steps)
    return Condition(name, "multi", noise, values, truth, [[size for _, size in planted] for planted in steps])


def drift(seed: int, name: str, n: int, commits: int, noise: float, total: float, start: int,
          length: int) -> Condition:
    rng = rng_for(seed, name)
    ramp = 1.0 + total * np.clip((np.arange(commits) - start) / length, 0.0, 1.0)
    values = make(rng, n, commits, noise, "gaussian", ramp=ramp)
    return Condition(name, "drift", noise, values, [[] for _ in range(n)], [[] for _ in range(n)],
                     extra={"total": total, "start": start, "length": length})


def replay_set(seed: int = 0, series: int = FULL_SERIES) -> list[Condition]:
    """The whole replay set: ``series`` per no-change condition, series/4 per step, drift and multi condition."""
    n, quarter = series, max(series // 4, 8)
    out: list[Condition] = []
    for noise in NOISES:
        out.append(no_change(seed, f"stable {noise:.1%}", "stable", n, 100, noise))
    out.append(no_change(seed, "stable 1.0% x200", "stable", n, 200, 0.01))
    out.append(no_change(seed, "outliers 1.0%", "heavy", n, 100, 0.01, "outliers",
                         note="2 % of commits slow by 5-50 %"))
    out.append(no_change(seed, "t(3) 1.0%", "heavy", n, 100, 0.01, "t3", note="Student-t(3) noise, scale 1 %"))
    for noise in NOISES:
        for size in STEP_SIZES:
            out.append(single_step(seed, f"step {size:+.0%} @ {noise:.1%}", quarter, 100, noise, size, 20, 80))
    out.append(single_step(seed, "step +3% @ 1.0% x200", quarter, 200, 0.01, 0.03, 40, 160))
    for size in (-0.03, 0.03):
        out.append(single_step(seed, f"step {size:+.0%} @ 1.0% +outliers", quarter, 100, 0.01, size, 20, 80,
                               tails="outliers"))
    out.append(drift(seed, "drift +5%/100 @ 0.5%", quarter, 100, 0.005, 0.05, 0, 100))
    out.append(drift(seed, "drift +5%/100 @ 1.0%", quarter, 100, 0.01, 0.05, 0, 100))
    out.append(drift(seed, "drift -5%/100 @ 1.0%", quarter, 100, 0.01, -0.05, 0, 100))
    out.append(drift(seed, "drift +10%/100 @ 1.0%", quarter, 100, 0.01, 0.10, 0, 100))
    out.append(drift(seed, "drift +5%/50 @ 1.0%", quarter, 100, 0.01, 0.05, 25, 50))
    out.append(multi_step(seed, "multi 2-4 in 200 @ 1.0%", quarter, 200, 0.01, (2, 3, 4)))
    out.append(multi_step(seed, "multi 2 in 100 @ 1.0%", quarter, 100, 0.01, (2,)))
    out.append(reverted(seed, "reverted 4-12 later @ 1.0%", quarter, 100, 0.01, (4, 12), (0.10, 0.50, 2.0)))
    out.append(reverted(seed, "reverted 4-12 later @ 3.0%", quarter, 100, 0.03, (4, 12), (0.10, 0.50, 2.0)))
    return out


def speed_matrix(seed: int, series: int, commits: int) -> np.ndarray:
    """The speed benchmark's data: 1 % noise; half the series stable, a quarter with one step of +-2..10 %, 15 %
    with 2 % slow outliers, 10 % with two or three steps. Rows shuffled, so that no subset is easier than another."""
    rng = rng_for(seed, f"speed {series}x{commits}")
    kinds = rng.choice(4, size=series, p=(0.50, 0.25, 0.15, 0.10))
    steps: list[list[tuple[int, float]]] = []
    for kind in kinds:
        if kind == 1:
            size = float(rng.choice((-1, 1)) * rng.choice((0.02, 0.03, 0.05, 0.10)))
            steps.append([(int(rng.integers(commits // 5, commits - commits // 5)), size)])
        elif kind == 3 and commits >= 4 * MIN_SPACING + 15:
            k = int(rng.integers(2, 4))
            steps.append([(at, float(rng.choice((-1, 1)) * rng.choice((0.03, 0.05, 0.10))))
                          for at in spaced_positions(rng, k, commits)])
        else:
            steps.append([])
    values = make(rng, series, commits, 0.01, "gaussian", steps=steps)
    slow = (kinds == 2)[:, None] & (rng.random((series, commits)) < 0.02)
    values[slow] *= 1.0 + rng.uniform(0.05, 0.50, int(slow.sum()))
    return values


def engine_fingerprint() -> str:
    """Which version of KernelWatch's engine a run measured: the digest of its modules' sources
    (service/detect/changepoints.py and the detect modules it imports) and their latest modification time."""
    import service.detect.changepoints as engine

    folder = Path(engine.__file__).parent
    paths = [folder / name for name in ("changepoints.py", "edivisive.py", "robust.py") if (folder / name).exists()]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()[:12]
    latest = max(p.stat().st_mtime for p in paths)
    modified = datetime.fromtimestamp(latest, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"service/detect/{{{','.join(p.stem for p in paths)}}}.py sha256 {digest}, last modified {modified}"


# --- apache-otava, in its own virtual environment --------------------------------------------------------------

OTAVA_REQUIREMENT = "apache-otava==0.8.0"
OTAVA_VENV = Path(__file__).resolve().parent / ".otava-venv"
OTAVA_SIDE = Path(__file__).resolve().parent / "otava_side.py"


def _say(message: str) -> None:
    print(message, flush=True)


def _fail(message: str, output: str = "") -> None:
    """The message on stderr (with the tail of the failed command's output, if any), then exit status 2."""
    tail = "\n".join(output.strip().splitlines()[-15:])
    print(f"error: {message}" + (f"\n--- last lines of its output ---\n{tail}" if tail else ""), file=sys.stderr)
    raise SystemExit(2)


def otava_python() -> Path:
    """The interpreter of the Otava venv (``bench/.otava-venv``, or ``$KERNELWATCH_OTAVA_VENV``), created on first
    use: ``python3 -m venv`` then ``pip install apache-otava==0.8.0``. Otava pins an older numpy than KernelWatch
    needs, so it never shares KernelWatch's environment."""
    venv = Path(os.environ.get("KERNELWATCH_OTAVA_VENV", OTAVA_VENV))
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import otava.analysis"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    if not python.exists():
        base = shutil.which("python3") or sys.executable
        _say(f"[otava] creating its virtual environment: {base} -m venv {venv}")
        made = subprocess.run([base, "-m", "venv", "--clear", str(venv)], capture_output=True, text=True)
        if made.returncode != 0 or not python.exists():
            _fail(f"could not create a virtual environment at {venv} for apache-otava "
                  "(is the python3-venv package installed?)", made.stdout + made.stderr)
    _say(f"[otava] installing {OTAVA_REQUIREMENT} into {venv} (pip; this takes a minute) ...")
    pip = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                          OTAVA_REQUIREMENT], capture_output=True, text=True)
    if pip.returncode != 0 or subprocess.run(probe, capture_output=True).returncode != 0:
        _fail(f"could not install {OTAVA_REQUIREMENT} into {venv}; the Otava comparison needs it "
              "(a package index must be reachable; remove the folder to start over)", pip.stdout + pip.stderr)
    _say("[otava] installed")
    return python


def run_otava(groups: list[tuple[str, np.ndarray]]) -> dict:
    """Otava's ``compute_change_points`` with its defaults on every row of every group, in a subprocess of the
    Otava venv. Returns ``{"otava_version", "numpy_version", "groups": {name: {"seconds", "series",
    "change_points": [[index, ...] per row]}}}``; ``seconds`` is Otava's analysis alone, timed in that process."""
    python = otava_python()
    with tempfile.TemporaryDirectory(prefix="kw-otava-") as tmp:
        folder = Path(tmp)
        job = {"groups": []}
        for i, (name, matrix) in enumerate(groups):
            file = f"group{i}.npy"
            np.save(folder / file, np.ascontiguousarray(matrix, dtype=np.float64))
            job["groups"].append({"name": name, "file": file})
        (folder / "job.json").write_text(json.dumps(job))
        started = time.perf_counter()
        done = subprocess.run([str(python), str(OTAVA_SIDE), str(folder / "job.json"), str(folder / "out.json")],
                              capture_output=True, text=True)
        if done.returncode != 0:
            _fail("the Otava subprocess failed", done.stdout + done.stderr)
        result = json.loads((folder / "out.json").read_text())
    result["process_seconds"] = time.perf_counter() - started
    result["groups"] = {g["name"]: g for g in result["groups"]}
    return result
