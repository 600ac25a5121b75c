"""`kernelwatch detect --input FILE --format json` as a user runs it: a real process, real files."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.conftest import REPO_ROOT


def kernelwatch(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=REPO_ROOT, input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_detect_prints_the_planted_change_points_as_json(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    rows = ["series,position,value"]
    for p in range(60):
        for _ in range(5):
            rows.append(f"stable,{p},{np.exp(rng.normal(0, 0.01)):.6f}")
            rows.append(f"stepped,{p},{(1.05 if p >= 40 else 1.0) * np.exp(rng.normal(0, 0.01)):.6f}")
    path = tmp_path / "samples.csv"
    path.write_text("\n".join(rows) + "\n")
    done = kernelwatch("detect", "--input", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    (change,) = json.loads(done.stdout)["change_points"]
    assert {k: change[k] for k in ("series", "position", "direction")} == {
        "series": "stepped", "position": 40, "direction": "increase"}
    assert 0.03 < change["magnitude"] < 0.07 and change["p_value"] < 1e-3
    stdin = kernelwatch("detect", "--input", "-", stdin=path.read_text())
    assert json.loads(stdin.stdout) == json.loads(done.stdout)


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("series,position,value\ns,1,fast\n")
    done = kernelwatch("detect", "--input", str(bad))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"kernelwatch: error: {bad}:2: value 'fast' is not a number"]
    missing = kernelwatch("detect", "--input", str(tmp_path / "nope.csv"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    binary = tmp_path / "x.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert kernelwatch("detect", "--input", str(binary)).returncode == 2


def test_parameters_that_are_no_numbers_are_refused_and_the_json_stays_json(tmp_path: Path) -> None:
    """NaN once read "no change points" for a clear step, a negative --min-effect failed with a math domain
    traceback, and values from 1e-300 to 1e300 printed "magnitude": Infinity, which no JSON reader takes."""
    rows = ["series,position,value"] + [f"s,{p},{1.3 if p >= 20 else 1.0}" for p in range(40) for _ in range(3)]
    step = tmp_path / "step.csv"
    step.write_text("\n".join(rows) + "\n")
    for flag, value in (("--min-effect", "nan"), ("--k-noise", "nan"), ("--min-effect", "-1"),
                        ("--k-noise", "-5"), ("--min-effect", "inf")):
        done = kernelwatch("detect", "--input", str(step), flag, value)
        assert done.returncode == 2 and "must be a finite number" in done.stderr, (flag, value, done.stderr)
        assert "Traceback" not in done.stderr
    rows = ["series,position,value"] + [f"s,{p},{1e300 if p >= 20 else 1e-300}" for p in range(40) for _ in range(3)]
    huge = tmp_path / "huge.csv"
    huge.write_text("\n".join(rows) + "\n")
    done = kernelwatch("detect", "--input", str(huge))
    assert done.returncode == 0, done.stderr
    assert "Infinity" not in done.stdout and "NaN" not in done.stdout
    [change] = json.loads(done.stdout)["change_points"]
    assert change["position"] == 20 and change["magnitude"] is None  # unbounded: null, the step still found
