"""`kernelwatch compare` (in this process: tests/cli_inprocess.py) on the embedded SQLite database: its output
formats, its filters, its exit codes under --fail-on, branch and tag names resolved in the repository's git,
and --url against a real `kernelwatch serve` (reads gated by tokens) printing what the database gives."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from service.integrations.compare_api import CompareClient
from service.settings import load_settings
from tests import builders
from tests.cli_inprocess import run_cli
from tests.gitrepo import git
from tests.integration.test_compare_cli import store_all, timings
from tests.processes import clean_env, start_web
from tests.processes import kernelwatch as kernelwatch_ok

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "service/contract/compare.schema.json").read_text())


@dataclass(frozen=True)
class Stored:
    env: dict[str, str]
    repo: Path
    base_sha: str
    head_sha: str


def compare(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(["compare", *args], env)  # in this process (tests/cli_inprocess.py says why)


def store(tmp_path: Path) -> Stored:
    """Two commits of a real git repository (tag v1 on the first, branch feature on the second) with three runs
    each stored under their real shas: softmax 20 % slower, matmul unchanged, a benchmark new in head, one broken
    in head, and a relative error that doubled."""
    sqlite_database = f"sqlite:///{tmp_path / 'kernelwatch.db'}"
    repo = tmp_path / "kernels"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "softmax: fused")
    git(repo, "tag", "-a", "v1", "-m", "release one")  # annotated: its ref is a tag object, not the commit
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "a.txt").write_text("two\n")
    git(repo, "commit", "-q", "-am", "softmax: blocked")
    git(repo, "checkout", "-q", "main")
    base_sha, head_sha = git(repo, "rev-parse", "v1^{commit}"), git(repo, "rev-parse", "feature")

    env = clean_env(tmp_path / "home", KERNELWATCH_DATABASE_URL=sqlite_database)
    repository = {"name": "kernels", "url": repo.as_uri(), "default_branch": "main"}
    softmax: dict[str, Any] = {"suite": "softmax", "name": "softmax_rows"}
    matmul: dict[str, Any] = {"suite": "matmul", "name": "mm", "params": {"m": 8}}
    error: dict[str, Any] = {"suite": "quantized", "name": "int8", "params": {"m": 8}, "metric": "rel_error",
                             "unit": "1"}
    base = builders.manifest(0, [
        builders.result(**softmax, samples=timings(1e-3, 1)),
        builders.result(**matmul, samples=timings(2e-3, 2)),
        builders.result(suite="norms", name="breaks", samples=timings(3e-4, 4)),
        builders.result(**error, samples=timings(1e-3, 5)),
    ], repository=repository, commit=builders.commit(0, sha=base_sha, parents=[]))
    head = builders.manifest(1, [
        builders.result(**softmax, samples=timings(1.2e-3, 21)),
        builders.result(**matmul, samples=timings(2e-3, 22)),
        builders.result(suite="new", name="fresh", samples=timings(7e-4, 23)),
        builders.result(suite="norms", name="breaks", status="failed", samples=[],
                        message="XlaRuntimeError: RESOURCE_EXHAUSTED | out of memory"),
        builders.result(**error, samples=timings(2e-3, 25)),
    ], repository=repository, commit=builders.commit(1, sha=head_sha, parents=[base_sha]))
    # A benchmark whose runs land far apart (as on a busy host): neither side can say where it is.
    for doc, level in ((base, 5e-4), (head, 5e-4)):
        doc["results"].append(builders.result(suite="jitter", name="wobbly", samples=timings(level, 6)))
    runs = [*builders.replicated(base), *builders.replicated(head)]
    for index, run in enumerate(runs):
        [wobbly] = [r for r in run["results"] if r["suite"] == "jitter"]
        wobbly["samples"] = [v * (0.6, 1.0, 1.5)[index % 3] for v in wobbly["samples"]]
    from service.store.db import upgrade

    upgrade(sqlite_database)
    store_all(env, runs)
    return Stored(env, repo, base_sha, head_sha)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    """:func:`store`'s, shared by the module's tests, which only read it (1.5-2 s to make: 40 s of set-up when each
    test made its own)."""
    return store(tmp_path_factory.mktemp("stored"))


@pytest.fixture
def stored_own(tmp_path: Path) -> Stored:
    """:func:`store`'s, for a test that adds to the repository."""
    return store(tmp_path)


