"""`kernelwatch demo`: a scratch repository, real commits, real runs, a real planted regression, detected.

The repository holds a copy of the default suite. Most commits are ordinary edits; one rewrites softmax with
a streaming (online) normaliser over column blocks, the way flash attention does it. That is a real change a
kernel engineer might make, and on a CPU it is several times slower: a sequential scan over blocks with a
second pass over the input, where XLA had fused the plain version into few passes.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from rich.progress import Progress

import kernels_under_test
from runners.local import RunRequest, round_order, run_commits
from service.context import Context
from service.pipeline.jobs import detect
from service.store.queries import FindingView, all_findings

MARKER = ".kernelwatch-demo"
DEMO_REPOSITORY = "kernels-demo"  # its folder, and the name its runs are stored under (demo_repository_name)
DEMO_MODULES = ("__init__.py", "matmul.py", "softmax.py")
# The benchmarks the demo times: the ones its edits touch, few enough to run ten commits three times in minutes.
DEMO_SUITE = "matmul/matmul_dense,softmax/softmax_rows"
AUTHORS = ["Ada Park <ada@example.com>", "Ben Ito <ben@example.com>", "Chen Wu <chen@example.com>"]


@dataclass(frozen=True)
class Edit:
    subject: str
    path: str
    old: str | None  # None: append ``new`` to the file (created if missing)
    new: str
    planted: bool = False


_FUSED_SOFTMAX = '''    # Subtracting the row max keeps exp() in range;
    # XLA fuses max, exp, sum and divide into few passes over the row.
    row_max = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x - row_max)
    return e / jnp.sum(e, axis=-1, keepdims=True)
'''

_STREAMING_SOFTMAX = '''    # Streaming normaliser over column blocks, as flash attention does it:
    # one running max and one running sum per row.
    rows, cols = x.shape
    blocks = jnp.swapaxes(x.reshape(rows, cols // BLOCK, BLOCK), 0, 1)

    def step(carry, block):
        running_max, running_sum = carry
        new_max = jnp.maximum(running_max, jnp.max(block, axis=-1))
        rescaled = running_sum * jnp.exp(running_max - new_max)
        block_sum = jnp.sum(jnp.exp(block - new_max[:, None]), axis=-1)
        return (new_max, rescaled + block_sum), None

    init = (jnp.full((rows,), -jnp.inf, x.dtype), jnp.zeros((rows,), x.dtype))
    (row_max, row_sum), _ = lax.scan(step, init, blocks)
    return jnp.exp(x - row_max[:, None]) / row_sum[:, None]
'''

EDITS: list[Edit] = [
    Edit("matmul: say why the tolerance grows with k", "kernels_under_test/matmul.py",
         "def matmul(a: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:\n",
         "def matmul(a: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:\n"
         "    # Accumulate in float32 whatever the input dtype, as the MXU does.\n"),
    Edit("README: how to run the suite", "README.md", None,
         "\nRun it with `kernelwatch run --repo . --commit HEAD`.\n"),
    Edit("softmax: larger input scale in the benchmark", "kernels_under_test/softmax.py",
         "* 4.0\n", "* 4.0  # logits of a trained model span a few units\n"),
    Edit("matmul: document the FLOP model", "kernels_under_test/matmul.py",
         "        flops=2.0 * m * n * k,\n",
         "        flops=2.0 * m * n * k,  # one multiply and one add per term\n"),
    Edit("softmax: streaming normaliser over column blocks, as in flash attention",
         "kernels_under_test/softmax.py", _FUSED_SOFTMAX, _STREAMING_SOFTMAX, planted=True),
    Edit("README: benchmark owners", "README.md", None, "\nOwners: kernels team.\n"),
    Edit("matmul: note the decode shapes to add", "kernels_under_test/matmul.py",
         '"""Dense matrix multiplication',
         '"""Dense matrix multiplication (decode-like skinny shapes come next)'),
    Edit("softmax: explain the block size", "kernels_under_test/softmax.py",
         "BLOCK = 128\n", "BLOCK = 128  # columns per step of the streaming normaliser\n"),
    Edit("add .gitattributes", ".gitattributes", None, "*.py text eol=lf\n"),
]


