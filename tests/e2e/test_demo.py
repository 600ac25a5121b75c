"""The demo end to end: real commits, real JAX runs, the planted regression flagged and shown in Chromium; then a
kernel engineer's way through the dashboard on its data (the journey at the end). One file, so that the parallel
suite (pytest-xdist, --dist loadfile) makes the demo's data once."""

from __future__ import annotations

import re
import subprocess
import sys
from urllib.parse import parse_qs, urlparse

import pytest
from sqlalchemy import select

from service.model.result_roofline import ABOVE_ROOF_TOLERANCE
from service.store.db import make_engine, make_session_factory
from service.store.models import Result, Run, Series
from service.store.queries import all_findings
from tests.cli_inprocess import run_cli
from tests.e2e.conftest import SCREENSHOTS, open_page

# timing: its verdicts come from real runs, so it runs alone, not beside the parallel tests (Makefile).
pytestmark = [pytest.mark.slow, pytest.mark.timing]


def test_demo_makes_enough_real_commits(demo: dict) -> None:  # type: ignore[type-arg]
    assert len(demo["commits"]) >= 8


def test_no_result_of_the_demo_is_above_its_roof(demo: dict) -> None:  # type: ignore[type-arg]
    """The demo's host calibrates (the cache-aware roofline, runners/calibrate.py): every wall-time result is
    placed against the memory roof of its working set's level and none beats it, beyond the tolerance the
    ingest allows for measurement noise (ABOVE_ROOF_TOLERANCE)."""
    engine = make_engine(str(demo["db"]))
    try:
        with make_session_factory(engine)() as s:
            walls = list(s.scalars(select(Result).join(Series).where(Series.metric == "wall_time")))
            calibrations = [r.calibration for r in s.scalars(select(Run))]
    finally:
        engine.dispose()
    assert calibrations and all(c and c.get("bandwidth") for c in calibrations)
    placed = [r for r in walls if r.roofline_fraction is not None]
    assert walls and len(placed) == len(walls)
    above = sorted({(r.roofline_fraction, r.roofline_peak_source) for r in placed if r.roofline_above}, reverse=True)
    assert not above, above[:5]
    assert max(r.roofline_fraction for r in placed) <= 1 + ABOVE_ROOF_TOLERANCE


def test_summary_names_the_planted_commit(demo: dict) -> None:  # type: ignore[type-arg]
    out = demo["stdout"]
    planted = demo["planted"]
    assert f"Regression at commit {planted[:10]}" in out
    assert "softmax/softmax_rows" in out
    assert f"The planted commit {planted[:10]} was flagged." in out


def test_the_planted_commit_is_flagged_and_outranks_any_noise(demo: dict) -> None:  # type: ignore[type-arg]
    """The planted commit is flagged (not refuted by its re-run), and its code diff is the only one.

    A change point elsewhere is possible on this shared 2-core VM (a slow stretch under every round of a few
    commits); the product's answer is the confirmation that follows each finding, re-running base and head
    interleaved, which refutes it (it then flags nothing). What noise may never do is outrank the planted change
    or come with a code diff: bench/detect_quality.py measures the false-alarm rate itself. "Confirmed" is not
    required: a confirmation cancelled because the change point moved between rounds is only redone by the next
    run's detection, after the demo has ended."""
    engine = make_engine(demo["db"])
    with make_session_factory(engine)() as s:
        regressions = [f for f in all_findings(s) if f.direction == "regression"]
    engine.dispose()
    shown = "\n".join(f"{f.commit_sha[:10]} {f.kind} {f.series_label} {f.metric} {f.magnitude:+.1%} "
                      f"p={f.p_value} confirmation={f.confirmation}" for f in regressions)
    planted = demo["planted"]
    flagged = [f for f in regressions if f.flags_commit]
    at_planted = [f for f in flagged if f.commit_sha == planted]
    assert at_planted, f"the planted commit is not flagged:\n{shown}"
    assert all(f.series_label.startswith("softmax/") and f.magnitude > 0.5 for f in at_planted), shown
    elsewhere = [f for f in flagged if f.commit_sha != planted]
    assert all(f.magnitude < min(p.magnitude for p in at_planted) for f in elsewhere), shown
    assert {f.commit_sha for f in regressions if f.kind == "static"} == {planted}, shown


