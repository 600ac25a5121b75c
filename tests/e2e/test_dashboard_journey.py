"""A kernel engineer's way through the dashboard on the demo's data, in Chromium: the inbox, the planted
regression's alert, its series chart, the diff page with the fusion attribution ranked first already open and
its changed instructions marked, then triage from the inbox (logged in with a token), kept across a reload.
Screenshots of each page land in test-output/screenshots/journey-*.png."""

from __future__ import annotations

import re
import subprocess
import sys
from urllib.parse import parse_qs, urlparse

import pytest

from tests.e2e.conftest import SCREENSHOTS, open_page

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def triage_token(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-m", "service.cli", "token", "create", "journey", "--scope", "triage"],
                         env=env, capture_output=True, text=True, timeout=120, check=True).stdout
    [token] = [line.strip() for line in out.splitlines() if line.strip().startswith("kw_")]
    return token


def test_inbox_to_series_to_diff_then_triage(demo: dict, dashboard: str, browser) -> None:  # type: ignore[no-untyped-def,type-arg]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    planted = demo["planted"]
    page, outside = open_page(browser, dashboard, 1400, 1000)
    ran: list[str] = []
    page.on("dialog", lambda d: (ran.append(d.message), d.dismiss()))

    # 1. The inbox: the planted commit's alert is there, a regression.
    page.goto(f"{dashboard}/")
    alert = page.locator("tbody.alert", has=page.locator(f'a.commit-link[title="{planted}"]'))
    assert alert.count() == 1, page.content()[:3000]
    alert_id = alert.get_attribute("data-alert")
    page.screenshot(path=str(SCREENSHOTS / "journey-1-inbox.png"), full_page=True)

    # 2. Its largest change opens the series chart, the step marked.
    alert.locator("a.finding").first.click()
    page.wait_for_url(re.compile(r"/series/\d+"))
    page.wait_for_selector(".js-plotly-plot .main-svg")
    page.screenshot(path=str(SCREENSHOTS / "journey-2-series.png"), full_page=True)

    # 3. Back in the inbox, the finding's diff link: the kernel attribution ranked first is open, and the code
    #    that changed is marked line by line.
    page.goto(f"{dashboard}/")
    alert = page.locator(f"tbody#alert-{alert_id}")
    alert.locator("a.finding-diff").first.click()
    page.wait_for_url(re.compile(r"/diff\?"))
    chosen = parse_qs(urlparse(page.url).query).get("kernel", [""])[0]
    assert chosen, f"the finding's diff link preselected no kernel: {page.url}"
    selected = page.locator("#kernel-picker a.kernel-choice.selected")
    assert selected.count() == 1 and page.locator("#code-name").inner_text() == chosen
    changed = page.locator("#listing-diff td.ins, #listing-diff td.del")
    assert changed.count() > 0, "no inserted or deleted instruction is marked"
    assert page.locator("#count-deltas").inner_text().strip()
    page.screenshot(path=str(SCREENSHOTS / "journey-3-diff.png"), full_page=True)

    # 4. Triage needs a login; a token with the triage scope gives one.
    page.goto(f"{dashboard}/login?next=/")
    page.fill("input[name=token]", triage_token(demo["env"]))
    page.click("form button[type=submit]")
    page.wait_for_url(re.compile(r"/(\?.*)?$"))
    form = page.locator(f"tbody#alert-{alert_id} form.triage")
    form.locator("select[name=state]").select_option("acknowledged")
    form.locator("input[name=note]").fill("mine: the streaming normaliser, reverting")
    form.locator("button[type=submit]").click()
    page.wait_for_load_state()

    # 5. Reloaded, the state and the note are kept.
    page.reload()
    badge = page.locator(f"tbody#alert-{alert_id} .badge[data-state]")
    assert badge.get_attribute("data-state") == "acknowledged"
    assert "reverting" in (page.locator(f"tbody#alert-{alert_id} details.notes").text_content() or "")
    page.screenshot(path=str(SCREENSHOTS / "journey-4-triaged.png"), full_page=True)
    assert not outside, f"the pages reached outside the dashboard: {outside[:5]}"
    assert not ran, f"a dialog opened: {ran}"
    page.close()