def planted_subject() -> str:
    return next(e.subject for e in EDITS if e.planted)


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _commit(repo: Path, subject: str, index: int) -> str:
    name, email = AUTHORS[index % len(AUTHORS)].rstrip(">").split(" <")
    # Fixed dates and authors: the same demo content always gives the same shas.
    when = f"2026-01-{index + 1:02d}T10:00:00+00:00"
    env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": when,
           "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": when,
           "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo)}
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--no-verify", "-m", subject, env=env)
    return _git(repo, "rev-parse", "HEAD")


def _apply(repo: Path, edit: Edit) -> None:
    path = repo / edit.path
    if edit.old is None:
        with path.open("a") as handle:
            handle.write(edit.new)
        return
    text = path.read_text()
    if text.count(edit.old) != 1:
        raise RuntimeError(f"demo edit {edit.subject!r} does not apply to {edit.path}: the suite has changed")
    path.write_text(text.replace(edit.old, edit.new))


def _prepare_softmax_for_streaming(repo: Path) -> None:
    """The planted commit needs lax and a block size; they arrive with it, as a real change would add them."""
    path = repo / "kernels_under_test/softmax.py"
    text = path.read_text()
    text = text.replace("import jax.numpy as jnp\n", "import jax.numpy as jnp\nfrom jax import lax\n", 1)
    text = text.replace("\n\ndef softmax(", "\n\nBLOCK = 128\n\n\ndef softmax(", 1)
    path.write_text(text)


def create_demo_repository(workdir: Path) -> tuple[Path, list[tuple[str, str, bool]]]:
    """Build the scratch repository; returns it and (sha, subject, planted) for every commit, oldest first."""
    if workdir.exists():
        if any(workdir.iterdir()) and not (workdir / MARKER).exists():
            raise FileExistsError(f"{workdir} is not empty and is not a KernelWatch demo directory")
        shutil.rmtree(workdir)
    repo = workdir / DEMO_REPOSITORY
    repo.mkdir(parents=True)
    (workdir / MARKER).write_text("scratch space of `kernelwatch demo`; deleted by the next demo\n")
    _git(repo, "init", "-q", "-b", "main")
    source = Path(kernels_under_test.__file__).parent
    # The demo's suite is the two families its edits touch: small enough to run at ten commits in minutes.
    (repo / "kernels_under_test").mkdir()
    for module in DEMO_MODULES:
        shutil.copy2(source / module, repo / "kernels_under_test" / module)
    (repo / "README.md").write_text("# kernels-demo\n\nA copy of the KernelWatch default suite.\n")
    commits = [(_commit(repo, "Add the kernel suite: matmul and softmax", 0),
                "Add the kernel suite: matmul and softmax", False)]
    for index, edit in enumerate(EDITS, start=1):
        if edit.planted:
            _prepare_softmax_for_streaming(repo)
        _apply(repo, edit)
        commits.append((_commit(repo, edit.subject, index), edit.subject, edit.planted))
    return repo, commits


@dataclass(frozen=True)
class DemoOutcome:
    repository: Path
    commits: list[tuple[str, str, bool]]
    regressions: list[FindingView]
    code_changes: dict[str, list[FindingView]] = field(default_factory=dict)  # static findings by commit

    @property
    def planted_sha(self) -> str:
        return next(sha for sha, _, planted in self.commits if planted)

    def summary_lines(self) -> list[str]:
        lines = [f"Ran the suite at {len(self.commits)} commits of {self.repository}."]
        if not self.regressions:
            lines.append("No regression detected.")
            return lines
        by_commit: dict[str, list[FindingView]] = {}
        for finding in self.regressions:
            by_commit.setdefault(finding.commit_sha, []).append(finding)
        for sha, findings in by_commit.items():
            lines.append(f"Regression at commit {sha[:10]} \"{findings[0].commit_subject}\":")
            for f in findings:
                lines.append(f"  {f.series_label} {f.metric}: {f.magnitude:+.1%} "
                             f"({f.value_before * 1e3:.3g} ms -> {f.value_after * 1e3:.3g} ms, "
                             f"{f.confidence:.1f}x its noise, p={f.p_value or 0:.1g})")
            for f in self.code_changes.get(sha, []):
                lines.append(f"  code of {f.series_label}: {f.magnitude:+.1%} instructions "
                             f"({f.value_before:.0f} -> {f.value_after:.0f})")
        planted_found = self.planted_sha in by_commit
        lines.append(f"The planted commit {self.planted_sha[:10]} was "
                     f"{'flagged' if planted_found else 'NOT flagged'}.")
        return lines


