"""Attribution and static findings on real captures: a tiny suite at two commits, where the second puts tanh
into one of two fusions. Parsing lands after detection (as it may in the distributed form); once it does, the
time finding names the changed fusion, a static finding marks the commit, and re-running changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.detect.attribution import ATTRIBUTION_SCHEMA
from service.pipeline.attribution import attribute_findings
from service.pipeline.detection import detect_many
from service.pipeline.parse_artifacts import parse_results
from service.pipeline.static_detection import STATIC_DETECTOR, STATIC_DETECTOR_VERSION, detect_static
from service.pipeline.submit import submit_manifest
from service.store.db import unit_of_work
from service.store.models import Artifact, Commit, Finding, Result, ResultArtifact, Run, Series
from tests.diff_capture import CHANGED_FUSION, DEPTH, StepAtLatest, capture_two_commits
from tests.processes import clean_env, kernelwatch


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    """Manifests of the two commits, run once for both databases, and the artifact store they captured into."""
    return capture_two_commits(tmp_path_factory.mktemp("attribution"), samples=10)


class ParseLaterQueue:
    """Detection runs at once; parsing waits until the test asks for it."""

    def __init__(self, sessions: sessionmaker[Session], store: ArtifactStore) -> None:
        self.sessions = sessions
        self.store = store
        self.pending: list[int] = []

    def enqueue_detect(self, series_ids: Sequence[int]) -> None:
        with unit_of_work(self.sessions) as session:
            detect_many(session, list(series_ids), StepAtLatest(), self.store)

    def enqueue_parse(self, result_ids: Sequence[int]) -> None:
        self.pending.extend(result_ids)

    def enqueue_runs(self, orders: Sequence[Any]) -> None:
        raise AssertionError("nothing here orders runs")

    def enqueue_compare(self, run_ids: Sequence[int]) -> None:
        pass  # comparisons are not what this test is about


def stored_and_parsed(sessions: sessionmaker[Session], captured: tuple[list[dict[str, Any]], Path]) -> ArtifactStore:
    """The two captured commits submitted and their artifacts parsed (detection and attribution done); their store."""
    manifests, store_root = captured
    store = ArtifactStore(store_root)
    queue = ParseLaterQueue(sessions, store)
    for manifest in manifests:
        submit_manifest(sessions, queue, manifest, store)
    with unit_of_work(sessions) as s:
        parse_results(s, store, queue.pending)
    return store


def snapshot(session: Session) -> list[tuple[Any, ...]]:
    return [(f.id, f.series_id, f.commit_id, f.previous_commit_id, f.detector, f.detector_version, f.kind,
             f.direction, f.magnitude, f.confidence, f.value_before, f.value_after, f.attribution)
            for f in session.scalars(select(Finding).order_by(Finding.id))]


def test_attribution_names_the_changed_fusion_and_static_findings_mark_the_commit(
        sessions: sessionmaker[Session], captured: tuple[list[dict[str, Any]], Path]) -> None:
    manifests, store_root = captured
    store = ArtifactStore(store_root)
    queue = ParseLaterQueue(sessions, store)
    for manifest in manifests:
        # A second time series of the same benchmark (what a traced run reports): the code it measures is the
        # wall time's, so it must not get a static finding of its own.
        extra = [{**r, "metric": "execution_time", "artifacts": []} for r in manifest["results"]
                 if r["metric"] == "wall_time"]
        submit_manifest(sessions, queue, {**manifest, "results": manifest["results"] + extra}, store)
    assert queue.pending

    with sessions() as s:
        wall = s.scalars(select(Series).where(Series.metric == "wall_time")).one()
        assert s.scalars(select(Series).where(Series.metric == "execution_time")).one()
        first, second = s.scalars(select(Commit).order_by(Commit.position)).all()
        assert not s.scalars(select(Finding).where(Finding.detector == STATIC_DETECTOR)).all()  # nothing parsed yet
        timed = s.scalars(select(Finding).where(Finding.detector == StepAtLatest.name,
                                                Finding.series_id == wall.id)).one()
        assert (timed.kind, timed.commit_id, timed.previous_commit_id) == ("time", second.id, first.id)
        early = timed.attribution  # attributed on detection, before any record existed
        assert early["ops"] is None and early["static"] is None
        assert early["summary"] == "no op table or static change to attribute"
        timed_id, wall_id, first_id, second_id = timed.id, wall.id, first.id, second.id

    with unit_of_work(sessions) as s:  # the first commit's records land: nothing to compare them with yet
        [first_result] = s.scalars(select(Result.id).join(Run).where(Run.commit_id == first_id,
                                                                     Result.id.in_(queue.pending)))
        parse_results(s, store, [first_result])
    with sessions() as s:
        assert not s.scalars(select(Finding).where(Finding.detector == STATIC_DETECTOR)).all()
        half = s.get(Finding, timed_id).attribution  # type: ignore[union-attr]
        assert half["ops"] is None and half["static"] is None  # half a comparison is none

    with unit_of_work(sessions) as s:  # the rest lands: the hook re-attributes and runs static detection
        parse_results(s, store, [rid for rid in queue.pending if rid != first_result])

    with sessions() as s:
        attribution = s.get(Finding, timed_id).attribution  # type: ignore[union-attr]
        assert attribution["summary"].startswith(f"{CHANGED_FUSION} self time +"), attribution["ops"]
        assert attribution["ops"]["rows"][0]["op"] == CHANGED_FUSION
        assert attribution["ops"]["calls"] == {"before": 10, "after": 10}
        assert {r["op"] for r in attribution["ops"]["rows"]} >= {CHANGED_FUSION, "ynn_fusion"}
        changed = [f for f in attribution["fusions"] if "code changed" in f["reasons"]]
        assert [f["name"] for f in changed] == [CHANGED_FUSION]
        [code] = changed[0]["kernels"]
        assert code["isa"] == "x86-64" and code["instructions"]["delta"] > 0
        assert code["mnemonics"] and code["text_diff"]["lines"][0].startswith(f"--- {CHANGED_FUSION}")
        [module] = attribution["static"]["modules"]
        assert module["opcodes"] == {"tanh": DEPTH}
        assert [c["name"] for c in module["fusions"]["changed"]] == [CHANGED_FUSION]

        [static] = s.scalars(select(Finding).where(Finding.detector == STATIC_DETECTOR,
                                                   Finding.series_id == wall_id)).all()
        assert (static.kind, static.direction, static.confidence) == ("static", "regression", 1.0)
        assert (static.commit_id, static.previous_commit_id) == (second_id, first_id)
        assert static.value_after > static.value_before and static.detector_version == STATIC_DETECTOR_VERSION
        assert (static.metric, static.unit) == ("kernel_instructions", "instructions")  # not the series' seconds
        assert static.magnitude == pytest.approx(static.value_after / static.value_before - 1)
        assert [k["name"] for k in static.attribution["static"]["kernels"]] == [CHANGED_FUSION]
        assert static.attribution["summary"].startswith(f"{CHANGED_FUSION} ")
        # One code change, one static finding: the benchmark's other time series do not repeat it.
        static_series = set(s.scalars(select(Finding.series_id).where(Finding.detector == STATIC_DETECTOR)))
        assert static_series == {wall_id}
        before = snapshot(s)

    # Everything again, every way in: nothing changes.
    with unit_of_work(sessions) as s:
        time_series = list(s.scalars(select(Series.id)))
        attribute_findings(s, [timed_id], store)
        detect_static(s, time_series, store)
        detect_many(s, time_series, StepAtLatest(), store)
        detect_many(s, time_series, StepAtLatest())  # without the artifact store: keeps the text diffs it has
        parse_results(s, store, queue.pending)
    with sessions() as s:
        assert snapshot(s) == before


def test_a_layer_not_parsed_yet_is_not_compared(sessions: sessionmaker[Session],
                                                 captured: tuple[list[dict[str, Any]], Path]) -> None:
    store = stored_and_parsed(sessions, captured)
    with unit_of_work(sessions) as s:
        second = s.scalars(select(Commit).order_by(Commit.position.desc())).first()
        assert second is not None
        # The second commit's object file, as if its parse had not run yet: its kernels are unknown, not gone.
        s.execute(update(ResultArtifact).where(
            ResultArtifact.artifact_id.in_(select(Artifact.id).where(Artifact.kind == "x86-obj")),
            ResultArtifact.result_id.in_(select(Result.id).join(Run, Run.id == Result.run_id)
                                         .where(Run.commit_id == second.id))).values(parsed_version=None))
        wall = s.scalars(select(Series).where(Series.metric == "wall_time")).one()
        detect_static(s, [wall.id], store)
    with sessions() as s:
        [static] = s.scalars(select(Finding).where(Finding.detector == STATIC_DETECTOR)).all()
        diff = static.attribution["static"]
        assert diff["compared"] == {"hlo": True, "kernels": False} and diff["kernels"] == []
        assert diff["measure"] == "hlo_instructions" and static.direction == "regression"  # more tanh
        assert (static.value_before, static.value_after) == (diff["totals"]["size"]["before"],
                                                             diff["totals"]["size"]["after"])


def test_db_reattribute_recomputes_what_an_older_rule_stored(
        sessions: sessionmaker[Session], captured: tuple[list[dict[str, Any]], Path], database_url: str,
        tmp_path: Path) -> None:
    """A finding whose series gets no new run is never attributed again by detection: after a release changes
    the pairing, `kernelwatch db upgrade` (and `db reattribute`) give it today's attribution."""
    _, store_root = captured
    stored_and_parsed(sessions, captured)
    with sessions() as s:
        current = {f.id: f.attribution for f in s.scalars(select(Finding))}
    assert len(current) >= 2 and all(a["schema"] == ATTRIBUTION_SCHEMA for a in current.values())
    # What the older rule stored: its schema, and what pairing by name said of a renamed fusion.
    with unit_of_work(sessions) as s:
        for finding_id, attribution in current.items():
            s.get(Finding, finding_id).attribution = {  # type: ignore[union-attr]
                **attribution, "schema": ATTRIBUTION_SCHEMA - 1, "summary": f"{CHANGED_FUSION} vanished"}

    home = tmp_path / "home"
    home.mkdir()
    (home / "artifacts").symlink_to(store_root)  # the runs' artifacts, where the command's settings look
    env = clean_env(home, KERNELWATCH_DATABASE_URL=database_url)
    out = kernelwatch("db", "reattribute", env=env)
    assert f"attributions: {len(current)} findings attributed again by the current rule" in out
    with sessions() as s:
        assert {f.id: f.attribution for f in s.scalars(select(Finding))} == current
    assert "attributions: 0 findings" in kernelwatch("db", "upgrade", env=env)  # done once, and upgrade does it
