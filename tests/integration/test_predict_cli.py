"""`kernelwatch predict` as a user types it, on a SQLite home whose results came in through real manifests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from runners.suite import discover
from service.contract import parse_manifest
from service.pipeline.ingest import ingest_manifest
from service.settings import load_settings
from service.store.db import make_engine, make_session_factory, unit_of_work, upgrade
from tests import builders
from tests.cli_inprocess import run_cli
from tests.conftest import REPO_ROOT
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
    nowhere = kernelwatch(["predict", "--kernel", "softmax", "--from", "rows=1", "--to", "rows=2", "--repo", "nosuch"],
                          home)
    assert nowhere.returncode == 2 and "no repository named 'nosuch'" in nowhere.stderr, nowhere.stderr


def test_runs_that_kept_their_pages_are_predicted_with_the_fresh_pages_regime_they_ran_in(tmp_path: Path) -> None:
    """Runs made with `--keep-pages` record glibc's mmap threshold: their outputs of 32-64 MiB reuse freed pages,
    so a shape there is at its cache level, not with the shapes whose every output is mapped afresh
    (service/model/predict.py, fresh_pages_bytes). softmax over 4096 columns holds rows x 16 KiB of working set:
    3072 rows hold 48 MiB."""
    home = tmp_path / "home"
    mib = 2 ** 20
    calibration = builders.calibration(caches=[{"name": "L2", "size_bytes": 2 * mib},
                                               {"name": "L3", "size_bytes": 480 * mib}])
    roofline = {rows: 8.0 * rows * 4096 / 10e9 for rows in (512, 1024, 2048, 4096)}
    # Measured with the pages kept: 50 % of the roofline up to 2048 rows (32 MiB), 20 % at 4096 (64 MiB: a thread's
    # arena maps that afresh whatever the threshold).
    kept = builders.environment(calibration=calibration, malloc_mmap_threshold=2 ** 30)
    store(home, kept, {rows: roofline[rows] / (0.2 if rows == 4096 else 0.5) for rows in roofline})
    args = ["predict", "--kernel", "softmax", "--from", "rows=1024,cols=4096", "--to", "rows=3072", "--hardware",
            "cpu"]
    done = kernelwatch(args, home)
    assert done.returncode == 0, done.stderr
    # At L3 with 512-2048 rows, past the largest of them: their line, at 50 % throughout. Read as a default run's,
    # 3072 rows would sit with 2048 and 4096 in the fresh-pages regime and be drawn toward 4096's 20 %.
    assert "50.0% (extrapolated)" in done.stdout, done.stdout
    assert "allocator settings" not in done.stdout

    # The same family measured without --keep-pages too, at fewer shapes: read from the kept runs, and said so.
    store(home, builders.environment(calibration=calibration), {512: roofline[512] / 0.5, 4096: roofline[4096] / 0.2},
          position=1)
    mixed = kernelwatch(args, home)
    assert mixed.returncode == 0, mixed.stderr
    assert "50.0% (extrapolated)" in mixed.stdout and "4 measured shape(s)" in mixed.stdout, mixed.stdout
    assert "measured under 2 allocator settings" in mixed.stdout and "from 64 MiB" in mixed.stdout, mixed.stdout


def test_a_shape_too_large_to_count_is_refused_with_exit_status_2_not_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store(home, builders.environment(calibration=builders.calibration()), {256: 1e-3, 1024: 3e-3})
    # 10**400 rows: the suite's cost function (5.0 * rows * cols) cannot make a float of it and raises.
    raised = kernelwatch(["predict", "--kernel", "softmax", "--from", "rows=256", "--to", f"rows={10 ** 400}",
                          "--hardware", "cpu"], home)
    assert raised.returncode == 2, raised.stderr
    assert "softmax/softmax_rows cannot count the shape rows=100000000000000000000000...,cols=4096: " \
           "OverflowError" in raised.stderr
    assert "Traceback" not in raised.stderr
    # 10**308 rows: a float, but 5 FLOPs an element of 4096 columns is past its range (inf).
    infinite = kernelwatch(["predict", "--kernel", "softmax", "--from", "rows=256", "--to", f"rows={10 ** 308}",
                            "--hardware", "cpu"], home)
    assert infinite.returncode == 2, infinite.stderr
    assert "beyond a float's range (inf FLOPs, inf bytes)" in infinite.stderr
    assert "Traceback" not in infinite.stderr


def test_stored_shapes_another_suite_measured_are_said_to_be_not_ones_it_counts(tmp_path: Path) -> None:
    """Another project's softmax/softmax_rows (its parameters are not this suite's): its stored shapes cannot be
    counted by this suite's cost function, and the prediction said only "no measurements", as if none were made."""
    home = tmp_path / "home"
    url = load_settings({"KERNELWATCH_HOME": str(home)}).effective_database_url
    home.mkdir(parents=True)
    upgrade(url)
    engine = make_engine(url)
    try:
        with unit_of_work(make_session_factory(engine)) as session:
            theirs = [builders.result(params={"n": n}, samples=[1e-3, 1.01e-3, 0.99e-3]) for n in (256, 1024)]
            ingest_manifest(session, parse_manifest(builders.manifest(0, theirs, environment=builders.environment(
                calibration=builders.calibration()))))
    finally:
        engine.dispose()
    done = kernelwatch(["predict", "--kernel", "softmax", "--from", "rows=256", "--to", "rows=512"], home)
    assert done.returncode == 0, done.stderr
    assert "its 2 stored shape(s) there are none this suite counts" in done.stdout, done.stdout
    assert "--suite-root" in done.stdout


