"""The pull-request hook in the distributed form: a signed webhook into the app, real Celery workers (notify and
a CPU runner) on Redis and PostgreSQL, real runs of a tiny repository's merge-base and head, and the fake GitHub
receiving a check run (as a GitHub App: JWT, installation token) and one comment, which a second push updates
in place."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.store.db import upgrade
from tests.api_client import Api, make_api
from tests.conftest import fresh_redis
from tests.fake_github import APP_ID, FakeGitHub, app_key_pair, serve_fake_github
from tests.pr_hook import SECRET, merge_base_of, pr_event, pull, push_to_feature, signed, tiny_repo
from tests.processes import ServiceProcess, clean_env, start_worker

REDIS_URL = "redis://127.0.0.1:6379/4"  # this file's alone (see the other tests' REDIS_URL constants)
MARKER = "<!-- kernelwatch:pr-comment -->"
CHECK_RUNS = r"/repos/acme/kernels/check-runs"
COMMENTS = r"/repos/acme/kernels/issues/7/comments"


@pytest.fixture
def workers() -> Iterator[list[ServiceProcess]]:
    started: list[ServiceProcess] = []
    yield started
    for process in started:
        process.stop()


def deliver(api: Api, event: str, payload: dict[str, object]) -> None:
    body, headers = signed(event, payload)
    response = api.client.post("/hooks/github", data=body, headers=headers)
    assert response.status_code == 202, response.get_json()


@pytest.mark.slow
def test_a_pull_request_is_run_and_reported_and_a_push_updates_the_same_comment(
        tmp_path: Path, pg_database: str, workers: list[ServiceProcess]) -> None:
    root = tmp_path / "kernels"
    shas = tiny_repo(root)
    private, public = app_key_pair()
    with serve_fake_github(FakeGitHub(public_key=public, merge_base=merge_base_of(root))) as fake:
        settings = {"KERNELWATCH_DATABASE_URL": pg_database, "KERNELWATCH_REDIS_URL": fresh_redis(REDIS_URL),
                    "KERNELWATCH_GITHUB_WEBHOOK_SECRET": SECRET, "KERNELWATCH_GITHUB_API_URL": fake.url,
                    "KERNELWATCH_GITHUB_APP_ID": APP_ID, "KERNELWATCH_GITHUB_APP_PRIVATE_KEY": private,
                    "KERNELWATCH_PR_HARDWARE": "cpu", "KERNELWATCH_PR_SAMPLES": "3",
                    # Two runs a side, not the default four (test_github_hook.py proves those): what is proven here is
                    # the path through Celery, and each run is a benchmark process on a busy host.
                    "KERNELWATCH_PR_ROUNDS": "2",
                    "KERNELWATCH_FOLLOW_UP": "none", "KERNELWATCH_PUBLIC_URL": "http://kw.test"}
        upgrade(pg_database)
        home = tmp_path / "home"
        env = clean_env(home, **settings)
        workers.append(start_worker(env, tmp_path / "logs", "ingest,detect,notify", name="worker"))
        workers.append(start_worker(env, tmp_path / "logs", "runner.cpu", name="runner"))
        api = make_api(pg_database, home, **settings)
        try:
            opened = pull(str(root), shas["main_tip"], shas["head"])
            deliver(api, "pull_request", pr_event("opened", opened))
            fake.wait_for(lambda: bool(fake.calls("POST", CHECK_RUNS)) and bool(fake.calls("POST", COMMENTS)),
                          180, "the first check run and comment")
            [check] = fake.check_runs.values()
            assert check["head_sha"] == shas["head"] and check["status"] == "completed"
            # A microsecond kernel whose head fuses two tanh into it: decided either way, or undecided (neutral)
            # when its two runs a side cannot tell; completed, whichever.
            assert check["conclusion"] in ("success", "failure", "neutral")
            assert "tiny/scale n=1024" in check["output"]["summary"]
            assert check["details_url"].startswith(f"http://kw.test/compare?base={shas['fork_point']}")
            [comment] = fake.comments.values()
            assert comment["body"].startswith(MARKER) and shas["head"][:12] in comment["body"]
            # The app authenticated as GitHub asks: a JWT bought the installation token every call carried.
            assert fake.calls("POST", r"/app/installations/77/access_tokens")
            assert all(r.authorization.startswith("Bearer ghs_installation_")
                       for r in fake.requests if r.path.startswith("/repos/"))

            # A second push: the same comment is edited, never a second one posted; the new head gets its check.
            new_head = push_to_feature(root, depth=4)
            deliver(api, "pull_request", pr_event("synchronize", pull(str(root), shas["main_tip"], new_head)))
            fake.wait_for(lambda: any(c["head_sha"] == new_head for c in fake.check_runs.values())
                          and new_head[:12] in comment["body"], 180, "the second push's report")
            assert len(fake.calls("POST", COMMENTS)) == 1
            assert len(fake.calls("PATCH", r"/repos/acme/kernels/issues/comments/\d+")) >= 1
            assert len(fake.comments) == 1
            assert sorted(c["head_sha"] for c in fake.check_runs.values()) == sorted([shas["head"], new_head])
        finally:
            api.ctx.close()
