"""Faults of the outside services the product talks to: Slack and GitHub down, then rate limiting."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from service.store.db import make_engine, make_session_factory, unit_of_work
from tests import builders
from tests.faults.harness import (
    Outcome,
    Plan,
    faults_database,
)

# --- Slack -----------------------------------------------------------------------------------------------------


class ScaledClock:
    """Now, moving ``scale`` times faster than the wall from its start: a backoff of minutes passes in seconds."""

    def __init__(self, scale: float) -> None:
        self.scale, self.start = scale, datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.start + (datetime.now(UTC) - self.start) * self.scale


def _alerts(sessions: Any, notifier: Any, count: int, first: int = 0) -> list[int]:
    """``count`` alerts, each of one repository's two-commit series with a finding at its second commit."""
    from service.contract import parse_manifest
    from service.pipeline.alerts import group_findings
    from service.pipeline.ingest import ingest_manifest
    from service.store.models import Commit, Finding, Repository, Series

    ids = []
    for a in range(first, first + count):
        repo = f"faults-{a}"
        with unit_of_work(sessions) as s:
            for p in range(2):
                ingest_manifest(s, parse_manifest(builders.manifest(p, [builders.result(suite="s", name="k")],
                                                                    repo=repo)))
        with unit_of_work(sessions) as s:
            repo_id = s.scalars(select(Repository.id).where(Repository.name == repo)).one()
            commits = {c.position: c.id for c in s.scalars(select(Commit).where(Commit.repository_id == repo_id))}
            series_id = s.scalars(select(Series.id).where(Series.repository_id == repo_id)).one()
            finding = Finding(series_id=series_id, commit_id=commits[1], previous_commit_id=commits[0],
                              detector="faults", detector_version=1, kind="time", direction="regression",
                              magnitude=0.1, confidence=10.0, value_before=1.0, value_after=1.1,
                              created_at=datetime.now(UTC), attribution={})
            s.add(finding)
            s.flush()
            outcome = group_findings(s, [finding.id])
            ids.extend(notifier.mark_grouped(s, outcome))
    return ids


def slack_500_429(plan: Plan) -> Outcome:
    """The fake Slack answers 500 for the first half of ``fault_s`` and 429 (Retry-After: 2) for the second,
    while ``runs`` new alerts are announced. Deliveries as the notify worker makes them (``deliver`` at once,
    then the sweep every half second, standing in for the task's retries and the beat's sweep), with the
    notifier's clock ``clock_scale`` times the wall's, so that its 30 s, 60 s... backoff fits a short window."""
    from service.integrations.slack import SlackClient
    from service.pipeline.notify import FAILED, PENDING, SENT, SlackNotifier
    from service.store.models import AlertNotification
    from tests.fake_slack import TOKEN, running_fake_slack

    out, started = Outcome("slack-500-429"), time.monotonic()
    with faults_database() as db, running_fake_slack() as fake:
        engine = make_engine(db)
        sessions = make_session_factory(engine)
        notifier = SlackNotifier(sessions=sessions, sender=SlackClient(TOKEN, fake.url, timeout_s=5, max_wait_s=3),
                                 channel="#perf-alerts", public_url="https://kw.example.com",
                                 clock=ScaledClock(plan.clock_scale))

        def states() -> dict[int, tuple[str, str | None]]:
            with sessions() as s:
                return {r.alert_id: (r.state, r.last_error) for r in s.scalars(select(AlertNotification))}

        # New alerts keep coming through the whole fault, each delivered at once as the notify task does: the
        # first half of them meets the 500s, the second half the 429s.
        fake.fail_with(500)
        start = time.monotonic()
        fault_ends = start + plan.fault_s
        alert_ids: list[int] = []
        first_try: dict[int, tuple[str, str | None]] = {}
        switched = healed = False
        deadline = fault_ends + 600 / max(1.0, plan.clock_scale) + 30
        while time.monotonic() < deadline:
            now = time.monotonic()
            if not switched and now >= start + plan.fault_s / 2:
                fake.fail_with(None)
                fake.rate_limit(10**9, retry_after=2)
                switched = True
            if not healed and now >= fault_ends:
                fake.rate_limit(0)
                healed = True
            if len(alert_ids) < plan.runs and now >= start + plan.fault_s * len(alert_ids) / plan.runs:
                [alert_id] = _alerts(sessions, notifier, 1, len(alert_ids))
                alert_ids.append(alert_id)
                notifier.deliver(alert_id)
                if time.monotonic() < fault_ends:  # a delivery that waited out the end of the fault is not one
                    first_try[alert_id] = states()[alert_id]
                continue
            notifier.sweep()
            if healed and len(alert_ids) == plan.runs and all(st == SENT for st, _ in states().values()):
                break
            time.sleep(0.2)
        final = states()
        posted = [r for r in fake.calls("chat.postMessage", ok_only=True) if r.body.get("thread_ts") is None]
        engine.dispose()
    statuses = sorted({r.status for r in fake.requests})
    out.submitted = len(alert_ids)
    out.stored = sum(1 for state, _ in final.values() if state == SENT)
    out.duplicates = max(0, len(posted) - len(alert_ids))
    out.lost = out.submitted - out.stored
    out.visible = bool(first_try) and all(state in (PENDING, FAILED) and error for state, error in first_try.values())
    out.recovered = out.stored == out.submitted
    out.notes.append(f"Slack answered {statuses}; {len(fake.requests)} calls, {len(posted)} top-level posts; "
                     f"{len(first_try)} alert(s) first tried during the fault; notifier clock x{plan.clock_scale:g}")
    if out.visible is False:
        out.notes.append(f"states after the first try: {sorted(set(st for st, _ in first_try.values()))}")
    out.wall_s = time.monotonic() - started
    return out


