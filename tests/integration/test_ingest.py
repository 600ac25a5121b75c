"""Ingest on the real databases: idempotent, atomic, refusing bad input, detecting on write."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import AnotherProject, Conflict, InvalidInput
from runners.artifacts import ArtifactStore
from service.contract import ManifestError, parse_manifest
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.ingest import ingest_manifest
from service.pipeline.jobs import JobEnv
from service.pipeline.queue import InProcessQueue
from service.pipeline.submit import submit_manifest
from service.store.db import unit_of_work
from service.store.models import Base, Benchmark, Commit, Finding, Repository, Result, Run, Series
from service.store.queries import recent_commits, series_view
from tests import builders


def counts(sessions: sessionmaker[Session]) -> dict[str, int]:
    with sessions() as s:
        return {t.name: s.scalar(select(func.count()).select_from(t)) or 0 for t in Base.metadata.sorted_tables}


def queue(sessions: sessionmaker[Session], artifacts: ArtifactStore | None = None) -> InProcessQueue:
    return InProcessQueue(JobEnv(sessions, EDivisiveDetector(), artifacts or ArtifactStore(Path(tempfile.mkdtemp()))))


def test_a_manifest_is_stored_with_every_sample(sessions: sessionmaker[Session]) -> None:
    doc = builders.manifest(results=[builders.result(samples=[3e-3, 1e-3, 2e-3]),
                                     builders.result(suite="matmul", name="mm", params={"m": 8})])
    outcome = submit_manifest(sessions, queue(sessions), doc)
    assert outcome.created and len(outcome.series_ids) == 2
    with sessions() as s:
        r = s.scalars(select(Result).join(Series).join(Benchmark).where(Benchmark.suite == "softmax")).one()
        assert r.samples == [3e-3, 1e-3, 2e-3] and r.median == pytest.approx(2e-3) and r.sample_count == 3
        run = s.get(Run, outcome.run_id)
        assert run is not None and run.branch == "main" and run.status == "complete"
        commit = s.get(Commit, run.commit_id)
        assert commit is not None and commit.sha == doc["commit"]["sha"] and commit.position == 0


def test_submitting_the_same_run_twice_stores_it_once(sessions: sessionmaker[Session]) -> None:
    doc = builders.manifest()
    first = submit_manifest(sessions, queue(sessions), doc)
    before = counts(sessions)
    second = submit_manifest(sessions, queue(sessions), copy.deepcopy(doc))
    assert (second.run_id, second.created) == (first.run_id, False)
    assert counts(sessions) == before


def test_a_working_copys_run_is_an_environment_of_its_own(sessions: sessionmaker[Session]) -> None:
    """`run --working-tree` stores under HEAD's sha: its results must not join the commit's series (a fix tried in
    the working copy once made the commit's runs read 10 ms among 33 ms ones, and its stored spread 100x), while
    two runs of one working copy (its rounds) share theirs."""
    clean = builders.manifest()
    edited = [builders.manifest(environment=builders.environment(working_tree=digest))
              for digest in ("a" * 64, "a" * 64, "b" * 64)]
    for doc in (clean, *edited):
        doc["commit"] = clean["commit"]
    outcomes = [submit_manifest(sessions, queue(sessions), doc) for doc in (clean, *edited)]
    with sessions() as s:
        runs = [s.get(Run, o.run_id) for o in outcomes]
        assert len({r.commit_id for r in runs if r is not None}) == 1
        environments = [r.environment_id for r in runs if r is not None]
    assert environments[1] == environments[2] and len({environments[0], environments[1], environments[3]}) == 3
    assert outcomes[1].series_ids == outcomes[2].series_ids and not set(outcomes[0].series_ids) & set(
        outcomes[1].series_ids)
    with pytest.raises(ManifestError, match="working_tree"):
        parse_manifest(builders.manifest(environment=builders.environment(working_tree="HEAD; rm -rf /")))


def test_same_run_id_with_other_content_is_a_conflict(sessions: sessionmaker[Session]) -> None:
    doc = builders.manifest()
    submit_manifest(sessions, queue(sessions), doc)
    before = counts(sessions)
    changed = copy.deepcopy(doc)
    changed["results"][0]["samples"] = [9.0]
    with pytest.raises(Conflict, match="different content"):
        submit_manifest(sessions, queue(sessions), changed)
    assert counts(sessions) == before


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(format_version=2),
    lambda d: d["commit"].pop("sha"),
    lambda d: d["results"][0].update(samples=[1e-3, -5e-4]),
    lambda d: d.update(branch="--upload-pack=touch /tmp/x"),  # git would read an option
    lambda d: d["repository"].update(default_branch="-x"),
])
def test_bad_manifests_store_nothing(sessions: sessionmaker[Session], mutate) -> None:  # type: ignore[no-untyped-def]
    doc = builders.manifest()
    mutate(doc)
    with pytest.raises(ManifestError):
        submit_manifest(sessions, queue(sessions), doc)
    assert all(n == 0 for n in counts(sessions).values())


@pytest.mark.parametrize("url", ["ext::sh -c touch% /tmp/x", "fd::3", "--upload-pack=x", "http://plain.example/k"])
def test_a_repository_url_no_runner_would_clone_stores_nothing(sessions: sessionmaker[Session], url: str) -> None:
    """Confirmations and bisections clone the stored URL: one KernelWatch would not open was stored, and failed
    later, in a log."""
    doc = builders.manifest()
    doc["repository"]["url"] = url
    with pytest.raises(InvalidInput, match="repository.url"):
        submit_manifest(sessions, queue(sessions), doc)
    assert all(n == 0 for n in counts(sessions).values())


def test_a_failure_mid_ingest_leaves_nothing_half_written(sessions: sessionmaker[Session]) -> None:
    submit_manifest(sessions, queue(sessions), builders.manifest(position=0))
    before = counts(sessions)

    class Interrupted(Exception):
        pass

    # Ingest writes a new commit, run, benchmark, series and result (some through savepoints), then the
    # transaction dies before its commit: every one of those rows must be gone.
    new_run = builders.manifest(position=1, results=[builders.result(suite="new", name="kernel")])
    with pytest.raises(Interrupted), unit_of_work(sessions) as s:
        ingest_manifest(s, parse_manifest(new_run))
        raise Interrupted
    assert counts(sessions) == before


def test_detection_on_write_flags_the_step_commit(sessions: sessionmaker[Session]) -> None:
    levels = [1e-3] * 5 + [2e-3] * 5
    docs = builders.step_series_manifests(levels, noise=0.01)
    for doc in docs:
        submit_manifest(sessions, queue(sessions), doc)
    with sessions() as s:
        findings = s.scalars(select(Finding)).all()
        assert len(findings) == 1
        f = findings[0]
        commit = s.get(Commit, f.commit_id)
        assert commit is not None and commit.sha == docs[5]["commit"]["sha"]
        assert f.direction == "regression" and f.detector == "edivisive"
        assert f.detector_version == EDivisiveDetector.version
        assert f.magnitude == pytest.approx(1.0, rel=0.05)
        view = series_view(s, f.series_id)
        assert view is not None and len(view.points) == 10 and view.findings[0].commit_sha == commit.sha
        flagged = [c for c in recent_commits(s) if c.findings]
        assert [c.sha for c in flagged] == [commit.sha]


def test_runs_off_the_default_branch_do_not_enter_the_history(sessions: sessionmaker[Session]) -> None:
    docs = builders.step_series_manifests([1e-3] * 10, noise=0.01)
    for doc in docs:
        submit_manifest(sessions, queue(sessions), doc)
    pr = builders.manifest(position=10, results=[builders.result(samples=[5e-3] * 5)], branch="feature",
                           trigger="pr", pr_number=7)
    submit_manifest(sessions, queue(sessions), pr)
    with sessions() as s:
        assert s.scalar(select(func.count(Finding.id))) == 0
        view = series_view(s, s.scalars(select(Series.id)).one())
        assert view is not None and len(view.points) == 10


def test_detection_is_idempotent(sessions: sessionmaker[Session]) -> None:
    docs = builders.step_series_manifests([1e-3] * 5 + [3e-3] * 5)
    for doc in docs:
        submit_manifest(sessions, queue(sessions), doc)
    before = counts(sessions)
    with sessions() as s:
        series_ids = list(s.scalars(select(Series.id)))
    queue(sessions).enqueue_detect(series_ids)
    assert counts(sessions) == before


def test_artifacts_are_linked_and_must_exist(sessions: sessionmaker[Session], tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kernelwatch.errors import InvalidInput
    from service.store.models import Artifact, ResultArtifact

    store = ArtifactStore(tmp_path / "artifacts")
    ref = store.put(b"HloModule jit_softmax\n", kind="hlo", name="module_0001.txt")
    listed = {"kind": ref.kind, "name": ref.name, "sha256": ref.sha256, "size": ref.size}
    missing = dict(listed, sha256="f" * 64, name="other.txt")
    with pytest.raises(InvalidInput, match="not in the store"):
        submit_manifest(sessions, queue(sessions), builders.manifest(results=[builders.result(artifacts=[missing])]),
                        store)
    # A size other than the stored bytes': the first manifest naming a digest would set its row for good.
    lying = dict(listed, size=9 * 10**18)
    with pytest.raises(InvalidInput, match=f"is {9 * 10**18} bytes; the stored one is {ref.size}"):
        submit_manifest(sessions, queue(sessions), builders.manifest(results=[builders.result(artifacts=[lying])]),
                        store)
    assert all(n == 0 for n in counts(sessions).values())
    # The same bytes under two names, and again in a second run: one artifact row, three links.
    twice = [listed, dict(listed, name="as_text.txt")]
    submit_manifest(sessions, queue(sessions), builders.manifest(results=[builders.result(artifacts=twice)]), store)
    submit_manifest(sessions, queue(sessions), builders.manifest(1, results=[builders.result(artifacts=[listed])]),
                    store)
    with sessions() as s:
        assert s.scalar(select(func.count(Artifact.id))) == 1
        assert s.scalar(select(func.count()).select_from(ResultArtifact)) == 3


def test_each_metric_keeps_its_own_direction_and_error_metrics_give_numerics_findings(
        sessions: sessionmaker[Session]) -> None:
    # A quantized kernel got faster at commit 6 and lost accuracy at the same time; its bandwidth rose. Only the
    # accuracy loss is a regression: recall is higher-is-better, time and error lower-is-better.
    for position in range(12):
        after = position >= 6
        results = [
            builders.result(samples=[(0.8e-3 if after else 1e-3) * (1 + 0.001 * k) for k in range(5)]),
            builders.result(metric="rel_error", unit="1", samples=[2e-2 if after else 1e-3]),
            builders.result(metric="recall", unit="1", direction="higher_is_better",
                            samples=[0.90 if after else 0.99]),
            builders.result(metric="algbw", unit="GB/s", direction="higher_is_better",
                            samples=[(125.0 if after else 100.0) + 0.1 * k for k in range(5)]),
        ]
        submit_manifest(sessions, queue(sessions), builders.manifest(position, results))
    with sessions() as s:
        found = {(series.metric, series.unit, series.direction): (f.kind, f.direction)
                 for f, series in s.execute(select(Finding, Series).join(Series, Series.id == Finding.series_id)
                                            .where(Finding.detector == "edivisive"))}
    assert found == {
        ("wall_time", "s", "lower_is_better"): ("time", "improvement"),
        ("rel_error", "1", "lower_is_better"): ("numerics", "regression"),
        ("recall", "1", "higher_is_better"): ("numerics", "regression"),
        ("algbw", "GB/s", "higher_is_better"): ("time", "improvement"),
    }


ROOT_A, ROOT_B, ROOT_C = "a" * 40, "b" * 40, "c" * 40


def _of_project(roots: list[str], position: int = 0) -> dict[str, Any]:
    """A run of the repository named "kernels" whose history has these root commits."""
    doc = builders.manifest(position, repo="kernels")
    doc["repository"]["first_commits"] = roots
    return doc


def test_another_project_under_a_stored_name_is_refused_whole(sessions: sessionmaker[Session]) -> None:
    """Two folders called "kernels" holding two projects: the second's run shares no root commit with the stored
    one's and is refused, nothing of it written (it would have joined the first's series). A clone of the first
    (the same roots), a shallow clone (none known) and a history merged with another project's (both roots) are the
    same project, and a merge's roots join the stored ones."""
    submit_manifest(sessions, queue(sessions), _of_project([ROOT_A]))
    before = counts(sessions)
    with pytest.raises(Conflict, match=r"'kernels' in this store is another project .*--repository-name"):
        submit_manifest(sessions, queue(sessions), _of_project([ROOT_B], position=1))
    assert counts(sessions) == before
    for roots in ([ROOT_A], [], [ROOT_A, ROOT_C]):
        assert submit_manifest(sessions, queue(sessions), _of_project(roots, position=2)).created
    with sessions() as s:
        assert s.scalars(select(Repository.first_commits)).one() == [ROOT_A, ROOT_C]
    # Now a history reaching either root is this project's, a third is not.
    assert submit_manifest(sessions, queue(sessions), _of_project([ROOT_C], position=3)).created
    with pytest.raises(Conflict):
        submit_manifest(sessions, queue(sessions), _of_project([ROOT_B], position=4))