def demo_repository_name(ctx: Context, root: str) -> str:
    """The name the demo's runs are stored under: its folder's, unless the store holds another demo history under
    it. The demo's commits have fixed dates, so a demo made again is the same history, but its first commit copies
    this version's suite: after an upgrade that changed the suite, the new history would be refused as another
    project under the old one's name (service/pipeline/ingest.py), so it gets a name of its own instead."""
    from service.pipeline.ingest import another_project
    from service.store.commits import repository_named

    with ctx.sessions() as session:
        stored = repository_named(session, DEMO_REPOSITORY)
        roots = list(stored.first_commits) if stored is not None else []
    return f"{DEMO_REPOSITORY}-{root[:8]}" if another_project(roots, [root]) else DEMO_REPOSITORY


def run_demo(ctx: Context, workdir: Path, samples: int, rounds: int = 3,
             progress: Progress | None = None) -> DemoOutcome:
    """Create the repository, run the suite at every commit, store and detect; the dashboard reads the result.

    Each commit is run ``rounds`` times, in separate processes and interleaved across commits (round 1 of every
    commit, then round 2...), so that a slow minute of a shared machine lands on every commit a little rather
    than on a few consecutive commits, where it would look like a step.
    """
    repo, commits = create_demo_repository(workdir)
    name = demo_repository_name(ctx, commits[0][0])
    series_ids: set[int] = set()
    # Every run is a round of one session: a comparison of two commits then knows which of their runs were made
    # in the same minutes (a confirmation's extra rounds of a commit and its parent were not, for the commit
    # after it: service/detect/run_stats.co_measured).
    round_session = uuid.uuid4().hex
    total = len(commits) * rounds
    task = progress.add_task("runs", total=total) if progress else None
    for round_index in range(rounds):
        # A round's commits start in an order of its own, as `run`'s do (runners/local.py round_order): in one
        # fixed order the first and last commits were at an end of every round, where a host's settling shows.
        for started, index in enumerate(round_order(len(commits), round_index, round_session), start=1):
            sha, subject, _ = commits[index]
            if progress is not None and task is not None:
                # The count of the round's runs, not the commit's place in history: in its shuffled order the
                # round's last run read "commit 3/10" beside a bar at 30/30.
                progress.update(task, description=f"round {round_index + 1}/{rounds} · run {started}/{len(commits)}"
                                                  f" of the round: {sha[:8]} {subject[:40]}")
            # The first round captures (HLO, traces, object code: what the drill-down shows); later rounds only
            # time, which is what they are for, without the profiler's overhead on each run.
            request = RunRequest(repo=repo, rev=sha, samples=samples, suite=DEMO_SUITE, branch="main",
                                 trigger="push", repository_name=name,
                                 capture_dir=ctx.settings.artifacts_dir if round_index == 0 else None)
            [manifests] = run_commits([request], ctx.settings.worktree_dir, run_ids=[uuid.uuid4().hex],
                                      first_round=round_index, session=round_session)
            for manifest in manifests:
                series_ids.update(ctx.submit(manifest).series_ids)
            if progress is not None and task is not None:
                progress.advance(task)
    # Detection already ran on write; running it once more here is idempotent and makes the summary complete
    # even when the configured queue hands detection to remote workers. It goes through the follow-up as every
    # detection does: a change this last pass finds again after its confirmation was cancelled (the change point
    # moved while later rounds landed) is confirmed now (in-process: before the summary), not left pending.
    detect(ctx.jobs, ctx.queue, sorted(series_ids))
    shas = {sha for sha, _, _ in commits}
    with ctx.sessions() as session:
        findings = [f for f in all_findings(session) if f.commit_sha in shas]
    code_changes: dict[str, list[FindingView]] = {}
    for f in findings:
        if f.kind == "static":
            code_changes.setdefault(f.commit_sha, []).append(f)
    return DemoOutcome(repository=repo, commits=commits, regressions=[f for f in findings if f.flags_commit],
                       code_changes=code_changes)
