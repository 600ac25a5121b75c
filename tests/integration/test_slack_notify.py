"""Slack alerts end to end on both databases, against a fake Slack API server over real HTTP: one message per
alert, thread replies and in-place edits on triage and verdicts, 429s waited out, outages survived."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.context import Context
from service.contract import parse_manifest
from service.detect.series_detector import EDivisiveDetector
from service.integrations.slack import SlackClient
from service.pipeline.alerts import group_findings, triage
from service.pipeline.background import BackgroundQueue
from service.pipeline.ingest import ingest_manifest
from service.pipeline.jobs import JobEnv
from service.pipeline.notify import (
    FAILED,
    PENDING,
    SENT,
    SlackNotifier,
    due,
    mark_grouped,
    notification_status,
)
from service.pipeline.queue import InProcessQueue
from service.pipeline.submit import submit_manifest
from service.settings import load_settings
from service.store.db import unit_of_work
from service.store.models import Alert, AlertNotification, BisectJob, Commit, Finding, Repository, Series
from tests import builders
from tests.api_client import make_api
from tests.fake_slack import CHANNEL_ID, TOKEN, FakeSlack, running_fake_slack
from tests.processes import clean_env
from tests.scratch_database import at_head

CHANNEL = "#perf-alerts"
PUBLIC = "https://kernelwatch.example.com"


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with running_fake_slack() as server:
        yield server


class Clock:
    """The notifier's idea of now, moved by the test to where a backoff is over."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


def notifier(sessions: sessionmaker[Session], fake: FakeSlack, clock: Clock | None = None,
             max_wait_s: float = 30) -> SlackNotifier:
    return SlackNotifier(sessions=sessions, sender=SlackClient(TOKEN, fake.url, timeout_s=5, max_wait_s=max_wait_s),
                         channel=CHANNEL, public_url=PUBLIC, clock=clock or Clock())


def stored_alert(sessions: sessionmaker[Session], n: SlackNotifier, benchmarks: int = 2,
                 repo: str = "demo") -> int:
    """``benchmarks`` series measured at two commits, each with a finding at the second: one alert, marked."""
    names = [f"k{i}" for i in range(benchmarks)]
    with unit_of_work(sessions) as s:
        for p in range(2):
            ingest_manifest(s, parse_manifest(builders.manifest(
                p, [builders.result(suite="suite", name=name) for name in names], repo=repo)))
    with unit_of_work(sessions) as s:
        repo_id = s.scalars(select(Repository.id).where(Repository.name == repo)).one()
        commits = {c.position: c.id for c in s.scalars(select(Commit).where(Commit.repository_id == repo_id))}
        ids = []
        for i, series_id in enumerate(s.scalars(select(Series.id).where(Series.repository_id == repo_id)
                                                .order_by(Series.id))):
            f = Finding(series_id=series_id, commit_id=commits[1], previous_commit_id=commits[0], detector="test",
                        detector_version=1, kind="time", direction="regression", magnitude=0.05 + 0.001 * i,
                        confidence=10.0, value_before=1.0, value_after=1.05, created_at=datetime.now(UTC),
                        attribution={})
            s.add(f)
            s.flush()
            ids.append(f.id)
        outcome = group_findings(s, ids)
        [alert_id] = outcome.created
        assert n.mark_grouped(s, outcome) == [alert_id]
    return alert_id


def texts(blocks: object) -> list[str]:
    """Every text string in a message's blocks."""
    if isinstance(blocks, dict):
        return [v for k, v in blocks.items() if k == "text" and isinstance(v, str)] + texts(list(blocks.values()))
    if isinstance(blocks, list):
        return [t for b in blocks for t in texts(b)]
    return []


def row(sessions: sessionmaker[Session], alert_id: int) -> AlertNotification:
    with sessions() as s:
        return s.scalars(select(AlertNotification).where(AlertNotification.alert_id == alert_id)).one()


