"""`kernelwatch ci` as a CI job runs it: real git, real JAX children, the embedded SQLite database, a GitHub step
summary file. The planted change is deterministic: the head's softmax computes its exponentials 17 times over
(each pass depending on the last, so XLA can neither hoist nor share them), many times slower: processes of the
same code land up to 60 % apart on this machine, and four rounds must find it every time, not most times."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.gitrepo import git
from tests.processes import clean_env, start_web
from tests.processes import kernelwatch as kernelwatch_ok

SLOWER = ("    e = jnp.exp(x - row_max)\n"
          "    e = jax.lax.fori_loop(0, 16, lambda _, prev: jnp.exp(x - row_max + 0.0 * prev), e)\n")
# One benchmark point, five samples a run, four rounds (ci's default): the runs are the replicates.
SUITE = ["--suite", "softmax/softmax_rows", "--params", "rows=1024", "--samples", "5", "--warmup", "2",
         "--no-capture"]


def kernelwatch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A repository of the softmax benchmark alone (less to import), and a commit that makes it slower."""
    repo = tmp_path / "kernels"
    (repo / "kernels_under_test").mkdir(parents=True)
    for module in ("__init__.py", "softmax.py"):
        shutil.copy2(REPO_ROOT / "kernels_under_test" / module, repo / "kernels_under_test" / module)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "softmax: fused")
    path = repo / "kernels_under_test" / "softmax.py"
    text = path.read_text()
    assert text.count("    e = jnp.exp(x - row_max)\n") == 1, "the suite's softmax changed: update SLOWER"
    text = text.replace("    e = jnp.exp(x - row_max)\n", SLOWER)
    path.write_text(text.replace("import jax.numpy as jnp\n", "import jax\nimport jax.numpy as jnp\n", 1))
    git(repo, "commit", "-q", "-am", "softmax: recompute the exponentials")
    return repo


def env_for(tmp_path: Path, summary: Path) -> dict[str, str]:
    return clean_env(tmp_path / "home", GITHUB_STEP_SUMMARY=str(summary))  # the caller's summary file replaced


