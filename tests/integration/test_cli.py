"""`kernelwatch run` and `kernelwatch ingest` as a user types them: real git, real JAX child, real database."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from runners.artifacts import ArtifactStore
from service.store.db import make_engine, make_session_factory
from service.store.models import Artifact, Commit, Result, ResultArtifact, Run, Series
from tests import builders
from tests.conftest import REPO_ROOT
from tests.gitrepo import git
from tests.processes import clean_env

KERNELWATCH = [sys.executable, "-m", "service.cli"]


def kernelwatch(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KERNELWATCH, *args], env=env, capture_output=True, text=True, timeout=timeout)




@pytest.fixture
def suite_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "kernels"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "Test")
    shutil.copytree(REPO_ROOT / "kernels_under_test", repo / "kernels_under_test",
                    ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "suite")
    (repo / "README.md").write_text("second commit\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "docs: a readme")
    return repo


def env_for(tmp_path: Path, database_url: str | None) -> dict[str, str]:
    env = clean_env(tmp_path / "home")
    if database_url:
        env["KERNELWATCH_DATABASE_URL"] = database_url
    return env


def test_run_at_a_commit_stores_its_results(tmp_path: Path, suite_repo: Path, pg_database: str) -> None:
    env = env_for(tmp_path, pg_database)
    assert kernelwatch(["db", "upgrade"], env).returncode == 0
    out = tmp_path / "manifests"
    proc = kernelwatch(["run", "--repo", str(suite_repo), "--commit", "HEAD~1", "--samples", "3",
                        "--suite", "softmax/*", "--params", "rows=256", "--output", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    assert "1 ok, 0 failed (complete)" in proc.stdout
    assert "found nothing new" in proc.stdout  # one run: no history to change against
    [written] = list(out.iterdir())
    manifest = json.loads(written.read_text())
    first_sha = git(suite_repo, "rev-parse", "HEAD~1")
    assert manifest["commit"]["sha"] == first_sha and manifest["commit"]["position"] == 0
    assert manifest["branch"] == "main" and manifest["environment"]["backend"] == "cpu"
    assert len(manifest["results"][0]["samples"]) == 3

    engine = make_engine(pg_database)
    with make_session_factory(engine)() as s:
        assert s.scalar(select(Commit.sha)) == first_sha
        # On a CPU the captured trace serves the op table; wall time is the one time series.
        assert sorted(s.scalars(select(Series.metric))) == ["wall_time"]
        wall = s.scalars(select(Result).join(Series).where(Series.metric == "wall_time")).one()
        assert wall.cost.get("flops", 0) > 0
        kinds = set(s.scalars(select(Artifact.kind).join(ResultArtifact).where(ResultArtifact.result_id == wall.id)))
        assert {"hlo", "xplane", "x86-obj", "analysis"} <= kinds
        store = ArtifactStore(tmp_path / "home" / "artifacts")
        assert all(store.has(sha) for sha in s.scalars(select(Artifact.sha256)))
    # The same manifest again is one run, not two.
    again = kernelwatch(["ingest", str(written)], env)
    assert again.returncode == 0 and "already stored" in again.stdout
    with make_session_factory(engine)() as s:
        assert s.scalar(select(func.count(Run.id))) == 1
    engine.dispose()


def test_ingest_prints_the_alert_its_run_raised(tmp_path: Path) -> None:
    """A regression the command has just stored and detected is said by it (README: the CLI's commands print what
    detection found), not only on the inbox: runs of a history whose time doubles at its fifth commit."""
    from tests.cli_inprocess import run_cli

    env = env_for(tmp_path, None)
    said = []
    for i, doc in enumerate(builders.step_series_manifests([1e-3] * 4 + [2e-3] * 4)):
        path = tmp_path / f"run{i}.json"
        path.write_text(json.dumps(doc))
        done = run_cli(["ingest", str(path)], env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"run {doc['run_id']} stored\n")  # the id compare takes, not a row number
        said.append(done.stdout)
    assert "found nothing new" in said[0]
    # A history too short to report a change in time says so, and what tests two commits now (a first-day user's
    # four commits hid a 3x slowdown with no word); one long enough says nothing of it.
    assert "note: 1 commit(s) of" in said[0] and "at least 3 commits measured on each side" in said[0]
    assert "kernelwatch compare BASE HEAD" in said[0] and "note:" not in said[-1]
    raised = [out for out in said if "found (kernelwatch alerts list has every alert):" in out]
    assert raised, said
    assert "regression" in raised[0] and "+100" in raised[0] and "softmax/softmax_rows" in raised[0], raised[0]


def test_ingest_refuses_a_bad_manifest_with_exit_2(tmp_path: Path) -> None:
    env = env_for(tmp_path, None)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(builders.manifest(results=[builders.result(samples=[-1.0])])))
    proc = kernelwatch(["ingest", str(bad)], env)
    assert proc.returncode == 2
    assert "negative" in proc.stderr and "Traceback" not in proc.stderr


def test_ingest_of_an_endless_file_stops_at_the_manifest_cap(tmp_path: Path) -> None:
    """/dev/zero never ends: read up to POST /runs' cap and refused there (it used to grow without bound)."""
    proc = kernelwatch(["ingest", "/dev/zero"], env_for(tmp_path, None))
    assert proc.returncode == 2 and "larger than a manifest may be" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_unreachable_database_is_one_line_without_its_password(tmp_path: Path) -> None:
    """Issue 18: `serve` (and any command) with a database that does not answer printed a psycopg traceback."""
    from tests.private_servers import free_port

    env = env_for(tmp_path, f"postgresql://kw:hunter2@127.0.0.1:{free_port()}/kw")
    for command in (["serve", "--port", str(free_port())], ["alerts", "list"]):
        proc = kernelwatch(command, env, timeout=60)
        assert proc.returncode == 2, (command, proc.stderr[-2000:])
        assert "cannot use the database at postgresql+psycopg://kw:***@127.0.0.1" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "hunter2" not in proc.stderr