def test_a_new_alert_from_the_pipeline_is_announced_once(sessions: sessionmaker[Session], fake: FakeSlack,
                                                         tmp_path: Path) -> None:
    n = notifier(sessions, fake)
    queue = InProcessQueue(JobEnv(sessions, EDivisiveDetector(), ArtifactStore(tmp_path / "artifacts"), notifier=n))
    for doc in builders.step_series_manifests([1e-3] * 6 + [2e-3] * 6, noise=0.002):
        submit_manifest(sessions, queue, doc)
    [message] = fake.top_level()
    with sessions() as s:
        [alert] = s.scalars(select(Alert)).all()
    assert message.channel == CHANNEL_ID and fake.replies(message.ts) == []
    assert message.blocks[0]["text"]["text"] == f"Regression: 1 finding at {builders.sha_for('demo-6')[:12]} in demo"
    [button] = message.blocks[-1]["elements"]
    assert button["url"] == f"{PUBLIC}/?after={alert.id + 1}#alert-{alert.id}"
    state = row(sessions, alert.id)
    assert (state.state, state.channel_id, state.message_ts, state.attempts) == (SENT, CHANNEL_ID, message.ts, 0)
    # More results at the same level, detection again, a sweep: nothing new to say, no second message.
    submit_manifest(sessions, queue, builders.step_series_manifests([2e-3] * 13, noise=0.002)[12])
    assert n.sweep() == []
    assert len(fake.calls("chat.postMessage")) == 1 and len(fake.top_level()) == 1


def test_triage_through_the_api_replies_in_the_thread_and_edits_the_message(
        sessions: sessionmaker[Session], database_url: str, fake: FakeSlack, tmp_path: Path) -> None:
    api = make_api(database_url, tmp_path, KERNELWATCH_SLACK_TOKEN=TOKEN, KERNELWATCH_SLACK_CHANNEL=CHANNEL,
                   KERNELWATCH_SLACK_API_URL=fake.url, KERNELWATCH_PUBLIC_URL=PUBLIC + "/")
    try:
        assert api.ctx.notifier is not None
        for doc in builders.step_series_manifests([1e-3] * 6 + [2e-3] * 6, noise=0.002):
            api.ctx.submit(doc)
        [parent] = fake.top_level()
        # The follow-up's confirmation could not run (the builders' repository does not exist). It ended before
        # the alert was announced (announcements go after follow-ups), so the message shows it from the start,
        # and the thread has it as its first reply.
        [verdict] = fake.replies(parent.ts)
        assert verdict.text.startswith("Confirmation of softmax/softmax_rows[cols=4096,rows=256] gave up")
        assert parent.edits == 0 and any("gave up" in t for t in texts(parent.blocks))
        with sessions() as s:
            alert_id = s.scalars(select(Alert.id)).one()
        response = api.client.post(f"/api/v1/alerts/{alert_id}/triage", headers=api.auth("triage"),
                                   json={"state": "acknowledged", "note": "looking <here> & there"})
        assert response.status_code == 200, response.json
    finally:
        api.ctx.close()
    [_, reply] = fake.replies(parent.ts)
    assert reply.blocks[0]["text"]["text"] == "*triage-bot* set the state to *acknowledged* (was untriaged)"
    assert reply.blocks[1]["text"]["text"] == "looking &lt;here&gt; &amp; there"
    update = fake.calls("chat.update")[-1]
    assert update.body["channel"] == CHANNEL_ID and update.body["ts"] == parent.ts
    assert parent.edits == 1 and "*State*\nacknowledged" in texts(parent.blocks)
    assert len(fake.top_level()) == 1 and row(sessions, alert_id).state == SENT