# timing: its verdict comes from real runs, so it runs alone, not beside the parallel tests (Makefile).
@pytest.mark.timing
def test_ci_reports_the_planted_regression_in_the_step_summary(tmp_path: Path, planted: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("## an earlier step\n")
    env = env_for(tmp_path, summary)
    proc = kernelwatch(["ci", "--repo", str(planted), "--base", "main~1", "--head", "main", *SUITE], env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("softmax/softmax_rows"))
    # The verdict (an "of roofline" column may follow it); p under alpha with 4 runs a side: its exact value
    # moves with this shared machine's load, the verdict does not.
    p_value = re.search(r"\(p[=<](\d\.\d{3}) runs=4\+4\)", row)  # p<0.001 under a thousandth
    assert re.search(r"\bregression\b", row) is not None and p_value is not None and float(p_value[1]) < 0.05, row
    written = summary.read_text()
    assert written.startswith("## an earlier step\n### KernelWatch comparison")  # appended, not replaced
    assert "| `softmax/softmax_rows cols=4096 rows=1024` |" in written and "🔴 regression" in written
    assert "| **geomean** |" in written and f"report appended to {summary}" in proc.stderr
    # Why the job fails, said in the log and at the top of the summary.
    assert "kernelwatch: failing: 1 regressed (--fail-on regression)" in proc.stderr, proc.stderr[-2000:]
    assert "**KernelWatch: failing** (1 regressed (--fail-on regression))" in written.split("\n| ", 1)[0]

    # The runs were stored: `compare` reads them by branch name in the repository they came from.
    again = kernelwatch(["compare", "main~1", "main", "--repo", "kernels", "--fail-on", "any"], env)
    assert again.returncode == 1 and "regression" in again.stdout, again.stderr
    quiet = kernelwatch(["compare", "main~1", "main", "--repo", "kernels", "--only-changed", "--format", "csv"],
                        env)
    assert quiet.returncode == 0 and quiet.stdout.count("\n") == 2  # the header and the regressed benchmark


# timing: its verdict comes from real runs, so it runs alone, not beside the parallel tests (Makefile).
@pytest.mark.timing
def test_ci_between_commits_with_the_same_kernels_gives_no_time_verdict(tmp_path: Path, planted: Path) -> None:
    """A/A, as a CI job meets it on every docs-only pull request: the same kernel code on both sides, four
    rounds each, twice over. No regression and no improvement may be called (undecided is honest), and the job
    passes. At --alpha 0.01 a false verdict has at most a 1 % chance a job by construction, so this test fails
    by bad luck about once in fifty; the rate at the default alpha is what bench/verdict_calibration.py
    measures over hundreds of draws."""
    git(planted, "checkout", "-q", "-b", "docs", "main~1")
    (planted / "README.md").write_text("How to run the suite.\n")
    git(planted, "add", "-A")
    git(planted, "commit", "-q", "-m", "README: how to run the suite")
    env = env_for(tmp_path, tmp_path / "summary.md")
    for _ in range(2):
        proc = kernelwatch(["ci", "--repo", str(planted), "--base", "main~1", "--head", "docs", *SUITE,
                            "--format", "json", "--alpha", "0.01"], env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        [row] = json.loads(proc.stdout)["benchmarks"]
        assert row["verdict"] in ("unchanged", "inconclusive"), row
        assert row["base"]["runs"] == 4 and row["head"]["runs"] == 4 and row["method"] == "welch"
        assert "kernelwatch: failing" not in proc.stderr
    assert "**KernelWatch: passing** (--fail-on regression)" in (tmp_path / "summary.md").read_text()


# timing: its verdict comes from real runs, so it runs alone, not beside the parallel tests (Makefile).
@pytest.mark.timing
def test_ci_measures_an_uncommitted_edit_against_its_commit(tmp_path: Path, planted: Path) -> None:
    """`ci --base HEAD --working-tree`: the edit, not yet committed, interleaved with its commit round by round, so
    that it gets a verdict (the working copy measured on its own was one session a side against the commit's:
    never decided on a host whose processes differ). Its runs are a working copy's, stored under HEAD's sha."""
    git(planted, "checkout", "-q", "main~1")
    slow = planted / "kernels_under_test" / "softmax.py"
    fast_text = slow.read_text()
    slow.write_text(git(planted, "show", "main:kernels_under_test/softmax.py") + "\n")  # main's slow version
    env = env_for(tmp_path, tmp_path / "summary.md")
    proc = kernelwatch(["ci", "--repo", str(planted), "--base", "HEAD", "--working-tree", *SUITE, "--format", "json"],
                       env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "one commit" not in proc.stderr  # no A/A warning: the head is the working copy
    document = json.loads(proc.stdout)
    [row] = document["benchmarks"]
    assert row["verdict"] == "regression" and row["base"]["runs"] == 4 and row["head"]["runs"] == 4, row
    assert document["base"]["commit"] == document["head"]["commit"] == git(planted, "rev-parse", "HEAD")
    # Each side says what it is: both lines read the commit alike.
    assert document["head"]["subject"].startswith("working copy (uncommitted edits) on ")
    assert not document["base"]["subject"].startswith("working copy")
    assert any("working copy" in note for note in document["notes"]), document["notes"]
    # One of its runs named alone is the working copy's too, not the commit's code.
    one = kernelwatch(["compare", document["base"]["commit"], document["head"]["runs"][0], "--format", "json"], env)
    assert one.returncode in (0, 1), one.stderr
    assert json.loads(one.stdout)["head"]["subject"].startswith("working copy (uncommitted edits) on ")
    assert slow.read_text() != fast_text and git(planted, "status", "--porcelain")  # the edit left as it was
    refused = kernelwatch(["ci", "--repo", str(planted), "--base", "HEAD", "--head", "main", "--working-tree"], env)
    assert refused.returncode == 2 and "no --head with it" in refused.stderr, refused.stderr


def test_ci_adds_rounds_while_a_benchmark_is_undecided(tmp_path: Path, planted: Path) -> None:
    """Adaptive rounds: one round a side and no stored spread cannot decide, so `--max-rounds 3` makes two more
    rounds of the undecided benchmark, and the verdict rests on three runs a side, each look at the data tested
    at half of --alpha (two looks)."""
    git(planted, "checkout", "-q", "-b", "docs", "main~1")
    (planted / "README.md").write_text("How to run the suite.\n")
    git(planted, "add", "-A")
    git(planted, "commit", "-q", "-m", "README: how to run the suite")
    env = env_for(tmp_path, tmp_path / "summary.md")
    proc = kernelwatch(["ci", "--repo", str(planted), "--base", "main~1", "--head", "docs", *SUITE,
                        "--rounds", "1", "--max-rounds", "3", "--format", "json", "--fail-on", "none"], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 benchmark(s) undecided after 1 rounds: 2 more round(s) of them" in proc.stderr, proc.stderr[-3000:]
    document = json.loads(proc.stdout)
    [row] = document["benchmarks"]
    assert row["base"]["runs"] == 3 and row["head"]["runs"] == 3 and row["method"] == "welch", row
    assert document["parameters"]["alpha"] == 0.025
    assert any(note.startswith("adaptive rounds: 1 to 3") for note in document["notes"]), document["notes"]
    assert len(document["base"]["runs"]) == 3  # the session's three runs of the commit, all compared
    # and how to compare them again (the ids were nowhere but the JSON)
    again = f"`kernelwatch compare {','.join(document['base']['runs'])} {','.join(document['head']['runs'])}`"
    assert again in proc.stderr, proc.stderr[-2000:]


def test_ci_input_errors_exit_2(tmp_path: Path, planted: Path) -> None:
    env = env_for(tmp_path, tmp_path / "summary.md")
    unknown = kernelwatch(["ci", "--repo", str(planted), "--base", "no-such-branch", *SUITE], env)
    assert unknown.returncode == 2 and "no-such-branch" in unknown.stderr and unknown.stdout == ""
    nothing = kernelwatch(["ci", "--repo", str(planted), "--base", "main~1", "--suite", "nope/*"], env)
    assert nothing.returncode == 2 and "selected no benchmark" in nothing.stderr, nothing.stderr
    assert "it declares " in nothing.stderr and "/" in nothing.stderr.split("it declares ", 1)[1], nothing.stderr
    # A GPU job whose JAX fell back to the CPU must not pass its gate on CPU numbers.
    wrong = kernelwatch(["ci", "--repo", str(planted), "--base", "main~1", "--hardware", "h200", *SUITE[:4],
                         "--samples", "1", "--no-capture"], env)
    assert wrong.returncode == 2 and "--hardware h200, but the suite ran on the cpu backend" in wrong.stderr
    fewer = kernelwatch(["ci", "--repo", str(planted), "--base", "main~1", "--rounds", "4", "--max-rounds", "2"], env)
    assert fewer.returncode == 2 and "--max-rounds 2 is fewer than --rounds 4" in fewer.stderr, fewer.stderr
    assert not (tmp_path / "summary.md").exists()


# timing: its verdict comes from real runs, so it runs alone, not beside the parallel tests (Makefile).
@pytest.mark.timing
def test_ci_uploads_to_the_service_and_compares_there(tmp_path: Path, planted: Path, sqlite_database: str) -> None:
    """With KERNELWATCH_URL and KERNELWATCH_TOKEN the job has no database of its own: its runs go to the service
    and the comparison is read back from it (by this job's run ids, so earlier runs of the commits stay out)."""
    service_env = clean_env(tmp_path / "service", KERNELWATCH_DATABASE_URL=sqlite_database)
    kernelwatch_ok("db", "upgrade", env=service_env)
    token = kernelwatch_ok("token", "create", "ci", "--scope", "submit", env=service_env).strip()
    summary = tmp_path / "summary.md"
    with start_web(service_env, tmp_path / "logs") as web:
        env = env_for(tmp_path, summary) | {"KERNELWATCH_URL": web.url, "KERNELWATCH_TOKEN": token}
        proc = kernelwatch(["ci", "--repo", str(planted), "--base", "main~1", *SUITE, "--format", "json"], env)
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert f"uploaded 8 run(s) to {web.url}/api/v1" in proc.stderr
        document = json.loads(proc.stdout)
        assert document["summary"]["regression"] == 1 and len(document["base"]["runs"]) == 4
        assert document["base"]["ref"] == ",".join(document["base"]["runs"])  # this job's runs, by their ids
        assert "🔴 regression" in summary.read_text()
    assert not (tmp_path / "home" / "kernelwatch.db").exists()  # nothing stored on the job's side