def test_an_unapplied_schema_is_reported_not_crashed(tmp_path: Path, pg_database: str) -> None:
    env = env_for(tmp_path, pg_database)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(builders.manifest()))
    proc = kernelwatch(["ingest", str(good)], env)
    assert proc.returncode == 2 and "kernelwatch db upgrade" in proc.stderr


def test_bad_settings_are_reported_with_the_variable(tmp_path: Path) -> None:
    env = env_for(tmp_path, None)
    env["KERNELWATCH_DATABASE_URL"] = "mysql://nope"
    proc = kernelwatch(["db", "upgrade"], env)
    assert proc.returncode == 2 and "KERNELWATCH_DATABASE_URL" in proc.stderr


def test_bad_numbers_are_refused_before_anything_runs(tmp_path: Path, suite_repo: Path) -> None:
    """Counts and ids are checked where they are typed: `run --samples 0` once measured the whole suite and then
    failed on its manifest, an id past any column reached the database driver (OverflowError, DataError), and a
    --suite that selects nothing exited 0 having said and stored nothing."""
    env = clean_env(tmp_path / "home")
    for args, said in ((["run", "--repo", str(suite_repo), "--samples", "0"], "0 is under 1"),
                       (["run", "--repo", str(suite_repo), "--warmup", "-1"], "-1 is under 0"),
                       (["run", "--repo", str(suite_repo), "--rounds", "two"], "'two' is not a whole number"),
                       (["trace", "9" * 30, "--no-serve"], "is no id"),
                       (["alerts", "triage", "9" * 30, "acknowledged"], "is no id"),
                       (["deliveries", "--retry", "²"], "is no id"),
                       # refused before the suite is measured (they were after it, the runs already stored)
                       (["ci", "--repo", str(suite_repo), "--base", "HEAD", "--alpha", "2"],
                        "alpha must lie between 0 and 1"),
                       (["run", "--repo", str(suite_repo), "--params", "n"], "is not NAME=VALUE"),
                       # XLA warns of an ISA it does not know and ignores it, while the flag named a new series
                       (["run", "--repo", str(suite_repo), "--cpu-isa", "AVX3"], "'AVX3' is not an ISA XLA:CPU knows"),
                       (["ci", "--repo", str(suite_repo), "--base", "HEAD", "--cpu-isa", "avx-512"],
                        "one of SSE4_2, AVX, AVX2, AVX512"),
                       # what the enqueue API refuses (a queue no worker consumes lost its task without a word)
                       (["submit", "--repo", str(suite_repo), "--commit", "HEAD", "--hardware", "CPU"],
                        "is not a runner queue suffix"),
                       (["submit", "--repo", str(suite_repo), "--commit=--upload-pack=touch /tmp/x"],
                        "not a revision"),
                       (["submit", "--repo", "https://example.com/k.git", "--commit=--upload-pack=touch /tmp/x"],
                        "is not a revision (a sha, branch or tag)"),
                       (["submit", "--repo", "a" * 5000, "--commit", "HEAD"], "at most 2000 characters"),
                       # an unknown option is the verb's to explain (it sent a user to `kernelwatch --help`)
                       (["run", "--repo", str(suite_repo), "--iterations", "5"],
                        "kernelwatch run: error: unrecognized arguments: --iterations 5 (see kernelwatch run --help)")):
        proc = kernelwatch(args, env)
        assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "usage:" not in proc.stderr, proc.stderr  # one line, as README says
    nothing = kernelwatch(["run", "--repo", str(suite_repo), "--suite", "nomatch/x", "--samples", "2"], env)
    assert nothing.returncode == 2 and "selected no benchmark" in nothing.stderr, nothing.stderr
    assert "it declares" in nothing.stderr and "softmax/softmax_rows" in nothing.stderr  # what a typo missed
    assert "stored as run" not in nothing.stdout