def test_the_embedded_server_answers_a_triage_while_slack_is_slow(
        sessions: sessionmaker[Session], database_url: str, fake: FakeSlack, tmp_path: Path) -> None:
    """Issue 18 item 7: `kernelwatch serve`'s requests do not wait on follow-up work; a triage's Slack reply and
    edit go to its background thread. Slack holds every request here: the triage is answered all the same."""
    env = {"KERNELWATCH_SLACK_TOKEN": TOKEN, "KERNELWATCH_SLACK_CHANNEL": CHANNEL,
           "KERNELWATCH_SLACK_API_URL": fake.url, "KERNELWATCH_FOLLOW_UP": "none"}
    # The history and its alert first, synchronously (as `kernelwatch ingest` stores it), then the server.
    seeding = Context.create(load_settings({"KERNELWATCH_HOME": str(tmp_path / "seed"),
                                            "KERNELWATCH_DATABASE_URL": database_url, **env}))
    try:
        for doc in builders.step_series_manifests([1e-3] * 6 + [2e-3] * 6, noise=0.002):
            seeding.submit(doc)
    finally:
        seeding.close()
    api = make_api(database_url, tmp_path, background=True, **env)
    queue = api.ctx.queue
    assert isinstance(queue, BackgroundQueue)
    try:
        [parent] = fake.top_level()
        with sessions() as s:
            alert_id = s.scalars(select(Alert.id)).one()
        fake.hold, before = threading.Event(), fake.arrived
        try:
            response = api.client.post(f"/api/v1/alerts/{alert_id}/triage", headers=api.auth("triage"),
                                       json={"state": "acknowledged", "note": "slow Slack"})
            assert response.status_code == 200 and response.json["state"] == "acknowledged", response.json
            assert not fake.replies(parent.ts)  # nothing Slack was asked has been answered yet
            deadline = time.monotonic() + 60
            while fake.arrived == before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert fake.arrived > before  # ...and the thread did ask
        finally:
            fake.hold.set()
        assert queue.drain(120)
    finally:
        api.ctx.close()
    [reply] = fake.replies(parent.ts)
    assert "set the state to *acknowledged*" in reply.blocks[0]["text"]["text"]
    assert parent.edits == 1 and row(sessions, alert_id).state == SENT


def test_triage_from_the_command_line_replies_in_the_thread(sessions: sessionmaker[Session], database_url: str,
                                                            fake: FakeSlack, tmp_path: Path) -> None:
    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n)
    n.send([alert_id])
    [parent] = fake.top_level()
    env = clean_env(tmp_path / "home", KERNELWATCH_DATABASE_URL=database_url, USER="ci", KERNELWATCH_SLACK_TOKEN=TOKEN,
                    KERNELWATCH_SLACK_CHANNEL=CHANNEL, KERNELWATCH_SLACK_API_URL=fake.url)
    done = subprocess.run([sys.executable, "-m", "service.cli", "alerts", "triage", str(alert_id), "fixed"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [reply] = fake.replies(parent.ts)
    assert reply.text == "ci set the state to fixed (was untriaged)"
    assert parent.edits == 1 and parent.blocks[0]["text"]["text"].startswith("[fixed] Regression")


def test_a_burst_of_429_is_waited_out_and_delivered_once(sessions: sessionmaker[Session], fake: FakeSlack) -> None:
    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n)
    fake.rate_limit(2, retry_after=1)
    outcome = n.deliver(alert_id)
    assert outcome.state == SENT and outcome.posted == 1
    assert [r.status for r in fake.calls("chat.postMessage")] == [429, 429, 200]  # the same request, resent
    assert len(fake.top_level()) == 1 and row(sessions, alert_id).attempts == 0


def test_a_long_retry_after_is_left_to_a_later_attempt(sessions: sessionmaker[Session], fake: FakeSlack) -> None:
    clock = Clock()
    n = notifier(sessions, fake, clock, max_wait_s=5)
    alert_id = stored_alert(sessions, n)
    fake.rate_limit(1, retry_after=120)  # longer than this worker will sleep
    outcome = n.deliver(alert_id)
    assert outcome.state == PENDING and outcome.retry_in_s is not None and outcome.retry_in_s >= 120
    state = row(sessions, alert_id)
    assert state.attempts == 1 and "ratelimited" in (state.last_error or "") and fake.top_level() == []
    assert n.sweep() == []  # not due before Slack's Retry-After
    clock.offset = timedelta(seconds=121)
    assert n.sweep() == [alert_id]
    assert len(fake.top_level()) == 1 and row(sessions, alert_id).state == SENT


def test_an_outage_delays_the_messages_and_loses_none(sessions: sessionmaker[Session], fake: FakeSlack) -> None:
    clock = Clock()
    n = notifier(sessions, fake, clock)
    alert_id = stored_alert(sessions, n)
    fake.fail_with(500)
    assert n.deliver(alert_id).state == PENDING
    with sessions() as s:
        [status] = notification_status(s, [alert_id])[alert_id]
    assert (status.state, status.attempts, status.posted) == (PENDING, 1, False)
    assert status.last_error is not None and "internal_error" in status.last_error
    assert status.next_attempt_at is not None and status.next_attempt_at > datetime.now(UTC)
    # A triage during the outage: stored, owed, and not lost either.
    with unit_of_work(sessions) as s:
        triage(s, alert_id, "investigating", "bisecting by hand", "ada")
        assert n.mark_alerts(s, [alert_id]) == [alert_id]
    n.send([alert_id])
    fake.fail_with(None)
    fake.stop()  # now not even listening: connection refused
    clock.offset = timedelta(hours=1)
    assert n.sweep() == [alert_id]
    failed = row(sessions, alert_id)
    assert failed.state == PENDING and failed.attempts == 3 and "unreachable" in (failed.last_error or "")
    assert fake.top_level() == []
    fake.start()
    clock.offset = timedelta(hours=3)
    assert n.sweep() == [alert_id]
    [parent] = fake.top_level()
    [reply] = fake.replies(parent.ts)
    assert "investigating" in reply.text and "*State*\ninvestigating" in texts(parent.blocks)
    delivered = row(sessions, alert_id)
    assert (delivered.state, delivered.attempts, delivered.last_error) == (SENT, 0, None)
    clock.offset = timedelta(hours=5)
    assert n.sweep() == [] and n.deliver(alert_id).posted == 0  # nothing is sent twice
    assert len(fake.calls("chat.postMessage", ok_only=True)) == 2


def test_slack_refusing_the_call_fails_the_row_until_retried(sessions: sessionmaker[Session],
                                                              fake: FakeSlack) -> None:
    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n)
    fake.reject_with("invalid_auth")
    outcome = n.deliver(alert_id)
    assert outcome.state == FAILED and "invalid_auth" in (outcome.error or "")
    assert len(fake.calls("chat.postMessage")) == 1  # a refusal is not retried on its own
    with sessions() as s:
        assert due(s, CHANNEL, datetime.now(UTC) + timedelta(days=1)) == []
    fake.reject_with(None)  # someone fixed the token
    assert n.retry_failed() == [alert_id]
    assert len(fake.top_level()) == 1 and row(sessions, alert_id).state == SENT


