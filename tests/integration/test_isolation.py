"""A kernel that raises, crashes its process, is killed or hangs is recorded as failed; the rest still runs."""

from __future__ import annotations

from pathlib import Path

from runners.local import RunRequest, run_at_commit, run_commits
from service.contract import parse_manifest
from tests.gitrepo import git

BAD_SUITE = '''
import os, signal, time
import jax.numpy as jnp
import numpy as np
from runners.suite import Case, benchmark, grid

def ok_case():
    x = np.ones(64, dtype=np.float32)
    return Case(fn=lambda v: v * 2, args=(x,), reference=lambda: x * 2)

@benchmark(suite="bad", params=grid(i=[0, 1]))
def a_fine(i):
    return ok_case()

@benchmark(suite="bad")
def b_raises():
    raise ValueError("this kernel does not build")

@benchmark(suite="bad")
def c_crashes():
    os.abort()  # the interpreter dies, as with a segfault in a custom call

@benchmark(suite="bad")
def d_killed():
    os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's OOM killer does

@benchmark(suite="bad", timeout_s=3)
def e_hangs():
    time.sleep(60)
    return ok_case()

@benchmark(suite="bad")
def f_fine_after():
    print("a kernel printing to stdout must not corrupt the protocol")
    return ok_case()
'''




def make_repo(root: Path, body: str) -> Path:
    (root / "kernels_under_test").mkdir(parents=True)
    (root / "kernels_under_test" / "__init__.py").write_text("")
    (root / "kernels_under_test" / "bad.py").write_text(body)
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.email=t@e", "-c", "user.name=T", "add", "-A")
    git(root, "-c", "user.email=t@e", "-c", "user.name=T", "commit", "-q", "-m", "suite")
    return root


def test_misbehaving_kernels_leave_a_partial_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", BAD_SUITE)
    [doc] = run_at_commit(RunRequest(repo=repo, rev="HEAD", samples=3, warmup=0), tmp_path / "cache")
    manifest = parse_manifest(doc)
    assert manifest.status == "partial"
    by_name = {(r.name, r.params_key()): r for r in manifest.results}
    assert by_name[("a_fine", '{"i":0}')].status == "ok" and by_name[("a_fine", '{"i":1}')].status == "ok"
    assert by_name[("f_fine_after", "{}")].status == "ok"
    assert "ValueError: this kernel does not build" in (by_name[("b_raises", "{}")].message or "")
    assert "killed by SIGABRT" in (by_name[("c_crashes", "{}")].message or "")
    assert "killed by SIGKILL (out of memory?)" in (by_name[("d_killed", "{}")].message or "")
    assert "exceeded its time limit" in (by_name[("e_hangs", "{}")].message or "")
    assert all(r.status == "failed" and not r.samples for k, r in by_name.items()
               if k[0] in {"b_raises", "c_crashes", "d_killed", "e_hangs"})


def test_two_commits_are_interleaved_benchmark_by_benchmark(tmp_path: Path) -> None:
    good = BAD_SUITE.split("@benchmark(suite=\"bad\")\ndef b_raises")[0]
    repo = make_repo(tmp_path / "repo", good)
    (repo / "kernels_under_test" / "bad.py").write_text(good.replace("v * 2", "v + v").replace("x * 2", "x + x"))
    git(repo, "-c", "user.email=t@e", "-c", "user.name=T", "commit", "-qam", "second")
    order: list[str] = []
    base, head = run_commits([RunRequest(repo=repo, rev="HEAD~1", samples=2, warmup=0),
                              RunRequest(repo=repo, rev="HEAD", samples=2, warmup=0)],
                             tmp_path / "cache", progress=lambda done, total, key: order.append(key))
    assert order == ["bad/a_fine[i=0] at HEAD~1", "bad/a_fine[i=0] at HEAD", "bad/a_fine[i=1] at HEAD",
                     "bad/a_fine[i=1] at HEAD~1"]  # AB, then BA
    assert base[0]["commit"]["sha"] != head[0]["commit"]["sha"]
    assert all(parse_manifest(m[0]).status == "complete" for m in (base, head))