def test_a_repository_stored_before_roots_were_recorded_takes_the_first_given(
        sessions: sessionmaker[Session]) -> None:
    """Runs stored before manifests named root commits (and every shallow clone's) name none: the first run that
    does sets them, and a run submitted again as it was digests as it did (the empty list is left out)."""
    old = _of_project([])
    del old["repository"]["first_commits"]
    submit_manifest(sessions, queue(sessions), old)
    again = copy.deepcopy(old)
    again["repository"]["first_commits"] = []
    assert not submit_manifest(sessions, queue(sessions), again).created  # the same run, not a conflict
    submit_manifest(sessions, queue(sessions), _of_project([ROOT_B], position=1))
    with sessions() as s:
        assert s.scalars(select(Repository.first_commits)).one() == [ROOT_B]
    with pytest.raises(Conflict):
        submit_manifest(sessions, queue(sessions), _of_project([ROOT_A], position=2))


def test_root_commits_that_are_no_shas_are_refused() -> None:
    for bad in (["A" * 40], ["a" * 39], ["a" * 40 + "\n"], [5]):
        doc = _of_project(bad)  # type: ignore[arg-type]
        with pytest.raises(ManifestError, match="first_commits|first commit"):
            parse_manifest(doc)


def test_a_worker_is_told_of_another_project_not_left_thinking_it_stored(sessions: sessionmaker[Session]) -> None:
    """A worker's upload takes a run id stored already as done (a redelivered task's), and nothing else: another
    project's run under a stored name is stored nowhere, so the task fails saying so."""
    from service.pipeline.jobs import _uploader

    jobs = queue(sessions)
    upload = _uploader(jobs.env, jobs)
    stored = _of_project([ROOT_A])
    upload(stored)
    changed = copy.deepcopy(stored)
    changed["results"][0]["samples"] = [9.0, 9.0, 9.0]
    upload(changed)  # the same run id, other samples: another delivery's measurement kept, no error
    with pytest.raises(AnotherProject, match="another project"):
        upload(_of_project([ROOT_B], position=1))