@pytest.mark.parametrize(("args", "code"), [
    ([], 0),
    (["--fail-on", "regression"], 1),
    (["--fail-on-regression"], 1),
    (["--fail-on", "none"], 0),
    (["--fail-on", "regression", "--filter", "^(matmul|new)/"], 0),  # unchanged and new: nothing regressed
    (["--fail-on", "any", "--filter", "^(matmul|new)/"], 1),  # ...but something changed
    (["--fail-on", "any", "--filter", "^matmul/"], 0),
    (["--fail-on", "regression", "--filter", "^softmax/", "--threshold", "50%"], 0),  # +20 % is under the bar
    (["--fail-on", "regression", "--filter", "^softmax/", "--threshold", "0.05"], 1),
    (["--fail-on", "regression", "--filter", "^norms/"], 1),  # broken in head counts as a regression
    (["--fail-on", "regression", "--filter", "^nothing-of-that-name/"], 0),  # nothing listed: an empty table
])
def test_exit_status_follows_fail_on(stored: Stored, args: list[str], code: int) -> None:
    proc = compare([stored.base_sha[:10], stored.head_sha[:10], *args], stored.env)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.startswith("base: kernels@")
    # Exit 1 says why in one line on stderr (a CI log shows it); exit 0 says nothing there.
    assert (proc.stderr == "") if code == 0 else (proc.stderr.startswith("kernelwatch: failing: ")
                                                   and proc.stderr.count("\n") == 1), proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--threshold", "5"], "ambiguous"),
    (["--min-effect", "50"], "ambiguous"),  # once read as 5,000 %
    (["--fail-on", "sometimes"], "invalid choice"),
    (["--filter", "(unclosed"], "not a regular expression"),
    (["--threshold", "5%", "--min-effect", "0.05"], "not allowed with"),
    (["--repo", "kernels", "--base-is", "x"], "unrecognized arguments"),
])
def test_usage_errors_exit_2(stored: Stored, args: list[str], message: str) -> None:
    proc = compare([stored.base_sha, stored.head_sha, *args], stored.env)
    assert proc.returncode == 2 and proc.stdout == "" and message in proc.stderr, proc.stderr


def test_a_git_revision_without_repo_is_told_to_name_the_repository(stored: Stored) -> None:
    proc = compare(["HEAD~1", "HEAD"], stored.env)
    assert proc.returncode == 2 and "no run 'HEAD~1'" in proc.stderr and "needs --repo NAME" in proc.stderr, \
        proc.stderr


def test_formats(stored: Stored) -> None:
    refs = [stored.base_sha[:10], stored.head_sha[:10]]
    text = compare(refs, stored.env).stdout
    speed, _, signals = text.partition("== numerics and static signals ==")
    assert "softmax/softmax_rows" in speed and "rel_error" not in speed
    assert "rel_error (1)" in signals and "quantized/int8 m=8" in signals

    markdown = compare([*refs, "--format", "markdown", "--only-changed", "--sort", "delta"], stored.env).stdout
    assert markdown.startswith("### KernelWatch comparison")
    assert "| benchmark | base | head | delta | verdict |" in markdown and "| **geomean** |" in markdown
    assert "#### Numerics and static signals" in markdown and "matmul/mm" not in markdown  # unchanged: hidden
    assert "RESOURCE_EXHAUSTED \\| out of memory" in markdown
    speed_md = markdown.split("#### Numerics")[0]
    assert speed_md.index("new/fresh") > speed_md.index("softmax/softmax_rows")  # no ratio: after the changes

    rows = list(csv.DictReader(io.StringIO(compare([*refs, "--format", "csv"], stored.env).stdout)))
    assert {(r["suite"], r["metric"], r["verdict"]) for r in rows} == {
        ("softmax", "wall_time", "regression"), ("matmul", "wall_time", "unchanged"), ("new", "wall_time", "new"),
        ("norms", "wall_time", "failed"), ("quantized", "rel_error", "regression"),
        ("jitter", "wall_time", "inconclusive")}

    document = json.loads(compare([*refs, "--format", "json", "--filter", "softmax|quantized"], stored.env).stdout)
    jsonschema.validate(document, SCHEMA, cls=jsonschema.Draft202012Validator)
    assert document["summary"]["regression"] == 2 and sum(document["summary"].values()) == 2
    assert document["base"]["subject"] == "commit number 0"  # the manifest's subject, as stored


