"""`kernelwatch compare BASE HEAD` as a user types it, on manifests stored through the real ingest, on SQLite and
on the real PostgreSQL."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.context import Context
from service.detect.compare import ONE_RUN
from service.settings import load_settings
from service.store.models import Environment
from tests import builders
from tests.cli_inprocess import run_cli
from tests.processes import clean_env


@dataclass(frozen=True)
class Stored:
    env: dict[str, str]
    base_sha: str
    head_sha: str
    other_env_sha: str
    base_runs: tuple[str, str]
    head_run: str
    fingerprints: tuple[str, ...]


def timings(level: float, seed: int, n: int = 10) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in level * np.exp(0.01 * rng.standard_normal(n))]


def kernelwatch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(["compare", *args], env)  # in this process (tests/cli_inprocess.py says why)


@pytest.fixture
def stored(tmp_path: Path, database_url: str, sessions: sessionmaker[Session]) -> Stored:
    env = clean_env(tmp_path / "home", KERNELWATCH_DATABASE_URL=database_url)
    softmax: dict[str, Any] = {"suite": "softmax", "name": "softmax_rows"}
    matmul: dict[str, Any] = {"suite": "matmul", "name": "mm", "params": {"m": 8}}
    # The base commit ran twice on one machine: two runs, the replicates its side counts; head ran three times.
    base = [builders.manifest(0, [
        builders.result(**softmax, samples=timings(1e-3, seed + 1)),
        builders.result(**matmul, samples=timings(2e-3, seed + 2)),
        builders.result(suite="old", name="gone", samples=timings(5e-4, seed + 3)),
        builders.result(suite="norms", name="breaks", samples=timings(3e-4, seed + 4)),
    ]) for seed in (0, 10)]
    head = builders.manifest(1, [
        builders.result(**softmax, samples=timings(1.2e-3, 21)),
        builders.result(**matmul, samples=timings(2e-3, 22)),
        builders.result(suite="new", name="fresh", samples=timings(7e-4, 23)),
        builders.result(suite="norms", name="breaks", status="failed", samples=[],
                        message="XlaRuntimeError: RESOURCE_EXHAUSTED: out of memory"),
    ])
    elsewhere = builders.manifest(2, [builders.result(**softmax, samples=timings(1e-3, 31))],
                                  environment=builders.environment(host_isa="aarch64+neon", cpu_model="Other CPU"))
    # Another repository whose commit shares the base commit's first eight hex digits.
    clash = builders.manifest(0, [builders.result()], repo="fork")
    clash["commit"]["sha"] = base[0]["commit"]["sha"][:8] + "f" * 32
    ctx = Context.create(load_settings(env))
    try:
        for doc in [*base, *builders.replicated(head), elsewhere, clash]:
            ctx.submit(doc)
    finally:
        ctx.close()
    with sessions() as s:
        fingerprints = tuple(s.scalars(select(Environment.fingerprint).order_by(Environment.id)))
    return Stored(env=env, base_sha=base[0]["commit"]["sha"], head_sha=head["commit"]["sha"],
                  other_env_sha=elsewhere["commit"]["sha"], base_runs=(base[0]["run_id"], base[1]["run_id"]),
                  head_run=head["run_id"], fingerprints=fingerprints)


def row(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(label))


def test_compare_commits_prints_a_benchstat_table(stored: Stored) -> None:
    proc = kernelwatch([stored.base_sha[:10], stored.head_sha, "--repo", "demo"], stored.env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"base: demo@{stored.base_sha[:12]}" in out and "(2 runs)" in out
    assert "wall_time (s)" in out and "base" in out and "delta" in out and "verdict" in out
    softmax = row(out, "softmax/softmax_rows")
    assert "runs=2+3" in softmax and re.search(r"\bregression\b", softmax) is not None and "+" in softmax
    assert "~ (p=" in row(out, "matmul/mm m=8")
    assert row(out, "old/gone").rstrip().endswith("missing")
    assert row(out, "new/fresh").rstrip().endswith("new")
    assert row(out, "norms/breaks").rstrip().endswith("failed")
    assert "failed in head: XlaRuntimeError: RESOURCE_EXHAUSTED" in out
    assert row(out, "geomean")

    failing = kernelwatch([stored.base_sha[:10], stored.head_sha, "--repo", "demo", "--fail-on-regression"],
                          stored.env)
    assert failing.returncode == 1 and failing.stdout == out


def test_compare_runs_as_json(stored: Stored) -> None:
    # Two commits (2 + 3 runs) with a 50 % bar: the 20 % slowdown is significant but under it.
    proc = kernelwatch([stored.base_sha, stored.head_sha, "--format", "json", "--min-effect", "0.5"], stored.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["format"] == "kernelwatch.compare" and doc["parameters"]["min_effect"] == 0.5
    by_name = {(b["suite"], b["name"]): b for b in doc["benchmarks"]}
    softmax = by_name[("softmax", "softmax_rows")]
    assert softmax["base"]["n"] == 20 and softmax["base"]["runs"] == 2 and softmax["head"]["runs"] == 3
    assert softmax["ratio"] == pytest.approx(1.2, rel=0.03) and softmax["method"] == "welch"
    assert softmax["verdict"] == "unchanged" and softmax["below_min_effect"]  # 20 % is under a 50 % bar
    assert softmax["p_value"] < 0.01 and softmax["ratio_ci_low"] < softmax["ratio"] < softmax["ratio_ci_high"]
    assert by_name[("norms", "breaks")]["head"]["message"].startswith("XlaRuntimeError")
    assert doc["summary"] == {"regression": 0, "improvement": 0, "unchanged": 2, "inconclusive": 0, "failed": 1,
                              "new": 1, "missing": 1}
    assert doc["geomeans"][0]["count"] == 2

    # One run against one: the commits' other runs vary, and one run cannot tell the host's slow runs from a
    # change: inconclusive, saying so, with the ratio and no test.
    proc = kernelwatch([stored.base_runs[1], stored.head_run, "--format", "json"], stored.env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["base"]["runs"] == [stored.base_runs[1]]
    softmax = {(b["suite"], b["name"]): b for b in doc["benchmarks"]}[("softmax", "softmax_rows")]
    assert softmax["base"]["runs"] == 1 and softmax["head"]["runs"] == 1 and softmax["base"]["n"] == 10
    assert softmax["verdict"] == "inconclusive" and softmax["method"] is None and softmax["p_value"] is None
    assert softmax["reason"] == ONE_RUN and softmax["ratio"] == pytest.approx(1.2, rel=0.05)


@pytest.mark.parametrize(("args", "message"), [
    (["deadbeef", "HEAD_SHA"], "no run or commit matches 'deadbeef'"),
    (["abc", "HEAD_SHA"], "at least 4 hex digits"),
    (["HEAD", "HEAD_SHA"], "no run 'HEAD'"),
    (["BASE_PREFIX", "HEAD_SHA"], "is ambiguous"),
    (["BASE_SHA", "HEAD_SHA", "--repo", "nope"], "no repository named 'nope'"),
    (["BASE_SHA", "HEAD_SHA", "--alpha", "2"], "alpha"),
    (["BASE_SHA", "HEAD_SHA", "--url", "http://user:hunter2@127.0.0.1:9"], "holds credentials"),
])
def test_bad_references_are_one_line_and_exit_2(stored: Stored, args: list[str], message: str) -> None:
    subst = {"HEAD_SHA": stored.head_sha, "BASE_SHA": stored.base_sha, "BASE_PREFIX": stored.base_sha[:8]}
    proc = kernelwatch([subst.get(a, a) for a in args], stored.env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr
    assert "hunter2" not in proc.stderr


def test_the_ambiguous_prefix_resolves_within_a_repository(stored: Stored) -> None:
    proc = kernelwatch([stored.base_sha[:8], stored.head_sha[:8], "--repo", "demo"], stored.env)
    assert proc.returncode == 0, proc.stderr


def test_a_run_is_named_by_a_prefix_of_its_id(stored: Stored) -> None:
    """Run ids are hex, printed whole by `run`, and shortened like shas: a unique prefix is the run."""
    proc = kernelwatch([stored.base_runs[0][:10], stored.head_run[:10], "--format", "json"], stored.env)
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["base"]["runs"] == [stored.base_runs[0]] and document["head"]["runs"] == [stored.head_run]
    missing = kernelwatch(["0" * 10, stored.head_sha], stored.env)
    assert missing.returncode == 2 and "no run or commit matches '0000000000'" in missing.stderr, missing.stderr


def test_one_commit_in_two_repositories_asks_for_the_repository(stored: Stored) -> None:
    """The same commit filed under two repositories (a clone run under its own folder name): more of the sha cannot
    tell them apart, so the message says --repo."""
    twin = builders.manifest(1, [builders.result(samples=timings(1e-3, 41))], repo="clone")
    twin["commit"]["sha"] = stored.head_sha
    ctx = Context.create(load_settings(stored.env))
    try:
        ctx.submit(twin)
    finally:
        ctx.close()
    proc = kernelwatch([stored.base_sha, stored.head_sha[:10]], stored.env)
    assert proc.returncode == 2 and "give --repo NAME" in proc.stderr and "give more of the sha" not in proc.stderr
    assert f"is commit {stored.head_sha[:12]} of several repositories (clone, demo)" in proc.stderr, proc.stderr


def test_different_environments_are_not_compared(stored: Stored) -> None:
    proc = kernelwatch([stored.base_sha, stored.other_env_sha], stored.env)
    assert proc.returncode == 2 and "different environments" in proc.stderr
    base_fp, other_fp = stored.fingerprints[0], stored.fingerprints[1]
    assert base_fp[:10] in proc.stderr and other_fp[:10] in proc.stderr
    # and what differs, not the fingerprints alone (a pull request pinning another JAX read as two hashes)
    assert "what differs: host ISA x86_64+avx2 → aarch64+neon, CPU Test CPU → Other CPU" in proc.stderr, proc.stderr


def test_commits_of_two_repositories_are_compared_with_a_note(stored: Stored) -> None:
    fork_sha = stored.base_sha[:8] + "f" * 32
    proc = kernelwatch([fork_sha, stored.head_sha, "--format", "json", "--fail-on", "none"], stored.env)
    assert proc.returncode == 0, proc.stderr
    [note] = [n for n in json.loads(proc.stdout)["notes"] if "two repositories" in n]
    assert "(fork and demo)" in note
    same = kernelwatch([stored.base_sha, stored.head_sha, "--format", "json", "--fail-on", "none"], stored.env)
    assert not [n for n in json.loads(same.stdout)["notes"] if "two repositories" in n]


def store_all(env: dict[str, str], docs: list[dict[str, Any]]) -> None:
    """The manifests stored through the real ingest of the store ``env`` configures."""
    ctx = Context.create(load_settings(env))
    try:
        for doc in docs:
            ctx.submit(doc)
    finally:
        ctx.close()


def test_a_benchmark_failing_in_some_runs_of_a_side_is_said_so(tmp_path: Path, database_url: str,
                                                             sessions: sessionmaker[Session]) -> None:
    """It was compared on the runs that worked, the header counting every run and nothing saying the rest failed:
    a kernel crashing one run in two read as measured."""
    env = clean_env(tmp_path / "home", KERNELWATCH_DATABASE_URL=database_url)
    flaky: dict[str, Any] = {"suite": "flaky", "name": "sometimes"}
    base = [builders.manifest(0, [builders.result(**flaky, samples=timings(1e-3, seed))], repo="flaky")
            for seed in (1, 2)]
    head = [builders.manifest(1, [builders.result(**flaky, samples=timings(1e-3, 3))], repo="flaky")] + [
        builders.manifest(1, [builders.result(**flaky, status="failed", samples=[],
                                              message="RuntimeError: sometimes it breaks\nmore lines")], repo="flaky")
        for _ in range(2)]
    store_all(env, [*base, *head])
    proc = kernelwatch([base[0]["commit"]["sha"], head[0]["commit"]["sha"], "--format", "json"], env)
    assert proc.returncode == 0, proc.stderr
    notes = json.loads(proc.stdout)["notes"]
    assert ("flaky/sometimes cols=4096 rows=256: failed in 2 of 3 head runs (RuntimeError: sometimes it breaks); "
            "compared on the 1 that worked") in notes, notes
    assert not [n for n in notes if "base runs" in n], notes
    text = kernelwatch([base[0]["commit"]["sha"], head[0]["commit"]["sha"]], env)
    assert "failed in 2 of 3 head runs" in text.stdout, text.stdout

    # The same in an interleaved session both sides share, beside a base run made apart (so the comparison keeps
    # the session's runs alone): the session's failures are the comparison's, the one made apart is not.
    def run(position: int, index: int, failed: bool = False, session: str | None = "session0001") -> dict[str, Any]:
        result = (builders.result(**flaky, status="failed", samples=[], message="RuntimeError: broke")
                  if failed else builders.result(**flaky, samples=timings(1e-3, 10 * position + index)))
        return builders.manifest(position, [result], repo="flaky2",
                                 **({"round": {"session": session, "index": index}} if session else {}))
    apart = [run(0, 0, session=None), run(1, 0, failed=True, session=None)]
    shared = [run(0, i) for i in range(4)] + [run(1, 0), run(1, 1), run(1, 2, failed=True), run(1, 3, failed=True)]
    store_all(env, [*apart, *shared])
    narrowed = json.loads(kernelwatch([shared[0]["commit"]["sha"], shared[4]["commit"]["sha"], "--format", "json"],
                                      env).stdout)["notes"]
    assert any("runs interleaved in the sessions both sides share are compared" in n for n in narrowed), narrowed
    assert any("failed in 2 of 4 head runs (RuntimeError: broke); compared on the 2 that worked" in n
               for n in narrowed), narrowed


def test_a_side_compared_with_itself_is_said_so(stored: Stored) -> None:
    same = kernelwatch([stored.head_sha, stored.head_sha, "--format", "json"], stored.env)
    assert same.returncode == 0, same.stderr
    assert any("base and head are the same runs" in n for n in json.loads(same.stdout)["notes"])
    apart = kernelwatch([stored.base_sha, stored.head_sha, "--format", "json", "--fail-on", "none"], stored.env)
    assert not any("same runs" in n for n in json.loads(apart.stdout)["notes"])
