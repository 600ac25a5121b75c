"""The Diff page in Chromium: from a finding on the commit list to its two results, the kernel attribution
ranked first open, its inserted and deleted lines highlighted; nothing is fetched from outside."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runners.artifacts import ArtifactStore
from service.settings import load_settings
from service.store.db import make_engine, make_session_factory, upgrade
from tests.diff_capture import CHANGED_FUSION, capture_two_commits, store_captured
from tests.e2e.conftest import SCREENSHOTS, open_page, serve
from tests.processes import clean_env

pytestmark = pytest.mark.slow

INSERTED_BG = "rgb(230, 255, 236)"  # td.ins in base.html
DELETED_BG = "rgb(255, 235, 233)"  # td.del


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("diff") / "home"
    home.mkdir()
    manifests, _ = capture_two_commits(home)  # captures into home/artifacts, the service's own store
    settings = load_settings({"KERNELWATCH_HOME": str(home)})
    upgrade(settings.effective_database_url)
    engine = make_engine(settings.effective_database_url)
    try:
        store_captured(make_session_factory(engine), manifests, ArtifactStore(settings.artifacts_dir))
    finally:
        engine.dispose()
    yield from serve(clean_env(home))


@pytest.mark.browser
def test_a_findings_diff_link_opens_the_ranked_kernel_highlighted(dashboard: str, browser) -> None:  # type: ignore[no-untyped-def]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page, outside = open_page(browser, dashboard, 1400, 1000)
    listed = page.goto(f"{dashboard}/commits")
    if listed is not None and listed.status == 404:  # before the commit list moved from / to /commits
        page.goto(f"{dashboard}/")
    link = page.locator("tr.flagged a.finding-diff").first
    assert link.is_visible()
    link.click()
    page.wait_for_url("**/diff?**")
    assert f"kernel={CHANGED_FUSION}" in page.url

    selected = page.locator("#kernel-picker a.kernel-choice.selected")
    assert selected.count() == 1 and selected.get_attribute("data-name") == CHANGED_FUSION
    assert page.locator("#code-name").inner_text() == CHANGED_FUSION
    assert page.locator("#count-deltas").inner_text().startswith("+")

    inserted = page.locator("#listing-diff tr.row-insert td.ins")
    assert inserted.count() > 0
    assert inserted.first.evaluate("e => getComputedStyle(e).backgroundColor") == INSERTED_BG
    # The empty side of an insertion is hatched, not blank: the eye finds where the line went.
    empty = page.locator("#listing-diff tr.row-insert td.empty").first
    assert "gradient" in empty.evaluate("e => getComputedStyle(e).backgroundImage")
    removed = page.locator("#listing-diff td.del")
    if removed.count():  # a changed line's old text, or a deleted one
        assert removed.first.evaluate("e => getComputedStyle(e).backgroundColor") == DELETED_BG
    page.screenshot(path=str(SCREENSHOTS / "diff.png"), full_page=True)
    page.screenshot(path=str(SCREENSHOTS / "diff-top.png"))  # what a reader sees on arrival
    page.locator("#hlo").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "diff-hlo.png"))

    # The HLO of the same fusion: the tanh chain is inserted.
    fusion = page.locator("#fusion-diff tr.row-insert td.ins", has_text="tanh")
    assert fusion.count() > 0

    # Every line, unfolded, from the page's own link.
    page.locator("#show-all").click()
    page.wait_for_url("**full=1**")
    assert page.locator("#listing-diff tr.fold").count() == 0
    assert outside == [], f"the page asked for outside resources: {outside}"
    page.close()


def test_a_bad_diff_query_is_a_page_not_a_crash(dashboard: str, browser) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    response = page.goto(f"{dashboard}/diff?base=oops&head=1")
    assert response is not None and response.status == 400
    assert "must be a result id" in page.locator("#diff-error").inner_text()
    page.close()

