"""The alerts inbox in real headless Chromium: log in with a token, walk the alerts with the keyboard, triage one,
reload and find the state kept; then the commit and compare pages with their chart drawn by the local plotly.js."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.serving import make_server

from service.app import create_app
from service.context import Context
from service.pipeline.alerts import list_alerts
from service.pipeline.tokens import create_token
from service.settings import load_settings
from service.store.db import unit_of_work
from tests import builders
from tests.e2e.conftest import SCREENSHOTS, open_page
from tests.fake_http import serve_in_thread
from tests.scratch_database import at_head

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The app over a SQLite home with two alerts (a regression in each of two repositories), served over real
    HTTP from a thread, and a token that may triage."""
    home = tmp_path_factory.mktemp("home")
    database_url = f"sqlite:///{home / 'kernelwatch.db'}"
    at_head(database_url)
    settings = load_settings({"KERNELWATCH_HOME": str(home), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(settings)
    levels = [1e-3] * 5 + [1.6e-3] * 5
    for repo, seed in (("kernels", 0), ("pallas-ops", 1)):
        for doc in builders.step_series_manifests(levels, repo=repo, seed=seed):
            for run in builders.replicated(doc):  # three runs a commit: what a comparison's verdict counts
                ctx.submit(run)
    with unit_of_work(ctx.sessions) as s:
        _, token = create_token(s, "ada.park", ["triage"])
    server = make_server("127.0.0.1", 0, create_app(settings, context=ctx), threaded=True)
    serve_in_thread(server)
    try:
        yield {"base": f"http://127.0.0.1:{server.server_port}", "token": token, "ctx": ctx}
    finally:
        server.shutdown()
        ctx.close()


def test_log_in_triage_by_keyboard_and_reload(site: dict[str, Any], browser: Any) -> None:
    base = site["base"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page, foreign = open_page(browser, base)

    page.goto(f"{base}/")
    assert page.locator("tbody[data-alert]").count() == 2
    assert page.locator("form.triage").count() == 0  # nobody is logged in
    page.locator("#login-link").click()
    page.locator("input[name=token]").fill(site["token"])
    page.locator("#login button[type=submit]").click()
    page.wait_for_url(f"{base}/")
    assert "ada.park" in page.locator("header .who").inner_text()

    # j selects the first (newest) alert, j the second, k back to the first.
    alerts = page.locator("tbody[data-alert]")
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert "current" in (alerts.nth(1).get_attribute("class") or "")
    page.keyboard.press("k")
    first = alerts.nth(0)
    assert "current" in (first.get_attribute("class") or "")
    alert_id = int(first.get_attribute("data-alert") or 0)
    page.screenshot(path=str(SCREENSHOTS / "inbox.png"), full_page=True)

    # t puts the cursor in that alert's triage form; choose a state, type a note, Enter submits.
    page.keyboard.press("t")
    assert page.evaluate("() => document.activeElement.name") == "state"
    first.locator("form.triage select").select_option("acknowledged")
    first.locator("form.triage input[name=note]").fill("softmax tiling change, owner: ada")
    first.locator("form.triage input[name=note]").press("Enter")
    page.wait_for_url(f"**/#alert-{alert_id}")
    assert f"Alert {alert_id} is acknowledged" in page.locator(".flash").inner_text()
    triaged = page.locator(f"#alert-{alert_id}")
    assert "current" in (triaged.get_attribute("class") or "")  # the place is kept across the redirect
    page.screenshot(path=str(SCREENSHOTS / "inbox-triaged.png"), full_page=True)

    page.reload()
    assert page.locator(f"#alert-{alert_id} [data-state]").inner_text() == "acknowledged"
    assert page.locator(".flash").count() == 0  # said once
    with site["ctx"].sessions() as s:
        stored = next(a for a in list_alerts(s) if a.id == alert_id)
    assert stored.state == "acknowledged" and stored.notes[-1].author == "ada.park"

    # A state filter by mouse, then Enter on the selected alert opens its largest change's series.
    page.locator("#inbox-filters select[name=state]").select_option("untriaged")
    page.locator("#inbox-filters button[type=submit]").click()
    page.wait_for_url("**/?*state=untriaged*")
    assert page.locator("tbody[data-alert]").count() == 1
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url("**/series/*")
    page.wait_for_selector("#chart .main-svg")
    assert foreign == [], f"the pages asked for outside resources: {foreign}"
    page.close()


def test_commit_and_compare_pages_draw(site: dict[str, Any], browser: Any) -> None:
    base = site["base"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    culprit = builders.sha_for("kernels-5")
    page.goto(f"{base}/commits/{culprit}?repo=kernels")
    assert page.locator("#compare-table tbody tr").first.get_attribute("data-verdict") == "regression"
    page.wait_for_selector("#ratio-chart .main-svg")
    page.screenshot(path=str(SCREENSHOTS / "commit.png"), full_page=True)

    page.locator("#against a", has_text="open in compare").click()
    page.wait_for_selector("#ratio-chart .main-svg")
    assert page.locator("#geomeans tbody tr").count() == 1
    # Sorting by a header is a link: the same rows, another order, the arguments kept.
    page.locator("#compare-table th a", has_text="benchmark").click()
    page.wait_for_url("**sort=name**")
    assert "repo=kernels" in page.url
    page.screenshot(path=str(SCREENSHOTS / "compare.png"), full_page=True)

    page.goto(f"{base}/compare?base=0000&head={culprit}")
    assert "no run or commit" in page.locator("#error-message").inner_text()
    page.close()
