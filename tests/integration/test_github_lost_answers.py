"""A report whose GitHub call did its work but lost its answer (GitHub made the check run or the comment, then
answered 5xx): the report fails as Transient, and its retry finds what was made and edits it. One check run and
one comment per pull request, however the failures fall."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from service.errors import Transient
from service.integrations.github import ClientFactory
from service.pipeline.pull_requests import HookConfig, PullRequestHooks
from service.store.db import make_engine, make_session_factory, upgrade
from tests.fake_github import APP_ID, FakeGitHub, app_key_pair, serve_fake_github
from tests.pr_hook import measured_pull_requests

PRIVATE, PUBLIC = app_key_pair()


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with serve_fake_github(FakeGitHub(public_key=PUBLIC)) as server:
        yield server


@pytest.mark.parametrize("lost", ["check-runs", "comments"])
def test_a_lost_answer_is_retried_into_an_edit_not_a_second_post(sqlite_database: str, fake: FakeGitHub,
                                                                 lost: str) -> None:
    upgrade(sqlite_database)
    engine = make_engine(sqlite_database)
    try:
        sessions = make_session_factory(engine)
        [pr_id] = measured_pull_requests(sessions, 1)
        hooks = PullRequestHooks(sessions, ClientFactory(fake.url, APP_ID, PRIVATE, timeout_s=5),
                                 HookConfig(public_url="http://kw.test", check_runs=True))
        # The answer to the first creating call of that kind is lost after GitHub acted on it.
        before = fake.serve

        def serve(method: str, path: str, *args):  # type: ignore[no-untyped-def]
            if method == "POST" and path.endswith(f"/{lost}") and not fake.calls("POST", f".*/{lost}"):
                fake.lost_answers.append(500)
            return before(method, path, *args)

        fake.serve = serve  # type: ignore[method-assign]
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