def test_a_revision_that_names_no_commit_says_so(tmp_path: Path, suite_repo: Path) -> None:
    """`git rev-parse --quiet` says nothing of its own: the message once ended at "failed in PATH: "."""
    env = clean_env(tmp_path / "home")
    unknown = kernelwatch(["run", "--repo", str(suite_repo), "--commit", "nosuchrev"], env)
    assert unknown.returncode == 2 and "'nosuchrev' names no commit there" in unknown.stderr, unknown.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    unborn = kernelwatch(["run", "--repo", str(empty)], env)
    assert unborn.returncode == 2 and "names no commit there" in unborn.stderr, unborn.stderr


def test_submit_refuses_a_commit_or_a_path_that_is_not_there_in_one_line(tmp_path: Path, suite_repo: Path) -> None:
    """`submit --commit deadbeef` ended in a GitError traceback (exit 1); a local path naming no directory was
    queued, then refused by the runner as "not a repository location KernelWatch accepts"."""
    env = env_for(tmp_path, None)
    unknown = kernelwatch(["submit", "--repo", str(suite_repo), "--commit", "deadbeef", "--quick"], env)
    assert unknown.returncode == 2 and "cannot resolve 'deadbeef'" in unknown.stderr, unknown.stderr
    assert "Traceback" not in unknown.stderr
    missing = kernelwatch(["submit", "--repo", str(tmp_path / "nowhere"), "--commit", "main"], env)
    assert missing.returncode == 2 and f"no directory '{tmp_path / 'nowhere'}'" in missing.stderr, missing.stderr
    assert "queued" not in missing.stdout and "Traceback" not in missing.stderr


def test_submit_of_a_selection_that_holds_no_benchmark_stores_nothing(tmp_path: Path, suite_repo: Path) -> None:
    """`submit --suite typo` ran, stored a run with no results and said "ran ... runs <id>", as if measured."""
    env = env_for(tmp_path, None)
    empty = kernelwatch(["submit", "--repo", str(suite_repo), "--commit", "HEAD", "--suite", "no_such_suite",
                         "--samples", "2", "--no-capture"], env)
    assert empty.returncode == 2 and "the suite selected no benchmark" in empty.stderr, empty.stderr
    assert "it declares " in empty.stderr and "ran " not in empty.stdout and "Traceback" not in empty.stderr
    engine = make_engine(f"sqlite:///{tmp_path / 'home' / 'kernelwatch.db'}")
    with make_session_factory(engine)() as session:
        assert session.scalar(select(func.count(Run.id))) == 0
    engine.dispose()


def test_a_base_missing_from_a_shallow_clone_says_to_fetch_it(tmp_path: Path, suite_repo: Path) -> None:
    """A CI job's checkout (depth 1) holds no base: "names no commit there" sent the user looking for a typo."""
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{suite_repo}", str(shallow)], check=True,
                   capture_output=True)
    done = kernelwatch(["ci", "--repo", str(shallow), "--base", "HEAD~1", "--quick"], env_for(tmp_path, None))
    assert done.returncode == 2 and "this is a shallow clone" in done.stderr, done.stderr
    assert "fetch-depth: 0" in done.stderr and "Traceback" not in done.stderr
    full = kernelwatch(["ci", "--repo", str(suite_repo), "--base", "no-such-ref", "--quick"], env_for(tmp_path, None))
    assert full.returncode == 2 and "shallow" not in full.stderr, full.stderr