def test_an_alert_of_hundreds_of_findings_fits_in_one_message(sessions: sessionmaker[Session],
                                                               fake: FakeSlack) -> None:
    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n, benchmarks=300)
    assert n.deliver(alert_id).state == SENT  # the fake refuses anything past Slack's limits
    [parent] = fake.top_level()
    assert len(parent.blocks) <= 50 and parent.blocks[0]["text"]["text"].startswith("Regression: 300 findings")
    assert any("285 more findings" in t for t in texts(parent.blocks))


def test_concurrent_deliveries_post_one_message(sessions: sessionmaker[Session], fake: FakeSlack) -> None:
    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n)
    fake.rate_limit(1, retry_after=1)  # the first delivery sits in Slack's rate limit, holding the alert
    first: list[str] = []
    worker = threading.Thread(target=lambda: first.append(n.deliver(alert_id).state))
    worker.start()
    for _ in range(100):
        if fake.requests:
            break
        threading.Event().wait(0.02)
    assert n.deliver(alert_id).state == "busy"
    worker.join(timeout=30)
    assert first == [SENT] and len(fake.top_level()) == 1


def job_of(s: Session, alert_id: int, purpose: str, state: str, good: str | None = None,
           **fields: Any) -> BisectJob:
    """A bisection or confirmation of the alert's one finding, over its range (``good``: another base), added."""
    finding = s.scalars(select(Finding).where(Finding.alert_id == alert_id)).one()
    base, head = s.get(Commit, finding.previous_commit_id), s.get(Commit, finding.commit_id)
    assert base is not None and head is not None
    job = BisectJob(series_id=finding.series_id, finding_id=finding.id, repository_id=head.repository_id,
                    good_commit_sha=good or base.sha, bad_commit_sha=head.sha, hardware="cpu", state=state,
                    purpose=purpose, runs_requested=[], created_at=datetime.now(UTC), updated_at=datetime.now(UTC),
                    **fields)
    s.add(job)
    s.flush()
    return job