def test_compare_before_and_culprit_fails_on_the_regression_and_names_it(demo: dict) -> None:  # type: ignore[type-arg]
    """`kernelwatch compare <before> <culprit> --fail-on regression` in a CI job: exit 1, the planted kernel named,
    and the JSON form valid against the schema in the repository."""
    import json

    import jsonschema

    from tests.conftest import REPO_ROOT

    commits, planted = demo["commits"], demo["planted"]
    before = commits[commits.index(planted) - 1]
    argv = ["compare", before[:10], planted[:10], "--fail-on", "regression"]
    text = run_cli(argv, demo["env"])
    assert text.returncode == 1, text.stderr[-2000:]
    # The verdict column (an "of roofline" column may follow it: the demo's host calibrates).
    regressions = [line for line in text.stdout.splitlines() if re.search(r"\bregression\b", line)]
    assert regressions and any(line.startswith("softmax/") for line in regressions), text.stdout
    # The planted kernel leads: the two commits' runs were minutes apart on this shared 2-core VM, not
    # interleaved, so an untouched kernel may cross the threshold by noise (once: matmul +46 %, p=0.024, ±32 %
    # spread), but never by more than the planted change.
    changes = {line.split()[0]: float(re.findall(r"([+-]\d+\.\d)% \(p[=<]", line)[0]) for line in regressions}
    assert max(changes, key=lambda name: changes[name]).startswith("softmax/"), text.stdout
    as_json = run_cli([*argv, "--format", "json"], demo["env"])
    assert as_json.returncode == 1
    schema = json.loads((REPO_ROOT / "service" / "contract" / "compare.schema.json").read_text())
    document = json.loads(as_json.stdout)
    jsonschema.validate(document, schema)
    assert document["summary"]["regression"] >= 1


def test_compare_of_adjacent_commits_flags_the_planted_one_and_no_unchanged_kernel(demo: dict) -> None:  # type: ignore[type-arg]
    """The A/A check on the demo's own history: every pair of adjacent commits but the planted one changes
    comments or docs only, so `kernelwatch compare` must give their benchmarks no time verdict (a regression or an
    improvement; undecided is honest), and must still flag the planted one. Pooling the samples of each side's
    runs flagged 15 of 34 such comparisons.

    The bound is family-wise, and states its own chance of failing. This machine's processes are bimodal (fast or
    slow, up to 2x apart), and three runs a side all in opposite states is a real, if rare, draw: measured on real
    runs, 0.0-0.4 % of A/A comparisons at 2-5 runs a side get a verdict (bench/verdict_calibration.py,
    bench/README.md). The demo makes 32 such comparisons (4 benchmarks in each of 8 unchanged pairs), so "none of
    32" fails by chance in 6-12 % of CI runs at that rate. It did three times, each three slow runs against three
    fast (p = 0.003, 0.005 and 0.002; an unchanged softmax 1.8x "slower"); the last pair, run again in fresh
    interleaved processes, showed no difference. The benchmarks of one pair share their processes (a slow process
    slows every benchmark in it), so the pair is the unit: one unchanged pair with a verdict is within the rate the
    product states; two happen by chance in 0.2-0.7 % of demos at the measured rate (binomial over 8 pairs), while
    the pooled test's 17-26 % per comparison gives 4-6 such pairs, failing 97-99.9 % of demos. The one allowed is
    reported as a warning, not hidden."""
    import json
    import warnings

    commits, planted = demo["commits"], demo["planted"]
    false_pairs: dict[str, list[str]] = {}
    unchanged_pairs, planted_rows = 0, []
    for before, after in zip(commits, commits[1:], strict=False):
        # In this process (tests/cli_inprocess.py): nine read-only compares need not import the service nine times.
        proc = run_cli(["compare", before[:10], after[:10], "--format", "json", "--fail-on", "none"], demo["env"])
        assert proc.returncode == 0, proc.stderr[-2000:]
        timed = [b for b in json.loads(proc.stdout)["benchmarks"] if b["metric"] == "wall_time"]
        if after == planted:
            planted_rows = timed
            continue
        unchanged_pairs += 1
        flagged = [f"{after[:10]} {b['suite']}/{b['name']} {b['params']} {b['verdict']} ratio={b['ratio']:.3f} "
                   f"p={b['p_value']} runs={b['base']['runs']}+{b['head']['runs']}" for b in timed
                   if b["verdict"] in ("regression", "improvement")]
        if flagged:
            false_pairs[after[:10]] = flagged
    report = "\n".join(line for lines in false_pairs.values() for line in lines)
    assert unchanged_pairs >= 6 and len(false_pairs) <= 1, (
        f"{len(false_pairs)} of {unchanged_pairs} unchanged commit pairs given a time verdict:\n{report}")
    if false_pairs:
        warnings.warn(f"one of {unchanged_pairs} unchanged commit pairs given a time verdict (the measured "
                      f"A/A rate allows it):\n{report}", stacklevel=1)
    softmax = [b for b in planted_rows if b["suite"] == "softmax"]
    assert softmax and any(b["verdict"] == "regression" for b in softmax), planted_rows
    assert all(b["head"]["runs"] >= 2 for b in planted_rows)  # the demo's rounds are the replicates