def test_a_suite_that_cannot_be_imported_is_one_line_and_exit_status_2(tmp_path: Path) -> None:
    """--suite-root of a project whose benchmarks import its own package (under src/, not installed here)."""
    suite = tmp_path / "checkout" / "kernels_under_test"
    suite.mkdir(parents=True)
    (suite / "__init__.py").write_text("")
    (suite / "norms.py").write_text("import mykernels_not_here\n")
    try:
        done = kernelwatch(["predict", "--kernel", "norms", "--from", "rows=1", "--to", "rows=2", "--suite-root",
                            str(tmp_path / "checkout")], tmp_path / "home")
    finally:  # this process's kernels_under_test is the shipped suite again, for the tests after this one
        discover(REPO_ROOT)
    assert done.returncode == 2, done.stderr
    assert "cannot import the suite at" in done.stderr and "ModuleNotFoundError" in done.stderr, done.stderr
    assert "PYTHONPATH=src" in done.stderr and "Traceback" not in done.stderr


def test_a_projects_checkout_is_read_through_its_project_files_benchmarks_directory(tmp_path: Path) -> None:
    """A library that declares its suite in pyproject.toml ([tool.kernelwatch] benchmarks), as `kernelwatch run`
    reads it: --suite-root at its checkout read "no kernels_under_test/__init__.py under" it."""
    checkout = tmp_path / "lib"
    (checkout / "benchmarks").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text('[project]\nname = "mylib"\n\n[tool.kernelwatch]\n'
                                             'benchmarks = "benchmarks"\n')
    (checkout / "benchmarks" / "fused.py").write_text(
        "from runners.suite import Case, benchmark, grid\n\n\n"
        "def cost(rows: int) -> tuple[float, float]:\n    return 5.0 * rows * 4096, 8.0 * rows * 4096\n\n\n"
        "@benchmark(suite='fused', params=grid(rows=[256, 1024]), cost=cost)\n"
        "def norm_bench(rows: int) -> Case:\n    raise AssertionError('a cost model counts without building')\n")
    try:
        done = kernelwatch(["predict", "--kernel", "fused/norm_bench", "--from", "rows=256", "--to", "rows=512",
                            "--suite-root", str(checkout), "--hardware", "h200"], tmp_path / "home")
        unknown = kernelwatch(["predict", "--kernel", "fused/other", "--from", "rows=256", "--to", "rows=512",
                               "--suite-root", str(checkout)], tmp_path / "home")
    finally:  # this process's suite is the shipped one again, for the tests after this one
        discover(REPO_ROOT)
    assert done.returncode == 0, done.stderr
    assert "fused/norm_bench" in done.stdout and "rows=512" in done.stdout, done.stdout
    assert unknown.returncode == 2 and "unknown kernel 'fused/other': give a suite (fused)" in unknown.stderr