def test_a_new_alert_is_held_while_bisected_then_announced_with_its_culprit(sessions: sessionmaker[Session],
                                                                            fake: FakeSlack) -> None:
    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n, benchmarks=1)
    with unit_of_work(sessions) as s:
        job = job_of(s, alert_id, "bisect", "running")
        job_id, series_id, culprit = job.id, job.series_id, job.bad_commit_sha
    assert n.deliver(alert_id).state == "held" and fake.requests == []
    with unit_of_work(sessions) as s:
        assert n.mark_verdicts(s, [series_id]) == []  # still running: no verdict owed
        ended = s.get(BisectJob, job_id)
        assert ended is not None
        ended.state, ended.culprit_sha, ended.message = "done", culprit, f"isolated {culprit[:12]} after 1 runs"
        s.flush()
        assert n.mark_verdicts(s, [series_id]) == [alert_id]
    n.send([alert_id])
    [parent] = fake.top_level()
    assert any("found the culprit" in t for t in texts(parent.blocks))
    [reply] = fake.replies(parent.ts)
    assert reply.text.startswith("Bisection of suite/k0") and culprit[:12] in reply.text
    with unit_of_work(sessions) as s:
        assert n.mark_verdicts(s, [series_id]) == []  # replied once, never again


def test_a_confirmation_of_a_range_the_finding_no_longer_has_is_not_listed(sessions: sessionmaker[Session],
                                                                           fake: FakeSlack) -> None:
    """A finding whose range narrowed keeps the confirmation of its old range in the store; the message listed it
    beside the current one ("confirmed ... +216.9 %" of the old range, "+280.3 %" of the new)."""
    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n, benchmarks=1)
    with unit_of_work(sessions) as s:
        for old_range, change in ((True, "+216.9%"), (False, "+280.3%")):
            job_of(s, alert_id, "confirm", "done", good="e" * 40 if old_range else None,
                   message=f"confirmed: head/base {change}")
        for job in s.scalars(select(BisectJob)):
            job.culprit_sha = job.bad_commit_sha
    assert n.deliver(alert_id).state == SENT
    [parent] = fake.top_level()
    shown = "\n".join(texts(parent.blocks))
    assert "+280.3%" in shown and "+216.9%" not in shown, shown


def test_an_alert_grouping_deletes_takes_its_row_along(sessions: sessionmaker[Session], fake: FakeSlack) -> None:
    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n, benchmarks=1)
    with unit_of_work(sessions) as s:
        s.execute(delete(Finding))
        outcome = group_findings(s, [], [s.scalars(select(Repository.id)).one()])
        assert outcome.deleted == [alert_id] and mark_grouped(s, outcome, CHANNEL) == []
    assert n.deliver(alert_id).state == "gone" and fake.requests == []


def test_an_announced_alert_whose_findings_vanish_is_withdrawn_in_its_thread(sessions: sessionmaker[Session],
                                                                             fake: FakeSlack) -> None:
    """A false alarm that detection no longer finds (or findings a bisection moved elsewhere): the alert was
    deleted with its notification row, and its message stood in the channel for good, still "untriaged", its
    button pointing at an alert that was gone. Now the alert stays, emptied, and its thread says why."""
    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n, benchmarks=1)
    assert n.deliver(alert_id).state == SENT
    [parent] = fake.top_level()
    with unit_of_work(sessions) as s:
        s.execute(delete(Finding))
        outcome = group_findings(s, [], [s.scalars(select(Repository.id)).one()])
        assert outcome.deleted == [] and outcome.emptied == [alert_id]
        assert mark_grouped(s, outcome, CHANNEL) == [alert_id]
    assert n.deliver(alert_id).state == SENT
    [reply] = fake.replies(parent.ts)
    assert "detection no longer finds a change at this range" in reply.text, reply.text
    assert parent.edits == 1 and any("no findings left" in t for t in texts(parent.blocks)), parent.blocks


