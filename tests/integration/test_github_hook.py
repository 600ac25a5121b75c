"""POST /hooks/github through the real app: signatures, redeliveries, and a fork's pull request that waits for a
maintainer, then runs (in-process, the embedded form) and is reported as a commit status and one comment."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select

from service.store.db import unit_of_work
from service.store.models import PullRequest, Run, WebhookDelivery
from tests.api_client import Api, make_api
from tests.conftest import fresh_redis
from tests.fake_github import PLAIN_TOKEN, FakeGitHub, serve_fake_github
from tests.pr_hook import REPO, SECRET, comment_event, merge_base_of, pr_event, pull, signed, tiny_repo
from tests.scratch_database import at_head

REDIS_URL = "redis://127.0.0.1:6379/3"  # this file's alone (see the other tests' REDIS_URL constants)
MARKER = "<!-- kernelwatch:pr-comment -->"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with serve_fake_github(FakeGitHub()) as server:
        yield server


def hook_env(fake: FakeGitHub, **extra: str) -> dict[str, str]:
    return {"KERNELWATCH_GITHUB_WEBHOOK_SECRET": SECRET, "KERNELWATCH_GITHUB_API_URL": fake.url,
            "KERNELWATCH_GITHUB_TOKEN": PLAIN_TOKEN, "KERNELWATCH_PR_SAMPLES": "3", "KERNELWATCH_FOLLOW_UP": "none",
            "KERNELWATCH_PUBLIC_URL": "http://kw.test", **extra}


def queued(client: redis.Redis) -> int:
    """Messages waiting on the notify queue (kombu keeps a queue as a list per priority step)."""
    return sum(int(client.llen(key)) for key in client.keys("notify*") if client.type(key) == b"list")


def deliveries(api: Api) -> int:
    with api.ctx.sessions() as session:
        return int(session.scalar(select(func.count(WebhookDelivery.id))) or 0)


@pytest.fixture
def broker_api(database_url: str, tmp_path: Path, fake: FakeGitHub) -> Iterator[tuple[Api, redis.Redis]]:
    at_head(database_url)
    api = make_api(database_url, tmp_path / "home", KERNELWATCH_REDIS_URL=fresh_redis(REDIS_URL), **hook_env(fake))
    client = redis.Redis.from_url(REDIS_URL)
    try:
        yield api, client
    finally:
        client.close()
        api.ctx.close()


def test_a_bad_or_missing_signature_is_refused_and_queues_nothing(broker_api: tuple[Api, redis.Redis]) -> None:
    api, broker = broker_api
    payload = pr_event("opened", pull("/nowhere", "a" * 40, "b" * 40))
    body, headers = signed("pull_request", payload, secret="not-the-secret")
    assert api.client.post("/hooks/github", data=body, headers=headers).status_code == 401
    missing = {k: v for k, v in headers.items() if k != "X-Hub-Signature-256"}
    assert api.client.post("/hooks/github", data=body, headers=missing).status_code == 401
    body, headers = signed("pull_request", payload)
    tampered = body.replace(b"opened", b"reopened")
    assert api.client.post("/hooks/github", data=tampered, headers=headers).status_code == 401
    foreign = {**headers, "X-Hub-Signature-256": "sha256=é"}  # a 500 before authentication
    assert api.client.post("/hooks/github", data=body, headers=foreign).status_code == 401
    assert queued(broker) == 0 and deliveries(api) == 0


def test_a_redelivery_is_queued_once(broker_api: tuple[Api, redis.Redis]) -> None:
    api, broker = broker_api
    body, headers = signed("pull_request", pr_event("opened", pull("/nowhere", "a" * 40, "b" * 40)))
    first = api.client.post("/hooks/github", data=body, headers=headers)
    assert first.status_code == 202, first.get_json()
    again = api.client.post("/hooks/github", data=body, headers=headers)
    assert again.status_code == 200 and again.get_json()["duplicate"] == headers["X-GitHub-Delivery"]
    assert queued(broker) == 1 and deliveries(api) == 1
    # The delivery id is not signed: the same signed body replayed under another id is the same delivery.
    replayed = api.client.post("/hooks/github", data=body, headers={**headers, "X-GitHub-Delivery": "replay-1"})
    assert replayed.status_code == 200 and replayed.get_json()["duplicate"] == "replay-1"
    assert queued(broker) == 1 and deliveries(api) == 1
    # Events that cannot lead anywhere are answered and not stored.
    body, headers = signed("push", {"ref": "refs/heads/main"})
    assert api.client.post("/hooks/github", data=body, headers=headers).status_code == 200
    body, headers = signed("ping", {"zen": "Keep it logically awesome."})
    assert api.client.post("/hooks/github", data=body, headers=headers).status_code == 200
    assert queued(broker) == 1 and deliveries(api) == 1


MALFORMED = [
    ("pull_request", {"action": "opened"}, "pull_request (dict)"),
    ("pull_request", {"action": "opened", "pull_request": None}, "pull_request (dict)"),
    ("pull_request", {"action": "opened", "pull_request": {"number": "abc"}}, "pull_request.number (int)"),
    ("pull_request", {"action": "opened", "pull_request": {"number": True}}, "pull_request.number (int)"),
    ("issue_comment", {"action": "created", "issue": {"pull_request": {}, "number": 7},
                       "comment": {"body": "/kernelwatch run"}}, "repository (dict)"),
    # What a runner would be handed to fetch: the delivery read "done" while its task failed in a log.
    ("pull_request", pr_event("opened", pull("/tmp/kernels", "a" * 40, "--upload-pack=touch /tmp/x")),
     "pull_request.head.sha is not a full commit sha"),
    ("pull_request", pr_event("opened", pull("ext::sh -c touch% /tmp/x", "a" * 40, "b" * 40)),
     "pull_request.base.repo.clone_url: not a repository location KernelWatch accepts"),
]


@pytest.mark.parametrize(("event", "payload", "lacks"), MALFORMED)
def test_a_signed_but_malformed_delivery_is_refused_at_the_door(broker_api: tuple[Api, redis.Redis], event: str,
                                                               payload: dict[str, object], lacks: str) -> None:
    """Issue 18: such deliveries were stored, then their handler raised (a 500 in the embedded form, a delivery
    stranded as queued in the distributed one). Now: 400 in the API's error shape, nothing stored or queued, so a
    corrected redelivery is a first delivery."""
    api, broker = broker_api
    body, headers = signed(event, payload)
    response = api.client.post("/hooks/github", data=body, headers=headers)
    assert response.status_code == 400, response.get_json()
    error = response.get_json()["error"]
    assert error["code"] == "invalid_input" and lacks in error["message"], error
    assert queued(broker) == 0 and deliveries(api) == 0


def test_a_deeply_nested_delivery_is_a_400_not_a_crash(broker_api: tuple[Api, redis.Redis]) -> None:
    api, broker = broker_api
    body = ('{"action": "opened", "pull_request": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()
    _, headers = signed("pull_request", {})
    headers["X-Hub-Signature-256"] = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    response = api.client.post("/hooks/github", data=body, headers=headers)
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "invalid_input"
    assert deliveries(api) == 0


def post(api: Api, event: str, payload: dict[str, object], status: int = 202) -> None:
    body, headers = signed(event, payload)
    response = api.client.post("/hooks/github", data=body, headers=headers)
    assert response.status_code == status, response.get_json()


def pr_row(api: Api) -> PullRequest:
    with api.ctx.sessions() as session:
        return session.scalars(select(PullRequest)).one()


def forget(api: Api, comment_id: bool = False) -> None:
    """As if the last report had not been stored (and, with ``comment_id``, nor the comment's id)."""
    with unit_of_work(api.ctx.sessions) as session:
        pr = session.scalars(select(PullRequest)).one()
        pr.reported_key = None
        if comment_id:
            pr.comment_id = None


@pytest.mark.slow
def test_a_fork_waits_for_a_maintainer_then_runs_and_reports(sqlite_database: str, tmp_path: Path,
                                                             fake: FakeGitHub) -> None:
    root = tmp_path / "kernels"
    shas = tiny_repo(root)
    fork = pull(str(root), shas["main_tip"], shas["head"], head_repo="mallory/kernels")
    fake.merge_base = merge_base_of(root)
    fake.pulls[(REPO, 7)] = fork
    fake.permissions.update({(REPO, "maintainer"): "maintain", (REPO, "reader"): "read"})
    at_head(sqlite_database)
    api = make_api(sqlite_database, tmp_path / "home", **hook_env(fake))  # embedded: the work runs in-process
    try:
        post(api, "pull_request", pr_event("opened", fork))
        assert pr_row(api).state == "waiting"
        post(api, "pull_request", pr_event("labeled", fork, label={"name": "bug"}), status=200)  # not the label
        post(api, "issue_comment", comment_event(7, "reader", "/kernelwatch run please"))
        post(api, "issue_comment", comment_event(7, "stranger", "/kernelwatch run"))
        assert pr_row(api).state == "waiting"
        assert not fake.calls("GET", r".*/compare/.*") and not fake.statuses
        with api.ctx.sessions() as session:
            assert session.scalar(select(func.count(Run.id))) == 0, "a fork's code ran before anyone allowed it"

        # A maintainer's command: GitHub is asked for the merge-base, both commits run, and the result is posted.
        post(api, "issue_comment", comment_event(7, "maintainer", "Looks fine.\n/kernelwatch run"))
        [compare_call] = fake.calls("GET", r".*/compare/.*")
        assert compare_call.path.endswith(f"{shas['main_tip']}...{shas['head']}")
        pr = pr_row(api)
        assert (pr.state, pr.merge_base_sha, pr.approved_sha) == ("running", shas["fork_point"], shas["head"])
        with api.ctx.sessions() as session:
            triggers = session.execute(select(Run.trigger, Run.branch, Run.pr_number)).all()
            # The task's runs are the session the scheduling named (with several hardware the report waits for
            # each one's: test_github_check_runs.py).
            assert set(session.scalars(select(Run.round_session))) == set(pr.sessions or ["none named"])
        # KERNELWATCH_PR_ROUNDS' default: four runs a side, neither labelled with a branch (measured with the pull
        # request's suite, the merge-base's runs stay out of main's history).
        assert sorted(triggers, key=str) == sorted([("pr", None, 7)] * 8, key=str)
        # Pending while the runs went (an old verdict must not stand meanwhile), then the verdict.
        pending, status = fake.statuses
        assert (pending["sha"], pending["state"], pending["context"]) == (shas["head"], "pending", "kernelwatch")
        assert shas["fork_point"][:12] in pending["description"]
        assert status["sha"] == shas["head"] and status["context"] == "kernelwatch"
        assert status["state"] in ("success", "failure")
        assert status["target_url"] == (f"http://kw.test/compare?base={shas['fork_point']}&head={shas['head']}"
                                        f"&repo=kernels")
        [comment] = fake.comments.values()
        assert comment["body"].startswith(MARKER) and "tiny/scale n=1024" in comment["body"]

        # Reporting again with nothing new posts nothing; a comment id that was never stored (a report that
        # failed after posting) is found again by the marker; a comment someone deleted is replaced.
        hooks = api.ctx.pull_requests
        assert hooks is not None
        seen = len(fake.requests)
        assert hooks.report(pr.id) == "already reported" and len(fake.requests) == seen
        forget(api, comment_id=True)
        hooks.report(pr.id)
        assert len(fake.comments) == 1 and len(fake.calls("POST", r".*/issues/7/comments")) == 1
        fake.comments.clear()
        forget(api)
        hooks.report(pr.id)
        assert len(fake.comments) == 1 and len(fake.calls("POST", r".*/issues/7/comments")) == 2

        # New code pushed to the fork needs a new approval: nothing runs, nothing is posted.
        seen = len(fake.requests)
        moved = pull(str(root), shas["main_tip"], "c" * 40, head_repo="mallory/kernels")
        post(api, "pull_request", pr_event("synchronize", moved))
        assert pr_row(api).state == "waiting" and len(fake.requests) == seen
    finally:
        api.ctx.close()
