"""The pull request's check run through its life, and GitHub calls that did their work but lost their answer
(GitHub made the check run or the comment, then answered 5xx): the report fails as Transient, and its retry
finds what was made and edits it. One check run per scheduling and one comment per pull request, however the
failures fall."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from kernelwatch.errors import Transient
from runners.artifacts import ArtifactStore
from service.contract import parse_manifest
from service.detect.series_detector import EDivisiveDetector
from service.integrations.github import ClientFactory
from service.pipeline.ingest import ingest_manifest
from service.pipeline.jobs import JobEnv, run_suite
from service.pipeline.pull_requests import HookConfig, PullRequestHooks, record_delivery
from service.pipeline.queue import InProcessQueue
from service.report.pr_comment import MARKER
from service.store.db import make_engine, make_session_factory, unit_of_work
from service.store.models import PullRequest
from tests import builders
from tests.fake_github import APP_ID, PLAIN_TOKEN, FakeGitHub, app_key_pair, serve_fake_github
from tests.pr_hook import REPO, comment_event, measured_pull_requests, pr_event, pull
from tests.scratch_database import at_head

PRIVATE, PUBLIC = app_key_pair()


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with serve_fake_github(FakeGitHub(public_key=PUBLIC)) as server:
        yield server


@pytest.mark.parametrize("lost", ["check-runs", "comments"])
def test_a_lost_answer_is_retried_into_an_edit_not_a_second_post(sqlite_database: str, fake: FakeGitHub,
                                                                 lost: str) -> None:
    at_head(sqlite_database)
    engine = make_engine(sqlite_database)
    try:
        sessions = make_session_factory(engine)
        [pr_id] = measured_pull_requests(sessions, 1)
        hooks = PullRequestHooks(sessions, ClientFactory(fake.url, APP_ID, PRIVATE, timeout_s=5),
                                 HookConfig(public_url="http://kw.test", check_runs=True, rounds=1))
        # The answer to the first creating call of that kind is lost after GitHub acted on it.
        fake.lost_answers.append(("POST", f".*/{lost}", 500))
        with pytest.raises(Transient, match="500"):
            hooks.report(pr_id)
        hooks.report(pr_id)  # the task's retry
        assert len(fake.check_runs) == 1 and len(fake.comments) == 1
        assert len(fake.calls("POST", r".*/check-runs")) == 1
        assert len(fake.calls("POST", r".*/issues/\d+/comments")) == 1
        [check] = fake.check_runs.values()
        assert check["conclusion"] in ("success", "failure", "neutral") and check["external_id"] == str(pr_id)
        if lost == "check-runs":  # the retry found the check run by its external id and completed it
            assert fake.calls("PATCH", r".*/check-runs/\d+")
        assert hooks.report(pr_id) == "already reported"
    finally:
        engine.dispose()



def test_each_scheduling_shows_a_check_run_in_progress_that_its_report_completes(sqlite_database: str,
                                                                                 fake: FakeGitHub) -> None:
    """Opened: a check run in progress at once (an old verdict must not stand while new runs go), completed by
    the report. Run again: GitHub cannot take a completed check run back to in progress, so a new one; the old
    keeps its verdict. Its in-progress answer lost: the report finds it by its external id. Closed while
    running: cancelled, not left spinning."""
    at_head(sqlite_database)
    engine = make_engine(sqlite_database)
    try:
        sessions = make_session_factory(engine)
        with unit_of_work(sessions) as s:
            for position in range(2):
                ingest_manifest(s, parse_manifest(builders.manifest(position, [builders.result()], repo="kernels")))
        pull_request = pull("file:///tmp/kernels", builders.sha_for("kernels-0"), builders.sha_for("kernels-1"))
        hooks = PullRequestHooks(sessions, ClientFactory(fake.url, APP_ID, PRIVATE, timeout_s=5),
                                 HookConfig(public_url="http://kw.test", check_runs=True, rounds=1))

        def deliver(action: str, **extra: object) -> None:
            delivery = record_delivery(sessions, str(uuid.uuid4()), "pull_request",
                                       pr_event(action, pull_request, **extra))
            assert delivery is not None
            hooks.handle_delivery(delivery, lambda runs: None)

        def states() -> list[tuple[str, str | None]]:
            return [(c["status"], c.get("conclusion")) for c in sorted(fake.check_runs.values(),
                                                                        key=lambda c: c["id"])]

        deliver("opened")
        with sessions() as s:
            pr = s.scalars(select(PullRequest)).one()
        assert states() == [("in_progress", None)]
        [first] = fake.check_runs.values()
        assert first["external_id"] == str(pr.id) and first["head_sha"] == pull_request["head"]["sha"]
        assert pr.check_run_id == first["id"]
        hooks.report(pr.id)
        [(status, verdict)] = states()
        assert status == "completed" and verdict in ("success", "failure", "neutral")

        deliver("labeled", label={"name": "kernelwatch:run"})  # run again, same head
        assert states() == [("completed", verdict), ("in_progress", None)]
        hooks.report(pr.id)
        assert states() == [("completed", verdict), ("completed", verdict)]

        fake.lost_answers.append(("POST", r".*/check-runs", 500))  # the third check run is made, its answer lost
        deliver("labeled", label={"name": "kernelwatch:run"})
        with sessions() as s:
            assert s.get(PullRequest, pr.id).check_run_id is None  # type: ignore[union-attr]
        assert states()[-1] == ("in_progress", None)
        hooks.report(pr.id)
        assert states() == [("completed", verdict)] * 3

        deliver("labeled", label={"name": "kernelwatch:run"})
        deliver("closed")
        assert states() == [("completed", verdict)] * 3 + [("completed", "cancelled")]
    finally:
        engine.dispose()


def test_a_run_that_cannot_be_made_completes_the_check_run_as_failed_with_the_reason(
        sqlite_database: str, fake: FakeGitHub, tmp_path: Path) -> None:
    """The runner's task failed (here: the clone URL names no repository): no run will come in to report, so the
    check run in progress was left spinning for good. The job that ran the task now has it completed as failed,
    and the comment says why; once per reason, and nothing for a pull request that has moved on."""
    at_head(sqlite_database)
    engine = make_engine(sqlite_database)
    try:
        sessions = make_session_factory(engine)
        clone_url = str(tmp_path / "gone")  # no such repository on this host
        pull_request = pull(clone_url, builders.sha_for("kernels-0"), builders.sha_for("kernels-1"))
        hooks = PullRequestHooks(sessions, ClientFactory(fake.url, APP_ID, PRIVATE, timeout_s=5),
                                 HookConfig(public_url="http://kw.test", check_runs=True, rounds=1))
        scheduled: list[Any] = []
        delivery = record_delivery(sessions, str(uuid.uuid4()), "pull_request", pr_event("opened", pull_request))
        assert delivery is not None
        hooks.handle_delivery(delivery, scheduled.extend)
        [order] = scheduled
        [started] = fake.check_runs.values()
        assert started["status"] == "in_progress"

        env = JobEnv(sessions, EDivisiveDetector(), ArtifactStore(tmp_path / "artifacts"), home=tmp_path / "home",
                     pull_requests=hooks)
        with pytest.raises(Exception, match="gone"):
            run_suite(env, InProcessQueue(env), "task-1", order.kwargs)
        [check] = fake.check_runs.values()  # the same check run, completed
        assert (check["status"], check["conclusion"]) == ("completed", "failure"), check
        assert "could not be made" in check["output"]["summary"] and "gone" in check["output"]["summary"]
        [comment] = fake.comments.values()
        assert "could not be made" in comment["body"] and "/kernelwatch run" in comment["body"]

        seen = len(fake.requests)
        assert hooks.run_failed(clone_url, 7, pull_request["head"]["sha"], "another reason") != "already reported"
        assert hooks.run_failed(clone_url, 7, pull_request["head"]["sha"], "another reason") == "already reported"
        # A build's whole output: the check run, as public as the comment, shows its last line, fenced (it carried
        # the whole message raw, a runner's paths and '#' lines as headings).
        hooks.run_failed(clone_url, 7, pull_request["head"]["sha"], "# /home/runner/secret-path\n`make` failed: 2")
        [check] = fake.check_runs.values()
        assert "secret-path" not in check["output"]["summary"]
        assert "\n```\n`make` failed: 2\n```\n" in check["output"]["summary"], check["output"]["summary"]
        assert hooks.run_failed(clone_url, 7, "e" * 40, "an older head's task") == \
            "nothing to report: the pull request has moved on"
        assert len(fake.comments) == 1 and len(fake.check_runs) == 1 and len(fake.requests) > seen
    finally:
        engine.dispose()


def opened_on_two_hardware(sessions: Any, fake: FakeGitHub) -> tuple[PullRequestHooks, dict[str, Any], list[Any], int]:
    """A pull request opened on a hook of the CPU and H200 queues: the hooks, the pull request, its two scheduled
    runs (one task per hardware) and its stored id."""
    pull_request = pull("file:///tmp/kernels", builders.sha_for("kernels-0"), builders.sha_for("kernels-1"))
    hooks = PullRequestHooks(sessions, ClientFactory(fake.url, APP_ID, PRIVATE, timeout_s=5),
                             HookConfig(hardware=("cpu", "h200"), public_url="http://kw.test", rounds=1))
    scheduled: list[Any] = []
    delivery = record_delivery(sessions, str(uuid.uuid4()), "pull_request", pr_event("opened", pull_request))
    assert delivery is not None
    hooks.handle_delivery(delivery, scheduled.extend)
    with sessions() as s:
        return hooks, pull_request, scheduled, s.scalars(select(PullRequest)).one().id


def land(sessions: Any, task_id: str, device_kind: str) -> None:
    """A task's runs as its runner uploads them: both commits, one round, a session named after the task
    (runners/worker.py)."""
    with unit_of_work(sessions) as s:
        for position in range(2):
            ingest_manifest(s, parse_manifest(builders.manifest(
                position, [builders.result()], repo="kernels", trigger="pr", branch=None, pr_number=7,
                environment=builders.environment(device_kind=device_kind), round={"session": task_id, "index": 0})))


def test_a_pull_request_on_two_hardware_is_reported_when_both_have_run(sqlite_database: str,
                                                                         fake: FakeGitHub) -> None:
    """Measured on the CPU and the H200 queues: the CPU's runs alone completed the check run as a success while
    the H200's task had not run. Each hardware's task is now a session the scheduling names, and the report waits
    for every one."""
    at_head(sqlite_database)
    engine = make_engine(sqlite_database)
    try:
        sessions = make_session_factory(engine)
        hooks, _, scheduled, pr_id = opened_on_two_hardware(sessions, fake)
        assert [run.hardware for run in scheduled] == ["cpu", "h200"]
        assert len({run.task_id for run in scheduled}) == 2 and None not in {run.task_id for run in scheduled}
        land(sessions, scheduled[0].task_id, "cpu")
        assert hooks.report(pr_id) == "waiting for 1 of 2 hardware's runs"
        [check] = fake.check_runs.values()
        assert check["status"] == "in_progress" and not fake.comments
        land(sessions, scheduled[1].task_id, "h200-host")
        assert hooks.report(pr_id) in ("success", "failure", "neutral")
        [check] = fake.check_runs.values()
        assert check["status"] == "completed" and len(fake.comments) == 1
    finally:
        engine.dispose()


@pytest.mark.parametrize("failed_first", [True, False])
def test_a_hardware_whose_runs_failed_is_reported_beside_the_others_verdict(sqlite_database: str, fake: FakeGitHub,
                                                                          failed_first: bool) -> None:
    """Measured on the CPU and the H200 queues, the H200's task failing: its failure completed the check run and
    the CPU's verdict was never posted (the report waited for the H200's runs until `/kernelwatch run`). Now the
    report posts the CPU's rows with the H200 said not measured, and why; the check fails."""
    at_head(sqlite_database)
    engine = make_engine(sqlite_database)
    try:
        sessions = make_session_factory(engine)
        hooks, pull_request, scheduled, pr_id = opened_on_two_hardware(sessions, fake)
        cpu_task, h200_task = (run.task_id for run in scheduled)
        clone_url, head = pull_request["head"]["repo"]["clone_url"], pull_request["head"]["sha"]

        def land_cpu() -> str:
            land(sessions, cpu_task, "cpu")
            return hooks.report(pr_id)

        def fail_h200() -> str:
            return hooks.run_failed(clone_url, 7, head, "building the environment\nuv: jaxlib==9.9 not found",
                                    h200_task)

        if failed_first:
            assert fail_h200() == "h200's runs could not be made; the head has no runs yet"
            [check] = fake.check_runs.values()
            assert check["status"] == "in_progress" and not fake.comments
            posted = land_cpu()
        else:
            assert land_cpu() == "waiting for 1 of 2 hardware's runs"
            # GitHub made the comment and lost its answer: the job's retry still posts (it was "already reported").
            fake.lost_answers.append(("POST", r".*/issues/\d+/comments", 500))
            with pytest.raises(Transient, match="500"):
                fail_h200()
            posted = fail_h200()
        assert posted.endswith("failure"), posted
        [check] = fake.check_runs.values()
        assert (check["status"], check["conclusion"]) == ("completed", "failure"), check
        assert check["output"]["title"].startswith("not measured on h200: its runs could not be made; ")
        [comment] = fake.comments.values()
        body = comment["body"]
        assert "**Not measured on h200**: its runs could not be made:\n\n```\nuv: jaxlib==9.9 not found\n```" in body
        assert "building the environment" not in body  # the last line alone: the comment is public
        assert "| suite/" in body or "<details>" in body, body  # the CPU's rows are there
        assert fail_h200() == "h200's runs could not be made; already reported" and len(fake.comments) == 1

        # `/kernelwatch run` schedules both again: the failure is of the scheduling before.
        rerun = record_delivery(sessions, str(uuid.uuid4()), "pull_request",
                                pr_event("labeled", pull_request, label={"name": "kernelwatch:run"}))
        assert rerun is not None
        hooks.handle_delivery(rerun, scheduled.extend)
        assert [run.hardware for run in scheduled] == ["cpu", "h200", "cpu", "h200"]
        with sessions() as s:
            assert s.get(PullRequest, pr_id).failed_sessions is None  # type: ignore[union-attr]
    finally:
        engine.dispose()