@pytest.mark.browser
def test_the_model_page_draws_a_roof_per_memory_level_across_the_points(dashboard: str, browser) -> None:  # type: ignore[no-untyped-def]
    """/model on the demo's calibrated host, in Chromium: one roof per level of the measured hierarchy (L1 ...
    DRAM), the axes spanning the points, each point labelled, none drawn as above its roof."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page, blocked = open_page(browser, dashboard)
    page.goto(f"{dashboard}/model")
    page.wait_for_selector("#model-chart .main-svg")
    levels = page.locator("#memory-levels").inner_text()
    assert "L1" in levels and "DRAM" in levels, levels
    # What a point is held to, said as it is: its own working set's bandwidth, not its level's line (a row's
    # "22 GB/s measured at a 32 MiB working set" read against a legend of "L3 31.1 GB/s").
    assert "held to the bandwidth this host measured at its own working set" in page.locator("#roof-note").inner_text()
    figure = page.evaluate("() => { const c = document.getElementById('model-chart');"
                           " return {names: c.data.map(t => t.name), x: c.layout.xaxis.range,"
                           " dots: c.data[c.data.length - 1]}; }")
    roofs = [n for n in figure["names"] if n.endswith(")") and " roof (" in n]
    assert roofs[0].startswith("L1 roof") and roofs[-1].startswith("DRAM roof"), figure["names"]
    low, high = figure["x"]
    xs = figure["dots"]["x"]
    assert xs and all(10 ** low < x < 10 ** high for x in xs)
    assert high - low < 6  # decades: the data's span, not the ridge's (the 10^28 FLOP/B axis of before)
    assert figure["dots"]["mode"] == "markers+text" and all(figure["dots"]["text"])
    assert "x" not in figure["dots"]["marker"]["symbol"]  # no point above its roof
    assert page.locator("#model-chart .textpoint").count() == len(xs)  # each label drawn
    ridge = page.evaluate("() => document.getElementById('model-chart').layout.shapes.length")
    labels = page.locator("#model-chart .annotation-text").all_text_contents()
    assert not ridge or any(t.startswith("ridge ") for t in labels), labels  # drawn, not placed off the chart
    page.screenshot(path=str(SCREENSHOTS / "model-levels.png"), full_page=True)
    assert blocked == []
    page.close()


@pytest.mark.browser
def test_dashboard_shows_the_regression_and_its_chart(demo: dict, dashboard: str, browser) -> None:  # type: ignore[no-untyped-def,type-arg]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    planted = demo["planted"]
    page, blocked = open_page(browser, dashboard)
    # The inbox: the planted commit's alert is the regression there.
    page.goto(f"{dashboard}/")
    planted_alert = page.locator("tbody[data-alert]", has=page.locator(f'a.commit-link[title="{planted}"]'))
    assert planted_alert.count() == 1
    assert planted_alert.locator("tr.alert-head span.regression").count() == 1  # its worst change, in red
    page.screenshot(path=str(SCREENSHOTS / "demo-inbox.png"), full_page=True)

    page.goto(f"{dashboard}/commits")
    row = page.locator(f'tr[data-sha="{planted}"]')
    assert "flagged" in (row.get_attribute("class") or "")
    assert page.locator("tr.flagged").count() == 1
    assert "1 flagged with a regression" in page.locator("#summary").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "index.png"), full_page=True)

    row.locator("a.finding").first.click()
    page.wait_for_selector("#chart .main-svg")
    assert re.match(r"softmax/softmax_rows\[", page.locator("#series-title").inner_text())
    # The plotly annotation marking the finding names the culprit commit.
    annotation = page.locator("#chart .annotation-text").first.text_content() or ""
    assert planted[:8] in annotation and "+" in annotation
    assert page.locator("#findings td.sha").first.inner_text() == planted[:10]
    page.screenshot(path=str(SCREENSHOTS / "series.png"), full_page=True)
    assert blocked == [], f"the dashboard asked for outside resources: {blocked}"
    page.close()


def test_unknown_series_is_a_404(dashboard: str) -> None:
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{dashboard}/series/999999")
    assert info.value.code == 404


# The journey: a kernel engineer's way through the dashboard on the demo's data, in Chromium: the inbox, the planted
# regression's alert, its series chart, the diff page with the fusion attribution ranked first already open and
# its changed instructions marked, then triage from the inbox (logged in with a token), kept across a reload.
# Screenshots of each page land in test-output/screenshots/journey-*.png.


def triage_token(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-m", "service.cli", "token", "create", "journey", "--scope", "triage"],
                         env=env, capture_output=True, text=True, timeout=120, check=True).stdout
    [token] = [line.strip() for line in out.splitlines() if line.strip().startswith("kw_")]
    return token


@pytest.mark.browser
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
