"""`kernelwatch predict` as a user types it, on a SQLite home whose results came in through real manifests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from service.contract import parse_manifest
from service.pipeline.ingest import ingest_manifest
from service.settings import load_settings
from service.store.db import make_engine, make_session_factory, unit_of_work, upgrade
from tests import builders
from tests.cli_inprocess import run_cli
from tests.processes import clean_env


def kernelwatch(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = clean_env(home, JAX_PLATFORMS="cpu")
    return run_cli(args, env)  # in this process, whose directory is the repository's (tests/cli_inprocess.py)


def softmax_result(rows: int, seconds: float) -> dict[str, object]:
    # softmax/softmax_rows exactly as the suite declares it: 5 FLOPs and 8 bytes per element.
    return builders.result(params={"rows": rows, "cols": 4096}, samples=[seconds, seconds * 1.01, seconds * 0.99],
                           flops=5.0 * rows * 4096, bytes_accessed=8.0 * rows * 4096)


def store(home: Path, environment: dict[str, object], times: dict[int, float], position: int = 0) -> None:
    url = load_settings({"KERNELWATCH_HOME": str(home)}).effective_database_url
    home.mkdir(parents=True, exist_ok=True)
    upgrade(url)
    engine = make_engine(url)
    try:
        with unit_of_work(make_session_factory(engine)) as session:
            results = [softmax_result(rows, seconds) for rows, seconds in times.items()]
            ingest_manifest(session, parse_manifest(builders.manifest(position, results, environment=environment)))
    finally:
        engine.dispose()


def test_predict_interpolates_the_stored_measurements_of_a_suite_family(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # A host whose runner stored its calibration (10 GB/s): softmax is memory-bound, its roofline time at
    # rows x 4096 is 8 * rows * 4096 / 10e9 s; measured at 50 % of it at 256 rows and 80 % at 1024 rows.
    roofline = {rows: 8.0 * rows * 4096 / 10e9 for rows in (256, 1024)}
    store(home, builders.environment(calibration=builders.calibration()),
          {256: roofline[256] / 0.5, 1024: roofline[1024] / 0.8})
    # The same family on a TPU v5e, slower than its roofline: another hardware, not mixed in.
    store(home, builders.environment(backend="tpu", device_kind="TPU v5 lite"), {256: 1.0}, position=1)

    done = kernelwatch(["predict", "--kernel", "softmax", "--from", "rows=256,cols=4096", "--to", "rows=512",
                        "--hardware", "cpu"], home)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("softmax/softmax_rows on CPU host (stored calibration)\n")
    assert "2 measured shape(s)" in out
    # Between 256 and 1024 rows the time runs on a straight line in roofline time: 2x the 256-row roofline time
    # there, 5x it at 1024 rows (4x the roofline at 80 %), so 3x at 512 rows: 66.7 % of 512 rows' roofline,
    # 3 x 8*256*4096/10e9 s = 2.52 ms.
    assert "66.7% (interpolated)" in out and "2.52 ms" in out
    assert "measured time   1.68 ms" in out  # the stored median at 256 rows: 0.839 ms / 0.5
    assert "does not cross the ridge: memory-bound at both shapes" in out

    tpu = kernelwatch(["predict", "--kernel", "softmax/softmax_rows", "--from", "rows=256", "--to", "rows=512",
                       "--hardware", "tpu-v5e"], home)
    assert tpu.returncode == 0, tpu.stderr
    assert "TPU v5e (published figures)" in tpu.stdout and "1 measured shape(s)" in tpu.stdout
    assert "predicted time  1 s" in tpu.stdout and "2 s\n" in tpu.stdout  # its own efficiency, held

    chip = kernelwatch(["predict", "--kernel", "softmax", "--from", "rows=256", "--to", "rows=512", "--hardware",
                        "h200"], home)
    assert chip.returncode == 0, chip.stderr
    assert "roofline only, at an assumed 50%" in chip.stdout


def test_predict_refuses_what_it_cannot_answer_with_exit_status_2(tmp_path: Path) -> None:
    home = tmp_path / "home"
    unknown = kernelwatch(["predict", "--kernel", "conv", "--from", "n=1", "--to", "n=2"], home)
    assert unknown.returncode == 2 and "unknown kernel 'conv'" in unknown.stderr
    param = kernelwatch(["predict", "--kernel", "softmax", "--from", "rowz=1", "--to", "rows=2"], home)
    assert param.returncode == 2 and "unknown parameter(s) rowz" in param.stderr
    empty = kernelwatch(["predict", "--kernel", "softmax", "--from", "rows=1", "--to", "rows=2"], home)
    assert empty.returncode == 2 and "no stored measurements" in empty.stderr