def test_a_delivery_older_than_the_one_acted_on_takes_the_pull_request_nowhere(sqlite_database: str,
                                                                                fake: FakeGitHub) -> None:
    """A push to B, then to C, and B's delivery retried (or arriving late) after C's: it took the pull request back
    to B, and C's check run stayed in progress for good. GitHub's updated_at orders the events."""
    at_head(sqlite_database)
    engine = make_engine(sqlite_database)
    try:
        sessions = make_session_factory(engine)
        hooks = PullRequestHooks(sessions, ClientFactory(fake.url, APP_ID, PRIVATE, timeout_s=5),
                                 HookConfig(public_url="http://kw.test", check_runs=True, rounds=1))
        at_b = {**pull("file:///tmp/kernels", "a" * 40, "b" * 40), "updated_at": "2026-12-07T10:00:00Z"}
        at_c = {**pull("file:///tmp/kernels", "a" * 40, "c" * 40), "updated_at": "2026-12-07T10:05:00Z"}

        def deliver(event: dict[str, Any]) -> str:
            delivery = record_delivery(sessions, str(uuid.uuid4()), "pull_request", event)
            assert delivery is not None
            return hooks.handle_delivery(delivery, lambda runs: None)

        deliver(pr_event("synchronize", at_c))
        late = deliver(pr_event("synchronize", at_b))
        assert "is older than the one acted on" in late, late
        with sessions() as s:
            pr = s.scalars(select(PullRequest)).one()
        assert (pr.head_sha, pr.state) == ("c" * 40, "running")
        assert [c["head_sha"] for c in fake.check_runs.values()] == ["c" * 40]  # none made for B

        # A newer event still moves it; one without a time (an old delivery stored before) is acted on.
        newer = {**pull("file:///tmp/kernels", "a" * 40, "d" * 40), "updated_at": "2026-12-07T10:06:00Z"}
        assert "running" in deliver(pr_event("synchronize", newer))
        # C's check run, whose runs never reported, is not left spinning on C: cancelled, said superseded.
        by_head = {c["head_sha"]: c for c in fake.check_runs.values()}
        assert (by_head["c" * 40]["status"], by_head["c" * 40]["conclusion"]) == ("completed", "cancelled")
        assert by_head["c" * 40]["output"]["title"] == "Superseded" and by_head["d" * 40]["status"] == "in_progress"

        # A close retried after the newer push does not close the pull request (nor cancel D's check run).
        deliver(pr_event("closed", {**at_c, "state": "closed"}))
        with sessions() as s:
            assert s.scalars(select(PullRequest)).one().state == "running"
        assert {c["head_sha"]: c["status"] for c in fake.check_runs.values()}["d" * 40] == "in_progress"
        # A rerun of the same head before its runs reported cancels the check run it replaces.
        deliver(pr_event("labeled", {**newer, "updated_at": "2026-12-07T10:07:00Z"}, label={"name": "kernelwatch:run"}))
        at_d = [c for c in fake.check_runs.values() if c["head_sha"] == "d" * 40]
        assert sorted((c["status"], c.get("conclusion")) for c in at_d) == [("completed", "cancelled"),
                                                                            ("in_progress", None)]

        # `/kernelwatch run` on a pull request that is closed runs nothing.
        fake.pulls[(REPO, 7)] = {**newer, "state": "closed"}
        fake.permissions[(REPO, "maintainer")] = "maintain"
        delivery = record_delivery(sessions, str(uuid.uuid4()), "issue_comment", comment_event(7, "maintainer",
                                                                                                "/kernelwatch run"))
        assert delivery is not None
        assert "it is closed" in hooks.handle_delivery(delivery, lambda runs: None)
    finally:
        engine.dispose()