def test_branch_and_tag_names_resolve_in_the_repository(stored_own: Stored) -> None:
    stored = stored_own  # it commits to the repository
    proc = compare(["v1", "feature", "--repo", "kernels"], stored.env)
    assert proc.returncode == 0, proc.stderr
    assert f"base: kernels@{stored.base_sha[:12]}" in proc.stdout
    assert f"head: kernels@{stored.head_sha[:12]}" in proc.stdout
    document = json.loads(compare(["feature~1", "feature", "--repo", "kernels", "--format", "json"],
                                  stored.env).stdout)
    assert document["base"]["ref"] == "feature~1" and document["base"]["commit"] == stored.base_sha

    unknown = compare(["v1", "no-such-branch", "--repo", "kernels"], stored.env)
    assert unknown.returncode == 2 and "no run, commit or git ref matches 'no-such-branch'" in unknown.stderr
    without_repo = compare(["v1", "feature"], stored.env)
    assert without_repo.returncode == 2 and "no run 'v1'" in without_repo.stderr
    (stored.repo / "a.txt").write_text("three\n")
    git(stored.repo, "commit", "-q", "-am", "not measured")
    unmeasured = compare(["v1", "main", "--repo", "kernels"], stored.env)
    assert unmeasured.returncode == 2 and "which has no stored runs" in unmeasured.stderr


