"""Bisection and confirmation with real runs: a planted slowdown inside a range of commits that were never
measured is isolated by measuring midpoints, the finding moves to it, and re-running base and head interleaved
confirms it. Embedded form (SQLite, in-process queue, local CPU runner): the code paths a worker runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sqlalchemy import select

from runners.local import RunRequest, run_commits
from service.context import Context
from service.settings import load_settings
from service.store.db import upgrade
from service.store.models import BisectJob, Commit, Finding, Result, Run
from service.store.queries import all_findings
from tests.gitrepo import commit_all, suite_repo

# A kernel whose work is REPEAT chained matmuls: the planted commit makes it 8x, far beyond what a busy shared
# machine does to a run (up to ~2.5x here), so the test checks the bisection, not the weather.
KERNEL = '''
import jax
import jax.numpy as jnp
import numpy as np

from runners.suite import Case, benchmark

REPEAT = 1


@jax.jit
def work(x):
    return jax.lax.fori_loop(0, REPEAT * 8, lambda i, v: jnp.tanh(v @ x), x)


@benchmark(suite="planted", params=[{"n": 128}])
def chained(n: int) -> Case:
    x = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32) / n
    return Case(fn=work, args=(x,))
'''
PLANTED = 5




def make_repository(root: Path) -> tuple[Path, list[str]]:
    """Ten commits on main; the one at index PLANTED multiplies the kernel's work by eight."""
    repo = root / "planted"
    module = suite_repo(repo, KERNEL, module="work")
    shas = []
    for index in range(10):
        if index == PLANTED:
            module.write_text(KERNEL.replace("REPEAT = 1", "REPEAT = 8"))
        (repo / "NOTES").write_text(f"change {index}\n")
        shas.append(commit_all(repo, f"change {index}" + (" (planted)" if index == PLANTED else "")))
    return repo, shas


def test_bisection_isolates_the_planted_commit_and_confirmation_agrees(tmp_path: Path) -> None:
    repo, shas = make_repository(tmp_path)
    settings = dataclasses.replace(load_settings({"KERNELWATCH_HOME": str(tmp_path / "home")}),
                                   follow_up=("bisect", "confirm"))
    ctx = Context.create(settings)  # creates the home
    upgrade(settings.effective_database_url)
    try:
        # Measure three commits before the planted one and three after it, interleaved; 3 to 6 never are.
        measured_first = (0, 1, 2, 7, 8, 9)
        requests = [RunRequest(repo=repo, rev=shas[i], samples=10, branch="main", capture_dir=None)
                    for i in measured_first]
        for manifests in run_commits(requests, settings.worktree_dir):
            for manifest in manifests:
                ctx.submit(manifest)  # detection and every follow-up run happen inside this call

        with ctx.sessions() as s:
            history = [(shas.index(sha), trigger, status, median) for sha, trigger, status, median in s.execute(
                select(Commit.sha, Run.trigger, Result.status, Result.median).join(Run, Run.commit_id == Commit.id)
                .join(Result, Result.run_id == Run.id).order_by(Run.id))]
            jobs = {j.purpose: j for j in s.scalars(select(BisectJob))}
            findings = s.scalars(select(Finding).where(Finding.kind == "time")).all()
            culprits = {s.get(Commit, f.commit_id).sha for f in findings}  # type: ignore[union-attr]
        evidence = (history, {p: j.message for p, j in jobs.items()})

        assert set(jobs) == {"bisect", "confirm"}, evidence
        bisect, confirm = jobs["bisect"], jobs["confirm"]
        assert bisect.state == "done" and bisect.culprit_sha == shas[PLANTED], evidence
        # Midpoints only: commit 4 (old level), then 5 (new): two runs; 3 and 6 are never needed.
        assert bisect.runs_requested == [shas[4], shas[5]], evidence
        assert {i for i, *_ in history} == {0, 1, 2, 4, 5, 7, 8, 9}
        assert culprits == {shas[PLANTED]}, evidence
        (finding,) = findings
        assert s.get(Commit, finding.previous_commit_id).sha == shas[4]  # type: ignore[union-attr]
        assert finding.direction == "regression" and finding.magnitude > 2
        assert confirm.state == "done" and confirm.culprit_sha == shas[PLANTED], evidence
        assert confirm.message is not None and confirm.message.startswith("confirmed"), evidence
        with ctx.sessions() as s:
            (view,) = [f for f in all_findings(s) if f.kind == "time"]
        assert view.confirmation == "confirmed" and view.flags_commit and view.confidence_label == "confirmed"
        triggers = [t for _, t, *_ in history]
        assert triggers.count("bisect") == 2 and triggers.count("confirm") >= 2
    finally:
        ctx.close()
