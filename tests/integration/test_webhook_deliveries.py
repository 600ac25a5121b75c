"""Issue 18, items 4 and 7, as the embedded server runs them (follow-up work on its background thread,
service/pipeline/background.py), against a fake GitHub on 127.0.0.1 that can be slow or rate-limited.

- A request answers when its data is stored: an upload whose follow-up (a pull-request report) waits on GitHub is
  answered 201 while GitHub has not answered; a webhook delivery is answered 202 while its handler waits.
- A delivery whose handling keeps failing is retried, then dead-lettered (state ``failed``), visible on the API
  and in `kernelwatch deliveries`, and handed out again on request; never left ``queued`` for ever.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from service.pipeline.background import BackgroundQueue
from service.store import deliveries
from service.store.db import unit_of_work
from service.store.models import WebhookDelivery
from tests import builders
from tests.api_client import Api, error_of, make_api
from tests.fake_github import PLAIN_TOKEN, FakeGitHub, serve_fake_github
from tests.pr_hook import SECRET, measured_pull_requests, pr_event, pull, signed
from tests.scratch_database import at_head

RATE_LIMITED = (429, {"Retry-After": "3600"})  # the client gives up at once: no sleeps inside one attempt


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with serve_fake_github(FakeGitHub()) as server:
        yield server


def hook_env(fake: FakeGitHub) -> dict[str, str]:
    return {"KERNELWATCH_GITHUB_WEBHOOK_SECRET": SECRET, "KERNELWATCH_GITHUB_API_URL": fake.url,
            "KERNELWATCH_GITHUB_TOKEN": PLAIN_TOKEN, "KERNELWATCH_PR_ROUNDS": "1", "KERNELWATCH_PR_SAMPLES": "3",
            "KERNELWATCH_FOLLOW_UP": "none", "KERNELWATCH_PUBLIC_URL": "http://kw.test"}


@pytest.fixture
def served(database_url: str, tmp_path: Path, fake: FakeGitHub) -> Iterator[Api]:
    """The app as `kernelwatch serve` builds it in the embedded form, with retries a test can wait for."""
    at_head(database_url)
    api = make_api(database_url, tmp_path / "home", background=True, **hook_env(fake))
    assert isinstance(api.ctx.queue, BackgroundQueue)
    api.ctx.queue.retry_delays_s = (0.05,) * (deliveries.DELIVERY_ATTEMPTS - 1)
    try:
        yield api
    finally:
        api.ctx.close()


def queue_of(api: Api) -> BackgroundQueue:
    assert isinstance(api.ctx.queue, BackgroundQueue)
    return api.ctx.queue


def admin(api: Api) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.tokens['admin']}"}


def opened(number: int = 7) -> tuple[bytes, dict[str, str]]:
    # A same-repository pull request at a clone URL nothing is at: once handled, its suite runs fail at once.
    return signed("pull_request", pr_event("opened", pull("/nowhere/kernels", "a" * 40, "b" * 40, number=number)))


def test_an_upload_is_answered_when_stored_while_its_follow_up_waits_on_github(served: Api,
                                                                               fake: FakeGitHub) -> None:
    """Before: the embedded server ran the follow-up inside the request (a maximum-size run answered after
    195 s, stored after 5). Here the follow-up (the pull request's report) is held at GitHub; the upload must
    be answered, and readable, while GitHub still has not answered."""
    measured_pull_requests(served.ctx.sessions, 1)
    head = builders.manifest(1, [builders.result()], repo="kernels")  # the tracked pull request's head commit
    fake.hold = threading.Event()
    try:
        response = served.client.post("/api/v1/runs", data=json.dumps(head), content_type="application/json",
                                      headers={"Authorization": f"Bearer {served.tokens['submit']}"})
        assert response.status_code == 201, response.get_json()
        assert fake.answered == 0  # nothing the follow-up asked of GitHub has been answered yet
        assert served.client.get(f"/api/v1/runs/{head['run_id']}").status_code == 200  # stored, readable
        health = served.client.get("/api/v1/health").get_json()
        assert health["follow_up"]["pending"] >= 1, health
        fake.wait_for(lambda: len(fake.requests) >= 1, 60, "the report to reach GitHub")
    finally:
        fake.hold.set()
    assert queue_of(served).drain(120)
    assert fake.comments or fake.statuses, [f"{r.method} {r.path}" for r in fake.requests]
    health = served.client.get("/api/v1/health").get_json()
    assert health["follow_up"]["pending"] == 0 and health["follow_up"]["failed"] == 0, health


def test_a_delivery_is_answered_before_its_handler_reaches_github(served: Api, fake: FakeGitHub) -> None:
    fake.hold = threading.Event()
    try:
        body, headers = opened()
        response = served.client.post("/hooks/github", data=body, headers=headers)
        assert response.status_code == 202, response.get_json()
        assert fake.answered == 0
        fake.wait_for(lambda: len(fake.requests) >= 1, 60, "the handler to ask GitHub for the merge-base")
    finally:
        fake.hold.set()
    assert queue_of(served).drain(120)
    [view] = served.client.get("/api/v1/github/deliveries", headers=admin(served)).get_json()["deliveries"]
    assert view["state"] == "done" and view["attempts"] == 1 and "running merge-base" in view["outcome"], view


def test_a_failing_delivery_is_retried_then_handled(served: Api, fake: FakeGitHub) -> None:
    fake.failures = [RATE_LIMITED, RATE_LIMITED]  # two attempts meet a rate limit, the third gets through
    body, headers = opened()
    assert served.client.post("/hooks/github", data=body, headers=headers).status_code == 202
    assert queue_of(served).drain(120)
    [view] = served.client.get("/api/v1/github/deliveries", headers=admin(served)).get_json()["deliveries"]
    assert view["state"] == "done" and view["attempts"] == 3, view
    assert "rate limit" in view["last_error"], view


def test_a_delivery_that_keeps_failing_is_dead_lettered_visible_and_retried_on_request(
        served: Api, fake: FakeGitHub, database_url: str, tmp_path: Path) -> None:
    fake.failures = [RATE_LIMITED] * deliveries.DELIVERY_ATTEMPTS
    body, headers = opened()
    assert served.client.post("/hooks/github", data=body, headers=headers).status_code == 202
    assert queue_of(served).drain(120)
    assert len(fake.requests) == deliveries.DELIVERY_ATTEMPTS  # tried exactly that often, then left alone

    listing = served.client.get("/api/v1/github/deliveries?state=failed", headers=admin(served))
    [view] = listing.get_json()["deliveries"]
    assert view["state"] == "failed" and view["attempts"] == deliveries.DELIVERY_ATTEMPTS, view
    assert view["outcome"].startswith(f"dead-lettered after {deliveries.DELIVERY_ATTEMPTS} attempts"), view
    assert "payload" not in view
    assert served.client.get("/api/v1/github/deliveries?state=done", headers=admin(served)).get_json() == {
        "deliveries": []}
    # Admin only, and its arguments checked like every other read's.
    triage = {"Authorization": f"Bearer {served.tokens['triage']}"}
    assert error_of(served.client.get("/api/v1/github/deliveries", headers=triage))["code"] == "forbidden"
    assert error_of(served.client.get("/api/v1/github/deliveries?state=lost", headers=admin(served)))[
        "code"] == "invalid_input"
    # A redelivery of the same id from GitHub stays a duplicate: the retry is the service's own.
    assert served.client.post("/hooks/github", data=body, headers=headers).get_json()["duplicate"]

    # The CLI shows it, on the same database.
    cli = subprocess.run([sys.executable, "-m", "service.cli", "deliveries", "--state", "failed"],
                         capture_output=True, text=True, timeout=120, check=False,
                         env={"PATH": "/usr/bin:/bin", "KERNELWATCH_HOME": str(tmp_path / "cli"),
                              "KERNELWATCH_DATABASE_URL": database_url})
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert "failed" in cli.stdout and "dead-lettered after" in cli.stdout and headers["X-GitHub-Delivery"] in cli.stdout

    # GitHub is back: retried on request, it is handled with a fresh count.
    retried = served.client.post(f"/api/v1/github/deliveries/{view['id']}/retry", headers=admin(served))
    assert retried.status_code == 202, retried.get_json()
    assert queue_of(served).drain(120)
    [after] = served.client.get("/api/v1/github/deliveries", headers=admin(served)).get_json()["deliveries"]
    assert after["state"] == "done" and after["attempts"] == 1 and "running merge-base" in after["outcome"], after
    again = served.client.post(f"/api/v1/github/deliveries/{view['id']}/retry", headers=admin(served))
    assert again.status_code == 409 and "handled" in error_of(again)["message"]
    missing = served.client.post("/api/v1/github/deliveries/999999/retry", headers=admin(served))
    assert missing.status_code == 404


def test_a_delivery_whose_handler_was_lost_is_handed_out_again_or_dead_lettered(served: Api) -> None:
    """A worker killed mid-task, or a server stopped with work pending, leaves a delivery queued: the sweep
    (beat, or the next embedded server's start) hands it out again, and after DELIVERY_ATTEMPTS stops gives up."""
    long_ago = datetime.now(UTC) - 2 * deliveries.STALE_AFTER
    with unit_of_work(served.ctx.sessions) as session:
        for uid, attempts in (("lost-once", 1), ("lost-often", deliveries.DELIVERY_ATTEMPTS), ("fresh", 1)):
            session.add(WebhookDelivery(delivery_uid=uid, event="pull_request", payload={}, state="queued",
                                        received_at=long_ago, attempts=attempts,
                                        attempted_at=datetime.now(UTC) if uid == "fresh" else long_ago))
    lost = deliveries.stale(served.ctx.sessions)
    with served.ctx.sessions() as session:
        states = {d.delivery_uid: (d.id, d.state) for d in session.scalars(select(WebhookDelivery))}
    assert lost == [states["lost-once"][0]]
    assert states["lost-often"][1] == "failed" and states["fresh"][1] == "queued"
    assert deliveries.stale(served.ctx.sessions) == []  # its clock restarted: not handed out twice
    # The next embedded server (the only handler there is) hands out everything still queued.
    assert sorted(deliveries.stale(served.ctx.sessions, older_than=timedelta(0))) == sorted(
        [states["lost-once"][0], states["fresh"][0]])


def test_the_webhook_of_the_synchronous_form_still_answers_503_and_leaves_it_received(
        database_url: str, tmp_path: Path, fake: FakeGitHub) -> None:
    """The test client's synchronous queue (the CLI's form): a handler that fails is a 503 and the delivery stays
    ``received`` with its error recorded, so GitHub's redelivery (or a retry) hands it out again."""
    at_head(database_url)
    api = make_api(database_url, tmp_path / "home", **hook_env(fake))
    try:
        fake.failures = [RATE_LIMITED]
        body, headers = opened()
        response = api.client.post("/hooks/github", data=body, headers=headers)
        assert response.status_code == 503 and error_of(response)["code"] == "unavailable"
        with api.ctx.sessions() as session:
            [row] = session.scalars(select(WebhookDelivery)).all()
            assert row.state == "received" and row.attempts == 1 and "rate limit" in (row.last_error or "")
        assert api.client.post("/hooks/github", data=body, headers=headers).status_code == 202  # redelivered
        with api.ctx.sessions() as session:
            assert session.scalars(select(WebhookDelivery.state)).one() == "done"
    finally:
        api.ctx.close()