# --- GitHub ----------------------------------------------------------------------------------------------------


def _flaky_github_class() -> Any:
    from tests.fake_github import FakeGitHub, Recorded

    @dataclass
    class FlakyGitHub(FakeGitHub):
        """The fake GitHub, down for ``fault_s`` from the moment a check run has been created: 500 for the first
        half, 429 with Retry-After: 1 for the second. The outage so begins in the middle of a report (its check
        run posted, its comment not yet), where a retried report could post a second check run."""

        fault_s: float = 0.0
        window: tuple[float, float] | None = None

        def serve(self, method: str, path: str, query: dict[str, list[str]], auth: str,
                  body: Any) -> tuple[int, Any, dict[str, str]]:
            now = time.monotonic()
            if self.window is not None and self.window[0] <= now < self.window[1]:
                with self._lock:
                    self.requests.append(Recorded(method, path, query, auth, body))
                if now < (self.window[0] + self.window[1]) / 2:
                    return 500, {"message": "injected outage"}, {}
                return 429, {"message": "injected: API rate limit exceeded"}, {"Retry-After": "1"}
            answer = super().serve(method, path, query, auth, body)
            if (self.window is None and self.fault_s > 0 and method == "POST" and path.endswith("/check-runs")
                    and answer[0] < 300):
                self.window = (now, now + self.fault_s)
            return answer

    return FlakyGitHub


def github_500_429(plan: Plan) -> Outcome:
    """``runs`` pull requests reported as the report task does (``PullRequestHooks.report``, a Transient
    error retried after ``github_backoff``, the job's own backoff), as a GitHub App (check runs and one
    comment each), while the fake GitHub is down for ``fault_s`` from the first check run on."""
    from kernelwatch.errors import Transient
    from service.integrations.github import ClientFactory
    from service.pipeline.jobs import github_backoff
    from service.pipeline.pull_requests import HookConfig, PullRequestHooks
    from service.store.models import PullRequest
    from tests.fake_github import APP_ID, app_key_pair, serve_fake_github
    from tests.pr_hook import measured_pull_requests

    out, started = Outcome("github-500-429"), time.monotonic()
    private, public = app_key_pair()
    with faults_database() as db, serve_fake_github(_flaky_github_class()(public_key=public,
                                                                           fault_s=plan.fault_s)) as fake:
        engine = make_engine(db)
        sessions = make_session_factory(engine)
        hooks = PullRequestHooks(sessions, ClientFactory(fake.url, APP_ID, private, timeout_s=5),
                                 HookConfig(public_url="http://kw.test", check_runs=True, rounds=1))
        pr_ids = measured_pull_requests(sessions, plan.runs)
        due = {pr_id: time.monotonic() for pr_id in pr_ids}
        retries = dict.fromkeys(pr_ids, 0)
        errors: dict[int, str] = {}
        deadline = time.monotonic() + plan.fault_s + 400
        while due and time.monotonic() < deadline:
            for pr_id, at in sorted(due.items(), key=lambda item: item[1]):
                if at > time.monotonic():
                    continue
                try:
                    hooks.report(pr_id)
                    del due[pr_id]
                except Transient as exc:
                    errors.setdefault(pr_id, str(exc))
                    due[pr_id] = time.monotonic() + github_backoff(exc, retries[pr_id])
                    retries[pr_id] += 1
            time.sleep(0.2)
        with sessions() as s:
            reported = {pr.id for pr in s.scalars(select(PullRequest)) if pr.reported_key is not None}
            heads = {pr.id: (pr.head_sha, pr.number) for pr in s.scalars(select(PullRequest))}
        engine.dispose()
    checks = [run["head_sha"] for run in fake.check_runs.values()]
    comments = [c["issue"][1] for c in fake.comments.values()]
    out.submitted = len(pr_ids)
    out.stored = sum(1 for pr_id in pr_ids if pr_id in reported and checks.count(heads[pr_id][0]) >= 1
                     and comments.count(heads[pr_id][1]) >= 1)
    out.duplicates = sum(max(0, checks.count(sha) - 1) + max(0, comments.count(number) - 1)
                         for sha, number in heads.values())
    out.lost = out.submitted - out.stored
    # A failed report shows on its pull request: not marked reported (so it is tried again), the task's error
    # naming GitHub's answer.
    out.visible = bool(errors) and all("500" in e or "rate limit" in e for e in errors.values())
    out.recovered = not due
    out.notes.append(f"{len(errors)} report(s) failed at first and were retried; {len(fake.requests)} GitHub "
                     f"calls; {len(checks)} check run(s), {len(comments)} comment(s) for {len(pr_ids)} pull requests")
    if out.duplicates:
        out.notes.append("a report whose check run was posted before GitHub failed posts another check run on "
                         "its retry: PullRequestHooks.report rolls back the check_run_id it had just stored")
    out.wall_s = time.monotonic() - started
    return out
