"""Alerts on the real databases: grouping on write, idempotent regrouping, findings that move, triage notes."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import InvalidInput, NotFound
from kernelwatch.vocabulary import Polarity
from runners.artifacts import ArtifactStore
from service.contract import parse_manifest
from service.detect.grouping import AlertGroup
from service.detect.series_detector import EDivisiveDetector
from service.detect.types import ChangePoint, SeriesPoint
from service.pipeline.alerts import (
    EMPTIED,
    REFILLED,
    SYSTEM_AUTHOR,
    _create_alert,
    get_alert,
    group_findings,
    list_alerts,
    triage,
)
from service.pipeline.detection import detect_many
from service.pipeline.ingest import ingest_manifest
from service.pipeline.jobs import JobEnv
from service.pipeline.queue import InProcessQueue
from service.pipeline.submit import submit_manifest
from service.report.alerts_text import alerts_to_json, alerts_to_text
from service.report.slack_blocks import alert_message, slack_alert
from service.store.db import alembic_config, make_engine, unit_of_work, upgrade
from service.store.models import Alert, AlertNote, BisectJob, Commit, Finding, Repository, Series
from service.store.queries import all_findings
from tests import builders


@dataclass
class History:
    commits: dict[int, int]  # position -> commit id
    series: dict[str, int]  # benchmark name -> series id


def history(sessions: sessionmaker[Session], positions: int = 8, names: Sequence[str] = ("a", "b", "c"),
            repo: str = "demo") -> History:
    """Flat results (no findings) for a few benchmarks at each commit; stored without running detection."""
    with unit_of_work(sessions) as s:
        for p in range(positions):
            doc = builders.manifest(p, [builders.result(suite="k", name=n) for n in names], repo=repo)
            ingest_manifest(s, parse_manifest(doc))
    with sessions() as s:
        repo_id = s.scalars(select(Repository.id).where(Repository.name == repo)).one()
        commits = {c.position: c.id for c in s.scalars(select(Commit).where(Commit.repository_id == repo_id))}
        series = {sr.benchmark.name: sr.id for sr in s.scalars(select(Series).where(Series.repository_id == repo_id))}
    return History(commits=commits, series=series)


def add_finding(s: Session, series_id: int, commit_id: int, previous_id: int | None,
                direction: str = "regression", magnitude: float = 0.5) -> int:
    f = Finding(series_id=series_id, commit_id=commit_id, previous_commit_id=previous_id, detector="test",
                detector_version=1, kind="time", direction=direction, magnitude=magnitude, confidence=10.0,
                value_before=1.0, value_after=1.0 + magnitude, created_at=datetime.now(UTC), attribution={})
    s.add(f)
    s.flush()
    return f.id


def alert_of(s: Session, finding_id: int) -> Alert | None:
    f = s.get(Finding, finding_id)
    assert f is not None
    return None if f.alert_id is None else s.get(Alert, f.alert_id)


def count(s: Session, model: type) -> int:
    return s.scalar(select(func.count()).select_from(model)) or 0


def test_detection_on_write_groups_one_range_into_one_alert(sessions: sessionmaker[Session]) -> None:
    with unit_of_work(sessions) as s:
        for p, level in enumerate([1e-3] * 5 + [2e-3] * 5):
            results = [builders.result(name=n, samples=[level * (1 + 0.002 * i) for i in range(5)])
                       for n in ("one", "two")]
            ingest_manifest(s, parse_manifest(builders.manifest(p, results)))
    with unit_of_work(sessions) as s:
        assert detect_many(s, list(s.scalars(select(Series.id))), EDivisiveDetector()) == 2
    with sessions() as s:
        [alert] = list_alerts(s)
        assert (alert.state, alert.kind, alert.repository) == ("untriaged", "regression", "demo")
        assert alert.commit_sha == builders.sha_for("demo-5") and alert.commit_subject == "commit number 5"
        assert alert.previous_sha == builders.sha_for("demo-4") and alert.previous_subject == "commit number 4"
        assert sorted(f.benchmark for f in alert.findings) == [
            "softmax/one[cols=4096,rows=256]", "softmax/two[cols=4096,rows=256]"]
        assert all(f.direction == "regression" and f.magnitude == pytest.approx(1.0, rel=0.05)
                   and f.metric == "wall_time" for f in alert.findings)


def test_grouping_twice_changes_nothing(sessions: sessionmaker[Session]) -> None:
    h = history(sessions)
    with unit_of_work(sessions) as s:
        ids = [add_finding(s, h.series["a"], h.commits[5], h.commits[4]),
               add_finding(s, h.series["b"], h.commits[5], h.commits[4]),
               add_finding(s, h.series["c"], h.commits[7], h.commits[6], direction="improvement")]
        first = group_findings(s, ids)
    assert len(first.created) == 2 and not (first.updated or first.deleted or first.emptied)
    with sessions() as s:
        before = [(a.id, a.state, a.kind, a.updated_at) for a in s.scalars(select(Alert).order_by(Alert.id))]
        assignment = {f.id: f.alert_id for f in s.scalars(select(Finding))}
    with unit_of_work(sessions) as s:
        again = group_findings(s, ids)
        assert again.created == again.updated == again.deleted == again.emptied == []
        group_findings(s, ids[:1])  # a subset neither
    with sessions() as s:
        assert [(a.id, a.state, a.kind, a.updated_at) for a in s.scalars(select(Alert).order_by(Alert.id))] == before
        assert {f.id: f.alert_id for f in s.scalars(select(Finding))} == assignment
        assert count(s, AlertNote) == 0
        assert assignment[ids[0]] == assignment[ids[1]] != assignment[ids[2]]
        improvement = alert_of(s, ids[2])
        assert improvement is not None and (improvement.state, improvement.kind) == ("improvement", "improvement")


def test_a_finding_that_moved_follows_its_range(sessions: sessionmaker[Session]) -> None:
    h = history(sessions)
    with unit_of_work(sessions) as s:
        wide = add_finding(s, h.series["a"], h.commits[6], h.commits[3])  # a range never measured inside
        other = add_finding(s, h.series["b"], h.commits[6], h.commits[3], direction="improvement")
        group_findings(s, [wide, other])
        old = alert_of(s, wide)
        assert old is not None and old.kind == "mixed" and old.state == "untriaged"
        old_id = old.id
    with unit_of_work(sessions) as s:  # bisection isolates commit 5 for one of them
        f = s.get(Finding, wide)
        assert f is not None
        f.commit_id, f.previous_commit_id = h.commits[5], h.commits[4]
        outcome = group_findings(s, [wide, other])
        assert outcome.updated == [old_id] and len(outcome.created) == 1
    with sessions() as s:
        new = alert_of(s, wide)
        assert new is not None and new.id != old_id and new.commit_id == h.commits[5]
        left = s.get(Alert, old_id)
        # Left with its improvement only, nobody having triaged it: its state follows its findings.
        assert left is not None and (left.kind, left.state) == ("improvement", "improvement")
    with unit_of_work(sessions) as s:  # and the other one too: the old alert, untouched by anyone, goes
        f = s.get(Finding, other)
        assert f is not None
        f.commit_id, f.previous_commit_id = h.commits[5], h.commits[4]
        outcome = group_findings(s, [other])
        assert outcome.deleted == [old_id] and outcome.updated == [new.id]
    with sessions() as s:
        assert s.get(Alert, old_id) is None
        [alert] = list_alerts(s)
        assert alert.kind == "mixed" and sorted(f.id for f in alert.findings) == sorted([wide, other])


def test_an_emptied_alert_someone_wrote_on_is_kept_with_a_note(sessions: sessionmaker[Session]) -> None:
    h = history(sessions)
    with unit_of_work(sessions) as s:
        fid = add_finding(s, h.series["a"], h.commits[6], h.commits[3])
        group_findings(s, [fid])
        alert = alert_of(s, fid)
        assert alert is not None
        alert_id = alert.id
        triage(s, alert_id, "investigating", "bisecting 3..6", "ada")
    with unit_of_work(sessions) as s:
        f = s.get(Finding, fid)
        assert f is not None
        f.commit_id, f.previous_commit_id = h.commits[4], h.commits[3]
        outcome = group_findings(s, [fid])
        target = alert_of(s, fid)
        assert target is not None and outcome.emptied == [alert_id] and outcome.created == [target.id]
    with unit_of_work(sessions) as s:
        group_findings(s, [fid])  # idempotent: said once
    with sessions() as s:
        kept = get_alert(s, alert_id)
        assert kept.state == "investigating" and kept.findings == []
        assert [(n.author, n.state_to) for n in kept.notes] == [("ada", "investigating"), (SYSTEM_AUTHOR, None)]
        assert kept.notes[1].text == f"{EMPTIED}they moved to alert {target.id}"
    with unit_of_work(sessions) as s:  # re-detection puts it back where it was
        f = s.get(Finding, fid)
        assert f is not None
        f.commit_id, f.previous_commit_id = h.commits[6], h.commits[3]
        outcome = group_findings(s, [fid])
        assert outcome.deleted == [target.id]  # nobody wrote on that one
    with sessions() as s:
        back = get_alert(s, alert_id)
        assert [f.id for f in back.findings] == [fid] and back.state == "investigating"
        assert back.notes[-1].text.startswith(REFILLED)


def test_re_detection_that_withdraws_findings_removes_their_alert(sessions: sessionmaker[Session]) -> None:
    h = history(sessions)

    class FindsNothing:
        name, version = "test", 1

        def detect(self, points: Sequence[SeriesPoint], polarity: Polarity) -> list[ChangePoint]:
            return []

    with unit_of_work(sessions) as s:
        kept = add_finding(s, h.series["a"], h.commits[5], h.commits[4])
        gone = add_finding(s, h.series["b"], h.commits[7], h.commits[6])
        noted = add_finding(s, h.series["c"], h.commits[3], h.commits[2])
        group_findings(s, [kept, gone, noted])
        noted_alert = alert_of(s, noted)
        assert noted_alert is not None
        noted_id = noted_alert.id
        triage(s, noted_id, "untriaged", "probably the new compiler", "bo")  # a note, no state change
        repository_id = s.get(Series, h.series["b"]).repository_id  # type: ignore[union-attr]
        s.add(BisectJob(series_id=h.series["b"], finding_id=gone, repository_id=repository_id,
                        good_commit_sha="a" * 40, bad_commit_sha="b" * 40, hardware="cpu", state="pending",
                        purpose="bisect", runs_requested=["c" * 40], created_at=datetime.now(UTC),
                        updated_at=datetime.now(UTC)))
    with unit_of_work(sessions) as s:
        detect_many(s, [h.series["b"], h.series["c"]], FindsNothing())
    with sessions() as s:
        assert s.get(Finding, gone) is None
        (job,) = s.scalars(select(BisectJob)).all()  # the job follows the series; its finding is gone
        assert job.finding_id is None
        alerts = {a.id: a for a in list_alerts(s)}
        assert len(alerts) == 2 and noted_id in alerts  # the untouched one went, the noted one stays
        # Kept for its note, and closed: nothing is left to triage (it stayed "untriaged" in the inbox for good).
        assert alerts[noted_id].state == "invalid" and alerts[noted_id].findings == []
        last = alerts[noted_id].notes[-1]
        assert last.text == f"{EMPTIED}detection no longer finds a change at this range"
        assert (last.state_from, last.state_to) == ("untriaged", "invalid")
    with unit_of_work(sessions) as s:  # the change found again: the alert follows its findings again
        group_findings(s, [add_finding(s, h.series["c"], h.commits[3], h.commits[2])])
    with sessions() as s:
        assert get_alert(s, noted_id).state == "untriaged"  # grouping's own "invalid" was no person's triage


def test_triage_records_notes_and_survives_regrouping(sessions: sessionmaker[Session]) -> None:
    h = history(sessions)
    with unit_of_work(sessions) as s:
        fid = add_finding(s, h.series["a"], h.commits[5], h.commits[4], direction="improvement")
        group_findings(s, [fid])
        alert = alert_of(s, fid)
        assert alert is not None and alert.state == "improvement"
        alert_id = alert.id
    with unit_of_work(sessions) as s:
        view = triage(s, alert_id, "invalid", "  noisy host  ", "ada")
        assert view.state == "invalid"
        time.sleep(0.01)
        assert triage(s, alert_id, "invalid", "confirmed on a quiet host", "bo").state == "invalid"
        with pytest.raises(InvalidInput, match="already invalid"):
            triage(s, alert_id, "invalid", "", "bo")
        with pytest.raises(InvalidInput, match="unknown alert state 'closed'"):
            triage(s, alert_id, "closed", "", "bo")
        with pytest.raises(InvalidInput, match="author"):
            triage(s, alert_id, "fixed", "", " ")
        with pytest.raises(NotFound, match="no alert 999999"):
            triage(s, 999999, "fixed", "", "bo")
    with unit_of_work(sessions) as s:  # a regression joins: the kind follows, the person's state stays
        group_findings(s, [add_finding(s, h.series["b"], h.commits[5], h.commits[4])])
    with sessions() as s:
        alert_view = get_alert(s, alert_id)
        assert (alert_view.kind, alert_view.state, len(alert_view.findings)) == ("mixed", "invalid", 2)
        assert [(n.author, n.text, n.state_from, n.state_to) for n in alert_view.notes] == [
            ("ada", "noisy host", "improvement", "invalid"),
            ("bo", "confirmed on a quiet host", "invalid", None),
        ]


def test_list_alerts_filters(sessions: sessionmaker[Session]) -> None:
    h = history(sessions)
    other = history(sessions, positions=4, names=("a",), repo="other")
    with unit_of_work(sessions) as s:
        ids = [add_finding(s, h.series["a"], h.commits[5], h.commits[4]),
               add_finding(s, h.series["a"], h.commits[2], h.commits[1]),
               add_finding(s, other.series["a"], other.commits[2], other.commits[1])]
        group_findings(s, ids)
        first = alert_of(s, ids[0])
        assert first is not None
        triage(s, first.id, "fixed", "", "ada")
    with sessions() as s:
        assert len(list_alerts(s)) == 3
        assert [a.commit_sha for a in list_alerts(s, state="fixed")] == [builders.sha_for("demo-5")]
        assert [a.repository for a in list_alerts(s, repository="other")] == ["other"]
        assert list_alerts(s, repository="other", state="fixed") == []
        with pytest.raises(NotFound, match="no repository named 'nope'"):
            list_alerts(s, repository="nope")
        with pytest.raises(InvalidInput, match="unknown alert state"):
            list_alerts(s, state="closed")


def test_one_alert_per_range_even_when_two_workers_race(sessions: sessionmaker[Session]) -> None:
    h = history(sessions)
    with sessions() as s:
        repo_id = s.scalars(select(Repository.id)).one()
    group = AlertGroup(repository_id=repo_id, previous_commit_id=h.commits[4], commit_id=h.commits[5],
                       finding_ids=(), kind="regression")
    now = datetime.now(UTC)
    with unit_of_work(sessions) as s:  # the other worker's alert, committed after this one looked
        winner, made = _create_alert(s, group, now)
        assert made
    with unit_of_work(sessions) as s:
        found, made = _create_alert(s, group, now)
        assert (found.id, made) == (winner.id, False)
        with pytest.raises(IntegrityError):  # the database itself refuses a second alert of the range
            with s.begin_nested():
                s.add(Alert(repository_id=repo_id, commit_id=h.commits[5], previous_commit_id=h.commits[4],
                            state="untriaged", kind="regression", created_at=now, updated_at=now))
    with sessions() as s:
        assert count(s, Alert) == 1


def test_migration_0004_goes_down_and_up_again(database_url: str) -> None:
    upgrade(database_url)
    command.downgrade(alembic_config(database_url), "0003")
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        from sqlalchemy import inspect

        assert {"alert", "alert_note", "bisect_job"} <= set(inspect(engine).get_table_names())
        assert {"p_value", "alert_id"} <= {c["name"] for c in inspect(engine).get_columns("finding")}
    finally:
        engine.dispose()


def test_migration_0015_names_what_existing_static_findings_count(sessions: sessionmaker[Session],
                                                                   database_url: str) -> None:
    """Static findings stored before 0015 take the measure their attribution recorded; a time finding keeps None
    (its series' metric), and so does a static one without a recorded measure until detection runs again."""
    h = history(sessions, positions=5)
    measured = {"bundles": "a", "kernel_instructions": "b", None: "c"}  # measure → benchmark
    with unit_of_work(sessions) as s:
        ids = {}
        for position, (measure, name) in enumerate(measured.items(), 1):
            ids[measure] = add_finding(s, h.series[name], h.commits[position], h.commits[position - 1])
            finding = s.get(Finding, ids[measure])
            assert finding is not None
            finding.kind, finding.attribution = "static", {} if measure is None else {"static": {"measure": measure}}
        timed = add_finding(s, h.series["a"], h.commits[4], h.commits[3])
    command.downgrade(alembic_config(database_url), "0014")
    upgrade(database_url)
    with sessions() as s:
        named = {f.id: (f.metric, f.unit) for f in s.scalars(select(Finding))}
    assert named == {ids["bundles"]: ("kernel_bundles", "bundles"),
                     ids["kernel_instructions"]: ("kernel_instructions", "instructions"),
                     ids[None]: (None, None), timed: (None, None)}


SASS = Path(__file__).parents[1] / "fixtures" / "sass" / "synthetic_sm80_sm90a.sass"


def sass_with_one_more_instruction() -> bytes:
    text = SASS.read_text()
    line = "        /*0090*/                   LDGDEPBAR ;\n"
    assert text.count(line) == 1
    return text.replace(line, line + "        /*0098*/                   NOP ;\n").encode()


def test_a_static_finding_carries_its_own_metric_and_unit_to_every_view(sessions: sessionmaker[Session],
                                                                         tmp_path: Path) -> None:
    """Through the real pipeline (submit, parse, detection, grouping): the same code at two commits is no finding,
    one more instruction is one, and every view of it (alerts, findings, the CLI text, Slack) says it counts
    kernel instructions, not the wall time of the series it sits on."""
    store = ArtifactStore(tmp_path / "artifacts")
    queue = InProcessQueue(JobEnv(sessions, EDivisiveDetector(), store))
    listings = [SASS.read_bytes()] * 3 + [sass_with_one_more_instruction()]
    for position, listing in enumerate(listings):
        ref = store.put(listing, "sass", "k.sass")
        result = builders.result(artifacts=[{"kind": "sass", "name": "k.sass", "sha256": ref.sha256,
                                             "size": ref.size}])
        submit_manifest(sessions, queue, builders.manifest(position, [result]), store)
    with sessions() as s:
        [finding] = s.scalars(select(Finding)).all()  # none at commits 1 and 2: the same bytes
        assert s.get(Commit, finding.commit_id).position == 3  # type: ignore[union-attr]
        assert (finding.kind, finding.direction, finding.metric, finding.unit) == (
            "static", "regression", "kernel_instructions", "instructions")
        assert finding.value_after - finding.value_before == 1
        [view] = all_findings(s)
        assert (view.metric, view.unit) == ("kernel_instructions", "instructions")
        [alert] = list_alerts(s)
        assert alert.kind == "regression"
        assert [(f.metric, f.unit) for f in alert.findings] == [("kernel_instructions", "instructions")]
        series_id = alert.findings[0].series_id
        assert s.get(Series, series_id).metric == "wall_time"  # type: ignore[union-attr]
    text = alerts_to_text([alert])
    slack = alert_message(slack_alert(alert, {series_id: "cpu"})).as_json()
    for shown in (text, json.dumps(slack), json.dumps(alerts_to_json([alert]))):
        assert "kernel_instructions" in shown and "wall_time" not in shown
