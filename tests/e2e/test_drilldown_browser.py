"""The drill-down pages in real headless Chromium, over a real captured run: charts drawn with the local
plotly.js, nothing fetched from elsewhere, and a ``<script>`` line of a dump shown as text, never run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from werkzeug.serving import make_server

from service.app import create_app
from service.context import Context
from service.settings import load_settings
from service.store.models import Result, Series
from tests.drilldown_data import HOSTILE, captured_run, drilldown_manifest
from tests.e2e.conftest import SCREENSHOTS, open_page
from tests.fake_http import serve_in_thread
from tests.scratch_database import at_head

pytestmark = pytest.mark.browser
SASS_KERNEL = "_ZN4cute14wgmma_mainloopILi128EEEvPK13__nv_bfloat16Pf"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """The app over a SQLite home holding the run, served over real HTTP from a thread; (base URL, result id)."""
    home = tmp_path_factory.mktemp("home")
    manifest, store = captured_run(tmp_path_factory.mktemp("captured"))
    database_url = f"sqlite:///{home / 'kernelwatch.db'}"
    at_head(database_url)
    settings = load_settings({"KERNELWATCH_HOME": str(home), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(settings)
    for result in manifest["results"]:
        for ref in result["artifacts"]:
            store.copy_to(ctx.artifacts, ref["sha256"])
    ctx.submit(drilldown_manifest(manifest, ctx.artifacts))
    with ctx.sessions() as s:
        result_id = s.scalars(select(Result.id).join(Series).where(Series.metric == "wall_time")).one()
    server = make_server("127.0.0.1", 0, create_app(settings, context=ctx), threaded=True)
    serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_port}", result_id
    finally:
        server.shutdown()
        ctx.close()


def open_watched_page(browser: Any, base: str) -> tuple[Any, list[str], list[str]]:
    page, foreign = open_page(browser, base)
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:  # alert() from dump text would land here
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return page, foreign, dialogs


def no_script_ran(page: Any) -> bool:
    return bool(page.evaluate("() => window.__pwned === undefined"))


def test_drilldown_pages_render_and_never_run_dump_text(site: tuple[str, int], browser: Any) -> None:
    base, rid = site
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page, foreign, dialogs = open_watched_page(browser, base)

    page.goto(f"{base}/results/{rid}")
    page.wait_for_selector("#op-chart .main-svg")
    page.wait_for_selector("#roofline .main-svg")
    assert HOSTILE in page.locator("#result-meta").inner_text()  # the commit subject, shown literally
    assert no_script_ran(page)
    assert page.locator("#ops tbody tr").count() >= 3
    assert "are not known" in page.locator("#roofline-note").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "drilldown-result.png"), full_page=True)

    page.click("#hlo-link")
    page.wait_for_url(f"{base}/results/{rid}/hlo")
    first = page.locator("details.fusion").first
    assert first.get_attribute("id") == "fusion-broadcast_multiply_fusion"  # the slowest fusion on top
    first.locator("summary").click()
    assert first.locator(".fusion-body pre").count() > 3
    page.goto(f"{base}/results/{rid}/hlo?text=1")
    hostile_line = page.locator("details.module-text pre", has_text=HOSTILE)
    assert hostile_line.count() == 1 and HOSTILE in hostile_line.inner_text()
    assert no_script_ran(page)
    page.screenshot(path=str(SCREENSHOTS / "drilldown-hlo.png"), full_page=True)

    page.goto(f"{base}/results/{rid}")
    page.locator("#kernels a", has_text="broadcast_multiply_fusion").click()
    page.wait_for_selector("#listing")
    assert page.locator("#kernel-name").inner_text() == "broadcast_multiply_fusion"
    assert page.locator("#listing tr.in-loop").count() > 0
    page.screenshot(path=str(SCREENSHOTS / "drilldown-kernel-x86.png"), full_page=True)

    page.goto(f"{base}/results/{rid}/kernels/synthetic_form_a?isa=tpu-llo")
    assert page.locator("#listing tbody tr").count() == 12
    assert page.locator("#listing td.empty-slot").count() > 0
    page.screenshot(path=str(SCREENSHOTS / "drilldown-kernel-llo.png"), full_page=True)

    page.goto(f"{base}/results/{rid}/kernels/{SASS_KERNEL}?isa=sass-sm_90a")
    assert page.locator("#listing tbody tr").count() > 10
    page.screenshot(path=str(SCREENSHOTS / "drilldown-kernel-sass.png"), full_page=True)

    assert not foreign, foreign
    assert not dialogs, dialogs
    for name in ("result", "hlo", "kernel-x86", "kernel-llo", "kernel-sass"):
        assert (SCREENSHOTS / f"drilldown-{name}.png").stat().st_size > 10_000


def test_series_points_open_their_result(site: tuple[str, int], browser: Any) -> None:
    base, rid = site
    page, foreign, _ = open_watched_page(browser, base)
    page.goto(f"{base}/results/{rid}")
    page.click("#series-link")
    page.wait_for_selector("#chart .main-svg")
    # The captured run's kernels (x86, and the LLO and SASS attached) and its error: two companion panels.
    names = page.evaluate("""() => document.getElementById("chart").data.map((t) => t.name)""")
    assert names[:2] == ["samples", "median"] and "tpu-llo bundles" in names and names[-1] == "max abs error"
    assert page.locator("#chart .subplot.x2y2").count() == 1 and page.locator("#chart .subplot.x3y3").count() == 1
    page.screenshot(path=str(SCREENSHOTS / "series-companions.png"), full_page=True)
    # A click on a median point, as plotly reports it, opens the point's result.
    page.evaluate("""() => document.getElementById("chart").emit("plotly_click",
        {points: [{customdata: document.getElementById("chart").data[1].customdata[0]}]})""")
    page.wait_for_url(f"{base}/results/{rid}")
    page.go_back()
    page.locator("#latest-results a.result-link").first.click()
    page.wait_for_url(f"{base}/results/{rid}")
    assert not foreign, foreign



def test_the_timeline_draws_the_trace_with_the_op_highlighted(site: tuple[str, int], browser: Any) -> None:
    """From an op's row to its timeline: bars drawn with the local plotly.js, the op's own bars in red."""
    base, rid = site
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page, foreign, dialogs = open_watched_page(browser, base)
    page.goto(f"{base}/results/{rid}")
    page.locator('#ops tr[data-op="broadcast_multiply_fusion"] a.op-timeline').click()
    page.wait_for_selector("#timeline .main-svg")
    assert page.url.endswith(f"/results/{rid}/trace?op=broadcast_multiply_fusion")
    fills = page.evaluate("""() => [...document.querySelectorAll('#timeline g.trace.bars')].map(
        g => [...g.querySelectorAll('path')].map(p => getComputedStyle(p).fill))""")
    assert len(fills) == 2 and fills[1] and set(fills[1]) == {"rgb(214, 39, 40)"}, fills  # the highlight's red
    assert fills[0] and "rgb(214, 39, 40)" not in set(fills[0])
    assert page.locator("#op-select").input_value() == "broadcast_multiply_fusion"
    assert "op execution" in page.locator("#timeline-summary").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "drilldown-timeline.png"), full_page=True)
    assert not foreign and not dialogs and no_script_ran(page)
