"""The GitHub transport against the fake GitHub server: app JWT → installation token, retries of 5xx only, rate
limits waited out or handed back, the marker search over pages of comments; and the webhook signature check."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator

import pytest

from service.hooks.github import signature_ok
from service.integrations.github import ClientFactory, GitHubClient, GitHubError, GitHubUnavailable, TokenAuth
from tests.fake_github import APP_ID, PLAIN_TOKEN, FakeGitHub, app_key_pair, serve_fake_github

REPO = "acme/kernels"
PRIVATE, PUBLIC = app_key_pair()


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with serve_fake_github(FakeGitHub(public_key=PUBLIC)) as server:
        yield server


def client(fake: FakeGitHub, slept: list[float] | None = None) -> GitHubClient:
    return GitHubClient(fake.url, TokenAuth(PLAIN_TOKEN), timeout_s=5,
                        sleep=(slept.append if slept is not None else lambda s: None))


def test_an_app_buys_an_installation_token_with_its_jwt_and_reuses_it(fake: FakeGitHub) -> None:
    factory = ClientFactory(fake.url, APP_ID, PRIVATE)
    factory(REPO, None).create_comment(REPO, 1, "one")  # no installation named: looked up with the JWT
    factory(REPO, fake.installation_id).create_comment(REPO, 1, "two")
    assert len(fake.calls("GET", "/repos/acme/kernels/installation")) == 1
    assert len(fake.calls("POST", r"/app/installations/\d+/access_tokens")) == 1
    posts = fake.calls("POST", "/repos/acme/kernels/issues/1/comments")
    assert [p.authorization for p in posts] == [posts[0].authorization] * 2
    assert posts[0].authorization.startswith("Bearer ghs_installation_")


def test_a_wrong_key_is_refused(fake: FakeGitHub) -> None:
    other_private, _ = app_key_pair()
    with pytest.raises(GitHubError) as refused:
        ClientFactory(fake.url, APP_ID, other_private)(REPO, fake.installation_id).create_comment(REPO, 1, "x")
    assert refused.value.status == 401


def test_5xx_is_retried_with_backoff_and_4xx_is_not(fake: FakeGitHub) -> None:
    slept: list[float] = []
    mine = client(fake).create_comment(REPO, 1, "first")
    fake.failures = [(502, {}), (503, {})]
    client(fake, slept).update_comment(REPO, mine, "after two failures")
    assert len(fake.calls("PATCH", f"/repos/acme/kernels/issues/comments/{mine}")) == 3
    assert slept == [0.5, 1.0] and fake.comments[mine]["body"] == "after two failures"
    fake.failures = [(422, {})]
    with pytest.raises(GitHubError) as refused:
        client(fake).update_comment(REPO, mine, "refused")
    assert refused.value.status == 422
    assert len(fake.calls("PATCH", f"/repos/acme/kernels/issues/comments/{mine}")) == 4  # once: no retry


def test_a_creating_call_is_not_repeated_after_a_5xx_since_github_may_have_acted(fake: FakeGitHub) -> None:
    """GitHub made the comment, then answered 500: a repeat would post it twice. The failure goes back to the
    caller (whose retry finds the comment by its marker); exactly one POST, one comment."""
    fake.lost_answers = [("POST", r".*/comments", 500)]
    with pytest.raises(GitHubUnavailable, match="not repeated"):
        client(fake).create_comment(REPO, 1, "made once")
    assert len(fake.calls("POST", "/repos/acme/kernels/issues/1/comments")) == 1
    assert [c["body"] for c in fake.comments.values()] == ["made once"]
    fake.lost_answers = [("POST", r".*/check-runs", 502)]
    with pytest.raises(GitHubUnavailable):
        client(fake).create_check_run(REPO, {"name": "KernelWatch", "head_sha": "b" * 40, "external_id": "9"})
    assert len(fake.check_runs) == 1
    assert client(fake).find_check_run(REPO, "b" * 40, "KernelWatch", "9") == next(iter(fake.check_runs))
    assert client(fake).find_check_run(REPO, "b" * 40, "KernelWatch", "10") is None
    assert client(fake).find_check_run(REPO, "c" * 40, "KernelWatch", "9") is None


def test_a_creating_call_is_repeated_when_it_never_arrived() -> None:
    """Connection refused proves GitHub never saw the request: repeating it cannot make anything twice."""
    from tests.private_servers import free_port

    slept: list[float] = []
    nobody = GitHubClient(f"http://127.0.0.1:{free_port()}", TokenAuth(PLAIN_TOKEN), timeout_s=2,
                          sleep=slept.append)
    with pytest.raises(GitHubUnavailable, match="unreachable"):
        nobody.create_comment(REPO, 1, "x")
    assert slept == [0.5, 1.0, 2.0]  # all four attempts


def test_persistent_5xx_becomes_transient(fake: FakeGitHub) -> None:
    fake.failures = [(500, {})] * 4
    with pytest.raises(GitHubUnavailable):
        client(fake).update_comment(REPO, 1, "x")


def test_a_short_rate_limit_is_waited_out_and_a_long_one_handed_back(fake: FakeGitHub) -> None:
    slept: list[float] = []
    fake.failures = [(429, {"Retry-After": "3"})]
    client(fake, slept).create_status(REPO, "a" * 40, {"state": "success"})
    assert 3.0 in slept and len(fake.statuses) == 1
    fake.failures = [(403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "9999999999"})]
    with pytest.raises(GitHubUnavailable) as later:
        client(fake).create_status(REPO, "a" * 40, {"state": "success"})
    assert later.value.retry_after_s is not None and later.value.retry_after_s > 60


def test_the_marker_is_found_on_a_later_page(fake: FakeGitHub) -> None:
    api = client(fake)
    for i in range(130):
        api.create_comment(REPO, 5, f"chatter {i}")
    mine = api.create_comment(REPO, 5, "<!-- kernelwatch:pr-comment -->\nresults")
    assert api.find_comment(REPO, 5, "<!-- kernelwatch:pr-comment -->") == mine
    assert api.find_comment(REPO, 6, "<!-- kernelwatch:pr-comment -->") is None
    assert api.permission(REPO, "stranger") == "none"


def test_signature_check() -> None:
    body = b'{"action":"opened"}'
    good = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert signature_ok("s3cret", body, good)
    assert not signature_ok("s3cret", body + b" ", good)
    assert not signature_ok("other", body, good)
    assert not signature_ok("s3cret", body, None)
    assert not signature_ok("s3cret", body, good.removeprefix("sha256="))
    assert not signature_ok("", body, good)
    assert not signature_ok("s3cret", body, "sha256=é")  # compare_digest refused a non-ASCII str: a 500


def test_redirects_are_followed_for_reads_on_github_s_own_host_only(fake: FakeGitHub) -> None:
    """GitHub moves a renamed repository's calls with a 301 on its own host: a read follows it. A redirect to another
    host is reported, and nothing reaches that host (urllib would send the Authorization header along); a redirected
    write is reported too (urllib would replay it as a GET without its body, and the creation would read as done)."""
    api = client(fake)
    mine = api.create_comment(REPO, 5, "<!-- kernelwatch:pr-comment -->\nresults")
    fake.failures = [(301, {"Location": "/repos/acme/kernels/issues/5/comments?per_page=100&page=1&moved=1"})]
    assert api.find_comment(REPO, 5, "<!-- kernelwatch:pr-comment -->") == mine
    [moved] = [c for c in fake.calls("GET", "/repos/acme/kernels/issues/5/comments") if "moved" in c.query]
    assert moved.authorization  # followed on its own host, credentials and all

    with serve_fake_github(FakeGitHub(public_key=PUBLIC)) as elsewhere:
        fake.failures = [(301, {"Location": f"{elsewhere.url}/repos/acme/kernels/issues/5/comments"})]
        with pytest.raises(GitHubError, match="not followed") as refused:
            api.find_comment(REPO, 5, "<!-- kernelwatch:pr-comment -->")
        assert refused.value.status == 301 and elsewhere.requests == []
    for status in (302, 307):  # urllib replays a 302'd POST as a GET (which lists the comments: "done")
        fake.failures = [(status, {"Location": f"{fake.url}/repos/acme/kernels/issues/5/comments"})]
        with pytest.raises(GitHubError, match="not followed"):
            api.create_comment(REPO, 5, "second")
    assert [c["body"] for c in fake.comments.values()] == ["<!-- kernelwatch:pr-comment -->\nresults"]