@pytest.fixture(scope="module")
def web(stored: Stored, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The service over the same database, with reads gated by tokens; yields its URL and a token."""
    env = stored.env | {"KERNELWATCH_READ_TOKEN_REQUIRED": "1"}
    token = kernelwatch_ok("token", "create", "reader", "--scope", "submit", env=env).strip()
    with start_web(env, tmp_path_factory.mktemp("logs")) as server:
        yield server.url, token


def test_url_prints_what_the_database_gives(stored: Stored, web: tuple[str, str]) -> None:
    url, token = web
    refs = [stored.base_sha[:10], stored.head_sha[:10]]
    for extra in (["--format", "text"], ["--format", "markdown", "--only-changed"], ["--format", "csv"],
                  ["--format", "json", "--sort", "delta", "--filter", "softmax"]):
        local = compare([*refs, *extra, "--fail-on", "regression"], stored.env)
        remote = compare([*refs, *extra, "--fail-on", "regression", "--url", url, "--token", token], stored.env)
        assert (remote.returncode, remote.stdout) == (local.returncode, local.stdout), remote.stderr

    # KERNELWATCH_TOKEN alone (no KERNELWATCH_URL: that pair configures uploads) is the token of --url's reads.
    by_env = compare([*refs, "--url", url], stored.env | {"KERNELWATCH_TOKEN": token})
    assert by_env.returncode == 0, by_env.stderr
    refused = compare([*refs, "--url", url], stored.env)
    assert refused.returncode == 2 and "401" in refused.stderr and "--token" in refused.stderr

    # Refs the service does not know are resolved with git at the repository URL the service stores.
    named = compare(["v1", "feature", "--repo", "kernels", "--url", url, "--token", token, "--format", "json"],
                    stored.env)
    assert named.returncode == 0, named.stderr
    document = json.loads(named.stdout)
    assert (document["base"]["ref"], document["head"]["commit"]) == ("v1", stored.head_sha)
    missing = compare(["v1", "nope", "--repo", "kernels", "--url", url, "--token", token], stored.env)
    assert missing.returncode == 2 and "404" in missing.stderr


def test_a_host_that_uploads_compares_on_the_service_and_says_its_own_store_is_not_it(
        stored: Stored, web: tuple[str, str], tmp_path: Path) -> None:
    """KERNELWATCH_URL and KERNELWATCH_TOKEN set, no database: this host's runs went to the service, so `compare`
    reads there (as `ci` does), and a command that reads this host's own (empty) store says so."""
    url, token = web
    refs = [stored.base_sha[:10], stored.head_sha[:10]]
    uploader = clean_env(tmp_path / "home", KERNELWATCH_URL=url, KERNELWATCH_TOKEN=token)
    assert "KERNELWATCH_DATABASE_URL" not in uploader
    local = compare([*refs, "--format", "json"], stored.env)
    remote = compare([*refs, "--format", "json"], uploader)
    assert remote.returncode == 0, remote.stderr
    assert json.loads(remote.stdout) == json.loads(local.stdout)
    assert f"reading from {url}" in remote.stderr

    listed = run_cli(["alerts", "list"], uploader)
    assert listed.returncode == 0 and f"the runs made here go to {url}" in listed.stderr
    # A run an upload could not deliver is kept (`run` says where) and `ingest` sends it to the service, once.
    from service.cli.run import _keep_unsent
    from service.settings import load_settings
    from tests import builders

    doc = builders.manifest(0, [builders.result()], repo="unsent-probe")
    [kept] = _keep_unsent(load_settings(uploader), [doc])
    assert kept == tmp_path / "home" / "unsent" / f"{doc['run_id']}.json"
    sent = run_cli(["ingest", str(kept)], uploader)
    assert sent.returncode == 0 and f"uploaded as run {doc['run_id']} to {url}" in sent.stdout, sent.stderr
    again = run_cli(["ingest", str(kept)], uploader)
    assert again.returncode == 0 and "already stored; nothing changed" in again.stdout, again.stderr

    # What would change the service's state is refused there: it acted on this host's own file, silently (a token
    # made so was refused by the service with 401; a triage said "no alert 1").
    for command in (["token", "create", "ci-bot", "--scope", "submit"], ["alerts", "triage", "1", "acknowledged"],
                    ["token", "list"], ["deliveries"]):
        done = run_cli(command, uploader)
        assert done.returncode == 2 and "acts on the service's database" in done.stderr, (command, done.stderr)
        assert done.stdout == "", (command, done.stdout)


def test_pages_are_joined_into_the_whole_comparison(stored: Stored, web: tuple[str, str]) -> None:
    url, token = web
    whole = CompareClient(url, token).compare(stored.base_sha, stored.head_sha)
    paged = CompareClient(url, token, page_limit=2).compare(stored.base_sha, stored.head_sha)
    assert len(whole["benchmarks"]) == 6 and paged == whole
    assert "page" not in whole


def test_every_face_shows_the_same_verdicts_the_undecided_one_included(stored: Stored, web: tuple[str, str]) -> None:
    """The CLI (text, JSON, a service's JSON), the API, the compare page and the PR comment of one comparison:
    one verdict per benchmark, everywhere, `inconclusive` too."""
    from service.app import create_app
    from service.report.compare_table import comparison_from_json, from_json, labels_from_json, runs_needed_text
    from service.report.pr_comment import CommentContext, format_comment

    url, token = web
    refs = [stored.base_sha, stored.head_sha]
    local = json.loads(compare([*refs, "--format", "json"], stored.env).stdout)
    verdicts = {(b["suite"], b["name"]): b["verdict"] for b in local["benchmarks"] if b["metric"] == "wall_time"}
    assert verdicts[("jitter", "wobbly")] == "inconclusive" and verdicts[("softmax", "softmax_rows")] == "regression"
    assert local["summary"]["inconclusive"] == 1
    wobbly = next(b for b in local["benchmarks"] if b["suite"] == "jitter")
    assert wobbly["reason"] and wobbly["ratio_ci_low"] < 1 < wobbly["ratio_ci_high"]
    # How many runs would decide it: one estimate, said the same way on every face.
    assert wobbly["runs_needed"] > max(wobbly["base"]["runs"], wobbly["head"]["runs"])
    needed = runs_needed_text(comparison_from_json(wobbly))
    assert needed is not None and "runs a side to decide" in needed

    remote = json.loads(compare([*refs, "--format", "json", "--url", url, "--token", token], stored.env).stdout)
    assert remote == local
    api = CompareClient(url, token).compare(stored.base_sha, stored.head_sha)
    assert sorted((b["name"], b["metric"], b["verdict"]) for b in api["benchmarks"]) == sorted(
        (b["name"], b["metric"], b["verdict"]) for b in local["benchmarks"])
    text = compare(refs, stored.env).stdout
    wobbly_line = next(line for line in text.splitlines() if line.startswith("jitter/wobbly"))
    assert re.search(r"\? ⁴$", wobbly_line) and "⁴ not significant, but the ratio's interval" in text
    # Its change is unknown, not nil: "?" in the delta too, never the legend's "~ unchanged".
    assert re.search(r"\s\? \(p[=<]\d\.\d{3} runs=", wobbly_line) and " ~ " not in wobbly_line, wobbly_line
    assert needed in wobbly_line

    app = create_app(load_settings(stored.env))
    page = app.test_client().get(f"/compare?base={stored.base_sha}&head={stored.head_sha}&limit=100")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    shown = {name.strip().split(" ")[0]: verdict for verdict, name in
             re.findall(r'<tr class="v-\w+" data-verdict="(\w+)">\s*<td>([^<]+)', html)}
    assert shown["jitter/wobbly"] == "inconclusive" and shown["softmax/softmax_rows"] == "regression"
    assert "more runs would decide" in html and needed in html

    report, notes = from_json(local)
    base, head = labels_from_json(local)
    comment = format_comment(report, CommentContext(base, head, notes=notes))
    line = next(row for row in comment.splitlines() if "jitter/wobbly" in row)
    assert "❔ inconclusive" in line and needed in line and "| inconclusive |" in comment