def test_a_finding_whose_size_detection_revised_has_its_message_edited(sessions: sessionmaker[Session],
                                                                      fake: FakeSlack) -> None:
    """Re-detection on a longer history revises a change's size (+226.6 % read +404.9 % later): the message kept
    the first figure, since the finding's alert looked unchanged. Now its alert is newer than its message, and
    the notifier's sweep edits it."""
    from service.detect.types import ChangePoint
    from service.pipeline.detection import detect_series
    from service.store.models import Alert

    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n, benchmarks=1)
    assert n.deliver(alert_id).state == SENT
    [parent] = fake.top_level()
    with sessions() as s:
        finding = s.scalars(select(Finding)).one()
        series_id, commit_id, previous = finding.series_id, finding.commit_id, finding.previous_commit_id

    class Revised:
        name, version = "test", 1

        def detect(self, points: Any, polarity: Any) -> list[ChangePoint]:
            return [ChangePoint(index=1, commit_id=commit_id, previous_commit_id=previous, before=1.0, after=4.05,
                                magnitude=3.05, noise_units=20.0, kind="regression", p_value=1e-6)]

    with unit_of_work(sessions) as s:
        detect_series(s, series_id, Revised())  # type: ignore[arg-type]
    assert n.sweep() == [alert_id]
    assert parent.edits == 1 and any("+305.0%" in t for t in texts(parent.blocks)), texts(parent.blocks)
    with unit_of_work(sessions) as s:  # the same figure again: nothing newer, nothing edited
        detect_series(s, series_id, Revised())  # type: ignore[arg-type]
        assert s.get(Alert, alert_id) is not None
    assert n.sweep() == [] and parent.edits == 1


def test_in_the_distributed_form_a_notify_worker_announces_and_replies(tmp_path: Path, pg_database: str,
                                                                      fake: FakeSlack) -> None:
    from service.context import Context
    from service.pipeline.queue import CeleryQueue
    from service.settings import load_settings
    from tests.conftest import fresh_redis
    from tests.processes import start_worker

    at_head(pg_database)
    env = clean_env(tmp_path, KERNELWATCH_DATABASE_URL=pg_database,
                    KERNELWATCH_REDIS_URL=fresh_redis("redis://127.0.0.1:6379/6"), KERNELWATCH_FOLLOW_UP="none",
                    KERNELWATCH_SLACK_TOKEN=TOKEN, KERNELWATCH_SLACK_CHANNEL=CHANNEL,
                    KERNELWATCH_SLACK_API_URL=fake.url)
    ctx = Context.create(load_settings(env))
    try:
        assert isinstance(ctx.queue, CeleryQueue) and ctx.notifier is not None
        with start_worker(env, tmp_path, "detect,notify") as worker:
            for doc in builders.step_series_manifests([1e-3] * 6 + [2e-3] * 6, noise=0.002):
                submit_manifest(ctx.sessions, ctx.queue, doc)
            worker.wait_until(lambda: len(fake.top_level()) == 1, 90, "the notify task to post the alert")
            [parent] = fake.top_level()
            with unit_of_work(ctx.sessions) as s:
                alert_id = s.scalars(select(Alert.id)).one()
                triage(s, alert_id, "wontfix", "intended: trades time for accuracy", "ada")
                marked = ctx.notifier.mark_alerts(s, [alert_id])
            ctx.notifier.send(marked)  # a task on the notify queue, not a call from here
            # The edit reaches Slack before the task commits the alert's state: wait for both, or stopping the
            # worker between the two (a loaded host makes that gap long) leaves the state pending.
            worker.wait_until(lambda: parent.edits == 1 and row(ctx.sessions, alert_id).state == SENT, 60,
                              "the notify task to reply, edit and record it")
            assert [r.text for r in fake.replies(parent.ts)] == [
                "ada set the state to wontfix (was untriaged): intended: trades time for accuracy"]
        assert "kernelwatch.notify_alert" in worker.output()
        assert len(fake.top_level()) == 1 and row(ctx.sessions, alert_id).state == SENT
    finally:
        ctx.close()


def test_a_triage_nobody_marked_is_caught_by_the_sweep(sessions: sessionmaker[Session], fake: FakeSlack) -> None:
    n = notifier(sessions, fake)
    alert_id = stored_alert(sessions, n)
    n.send([alert_id])
    [parent] = fake.top_level()
    assert n.sweep() == []
    with unit_of_work(sessions) as s:  # as a face that knows nothing of Slack triages (the dashboard's form)
        triage(s, alert_id, "invalid", "noisy host", "ada")
    assert n.sweep() == [alert_id]
    [reply] = fake.replies(parent.ts)
    assert reply.text == "ada set the state to invalid (was untriaged): noisy host" and parent.edits == 1
    assert n.sweep() == []