@pytest.mark.parametrize("auth", ["app", "token"])
def test_a_comment_someone_else_wrote_with_the_marker_is_never_taken_for_ours(sqlite_database: str,
                                                                             fake: FakeGitHub, auth: str) -> None:
    """Anyone can write the marker into a comment; the report edited the first one found, so the verdict appeared
    under their name, theirs to edit after."""
    at_head(sqlite_database)
    engine = make_engine(sqlite_database)
    try:
        sessions = make_session_factory(engine)
        [pr_id] = measured_pull_requests(sessions, 1)
        with sessions() as s:
            pr = s.get(PullRequest, pr_id)
            assert pr is not None
            issue = (pr.repository, pr.number)
        planted = {"id": 1, "body": f"{MARKER}\nnothing to see", "issue": issue,
                   "user": {"login": "mallory", "type": "User"}}
        fake.comments[1] = dict(planted)
        # Another app's bot quoting the marker (a workflow echoing it) is not this app either.
        other_bot = {"id": 2, "body": f"{MARKER}\nfrom a workflow", "issue": issue,
                     "user": {"login": "github-actions[bot]", "type": "Bot"},
                     "performed_via_github_app": {"id": 15368}}
        fake.comments[2] = dict(other_bot)
        factory = (ClientFactory(fake.url, APP_ID, PRIVATE, timeout_s=5) if auth == "app"
                   else ClientFactory(fake.url, token=PLAIN_TOKEN, timeout_s=5))
        hooks = PullRequestHooks(sessions, factory, HookConfig(public_url="http://kw.test", check_runs=auth == "app",
                                                               rounds=1))
        hooks.report(pr_id)
        assert fake.comments[1] == planted and fake.comments[2] == other_bot  # untouched
        [ours] = [c for c in fake.comments.values() if c["id"] not in (1, 2)]
        assert ours["body"].startswith(MARKER) and ours["user"]["login"] != "mallory"
        # Its id forgotten (a report that failed after posting), ours is found again by the marker, not hers.
        with unit_of_work(sessions) as s:
            row = s.get(PullRequest, pr_id)
            assert row is not None
            row.comment_id, row.reported_key = None, None
        hooks.report(pr_id)
        assert fake.comments[1] == planted and len(fake.comments) == 3
        if auth == "token":
            # A token that may not read its own user takes no comment for its own: a new one, never hers.
            fake.user_forbidden = True
            with unit_of_work(sessions) as s:
                row = s.get(PullRequest, pr_id)
                assert row is not None
                row.comment_id, row.reported_key = None, None
            hooks2 = PullRequestHooks(sessions, ClientFactory(fake.url, token=PLAIN_TOKEN, timeout_s=5),
                                      HookConfig(public_url="http://kw.test", check_runs=False, rounds=1))
            hooks2.report(pr_id)
            assert fake.comments[1] == planted and len(fake.comments) == 4
    finally:
        engine.dispose()
