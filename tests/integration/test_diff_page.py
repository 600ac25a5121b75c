"""The Diff page over real captures stored through the real pipeline (SQLite and PostgreSQL): a finding's link
opens its two results with the fusion attribution ranked first, whose x86 code grew by sixteen tanh; bad
queries are clear 400/404 pages."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.app import create_app
from service.context import Context
from service.pipeline.submit import submit_manifest
from service.settings import load_settings
from service.store.models import Finding, Result, Run, Series
from tests import builders
from tests.diff_capture import CHANGED_FUSION, StepAtLatest, capture_two_commits, store_captured


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    return capture_two_commits(tmp_path_factory.mktemp("diff"))


@pytest.fixture
def app(sessions: sessionmaker[Session], database_url: str, tmp_path: Path,
        captured: tuple[list[dict[str, Any]], Path]) -> Flask:
    manifests, store_root = captured
    shutil.copytree(store_root, tmp_path / "artifacts")  # the app reads artifacts from its own home
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(settings)
    store_captured(ctx.sessions, manifests, ctx.artifacts)
    return create_app(settings, context=ctx)


def wall_results(app: Flask) -> tuple[int, int]:
    with app.extensions["kernelwatch"].sessions() as s:
        ids = s.scalars(select(Result.id).join(Series).join(Run, Run.id == Result.run_id)
                        .where(Series.metric == "wall_time").order_by(Run.commit_id)).all()
    assert len(ids) == 2
    return ids[0], ids[1]


def test_a_findings_link_opens_the_ranked_kernel_diffed(app: Flask) -> None:
    with app.extensions["kernelwatch"].sessions() as s:
        finding = s.scalars(select(Finding).join(Series).where(Finding.detector == StepAtLatest.name,
                                                               Series.metric == "wall_time")).one()
        assert finding.attribution["fusions"][0]["name"] == CHANGED_FUSION
        finding_id = finding.id
    client = app.test_client()
    listed = client.get("/commits")
    if listed.status_code == 404:  # before the commit list moved from / to /commits
        listed = client.get("/")
    assert f'href="/findings/{finding_id}/diff"' in listed.get_data(as_text=True)

    redirect = client.get(f"/findings/{finding_id}/diff")
    assert redirect.status_code == 302
    base_id, head_id = wall_results(app)
    location = redirect.headers["Location"]
    assert f"base={base_id}" in location and f"head={head_id}" in location
    assert f"kernel={CHANGED_FUSION}" in location and "isa=x86-64" in location

    page = client.get(location)
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    selected = re.search(r'class="kernel-choice[^"]*selected"[^>]*data-name="([^"]+)"', html)
    assert selected and selected.group(1) == CHANGED_FUSION
    # The finding's own figures beside the two results' (one run each): their medians once read as the change.
    assert f"finding={finding_id}" in location and f"Finding {finding_id}: +" in html and "one run of each side" in html
    assert f'<code id="code-name">{CHANGED_FUSION}</code>' in html
    assert 'id="finding-ranking"' not in html  # its ranking was made of these two runs' op tables
    # Occurrences are per call here (the result page's are totals over the profiled pass): said so, and a whole
    # change reads "+32", not "+32.00".
    op_table = html.split('id="op-diff"', 1)[1].split("</table>", 1)[0]
    assert "occurrences / call</th>" in op_table and not re.search(r">[+-][\d,]+\.00<", op_table)
    # Ranked from several runs' op tables pooled, while the page's table is one run a side: the page says why it
    # opened where it did (it opened at a fusion its own table ranked sixth, with no word: 2026-12-07).
    with app.extensions["kernelwatch"].sessions() as s:
        stored = s.get(Finding, finding_id)
        assert stored is not None
        basis = stored.attribution["basis"]
        stored.attribution = {**stored.attribution, "basis": {
            **basis, "before": {**basis["before"], "op_results": [base_id] * 3},
            "after": {**basis["after"], "op_results": [head_id] * 4}}}
        s.commit()
    pooled = client.get(location).get_data(as_text=True)
    assert (f'id="finding-ranking">Opened at <code>{CHANGED_FUSION}</code>, which the finding\'s attribution ranks '
            "first from the op tables of 3 and 4 runs pooled") in pooled
    # The elementwise fusion's code grew: inserted lines (head only), and a count delta on top.
    assert html.count('class="row-insert"') > 0
    deltas = re.search(r'id="count-deltas"><strong>([^<]+)</strong>', html)
    assert deltas and re.search(r"\+\d+ ", deltas.group(1)), deltas
    # The ops: the fusion is a common op whose time grew; HLO: the fusion changed and its body gained tanh.
    assert f'data-op="{CHANGED_FUSION}"' in html
    assert re.search(rf'<tr class="fusion-changed"><td><a [^>]+><code>{CHANGED_FUSION}</code>', html)
    fusion_table = html.split('id="fusion-diff"', 1)[1].split("</table>", 1)[0]
    assert "tanh" in fusion_table and 'class="row-insert"' in fusion_table

    # One result against itself: the same kernel aligns line for line, nothing to mark.
    same = client.get(f"/diff?base={head_id}&head={head_id}&kernel={CHANGED_FUSION}").get_data(as_text=True)
    assert 'class="row-insert"' not in same and 'class="row-delete"' not in same
    assert 'class="row-replace"' not in same and "<strong>no change</strong>" in same


def test_without_a_kernel_the_most_changed_one_is_open_and_full_shows_every_line(app: Flask) -> None:
    base_id, head_id = wall_results(app)
    client = app.test_client()
    folded = client.get(f"/diff?base={base_id}&head={head_id}").get_data(as_text=True)
    assert f'<code id="code-name">{CHANGED_FUSION}</code>' in folded
    full = client.get(f"/diff?base={base_id}&head={head_id}&full=1").get_data(as_text=True)
    assert 'class="fold"' not in full and full.count("<tr class=\"row-") >= folded.count("<tr class=\"row-")
    same = client.get(f"/diff?base={head_id}&head={head_id}").get_data(as_text=True)
    assert "No kernel&#39;s code changed" in same or "No kernel's code changed" in same


@pytest.mark.parametrize(("query", "status", "message"), [
    ("", 400, "The base result is missing"),
    ("?base=1", 400, "The head result is missing"),
    ("?base=abc&head=2", 400, "must be a result id"),
    ("?base=-1&head=2", 400, "must be a result id"),
    ("?base=1&head=99999999999999999999", 400, "must be a result id"),
    ("?base=424242&head={head}", 404, "No base result 424242"),
    ("?base={base}&head=424243", 404, "No head result 424243"),
    ("?base={base}&head={head}&kernel=no_such_fusion", 404, "Neither result has a kernel or an HLO fusion"),
])
def test_bad_queries_are_clear_pages(app: Flask, query: str, status: int, message: str) -> None:
    base_id, head_id = wall_results(app)
    page = app.test_client().get("/diff" + query.format(base=base_id, head=head_id))
    assert page.status_code == status
    html = page.get_data(as_text=True)
    assert message in html and 'id="diff-error"' in html and "Traceback" not in html


def test_unknown_finding_and_hostile_names(app: Flask) -> None:
    client = app.test_client()
    assert client.get("/findings/424242/diff").status_code == 404
    base_id, head_id = wall_results(app)
    page = client.get(f"/diff?base={base_id}&head={head_id}&kernel=<script>alert(1)</script>")
    assert page.status_code == 404
    html = page.get_data(as_text=True)
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


def test_a_result_of_another_benchmark_compares_with_a_warning(app: Flask) -> None:
    """Comparing two variants is a fair question (it is asked by URL); the page says what it compares."""
    ctx = app.extensions["kernelwatch"]
    base_id, _ = wall_results(app)
    submit_manifest(ctx.sessions, ctx.queue, builders.manifest(position=7))  # softmax, no artifacts at all
    with ctx.sessions() as s:
        other = s.scalars(select(Result.id).order_by(Result.id.desc())).first()
    page = app.test_client().get(f"/diff?base={base_id}&head={other}")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and "measure different things" in html
    # The head has no kernels: the base's are removed, and the one open is all deletions.
    assert 'class="kernel-choice status-removed' in html
    assert 'class="row-delete"' in html and 'class="row-insert"' not in html
    assert "the head result has no kernel of this name" in html


def test_base_and_head_timelines_share_one_time_axis_with_the_kernel_highlighted(app: Flask) -> None:
    base_id, head_id = wall_results(app)
    client = app.test_client()
    html = client.get(f"/diff?base={base_id}&head={head_id}&kernel={CHANGED_FUSION}").get_data(as_text=True)
    figure = json.loads(re.search(r'<script id="timeline-figure" type="application/json">(.*?)</script>', html,
                                  re.S)[1])
    names = [trace["name"] for trace in figure["data"]]
    assert names == ["base ops", f"base {CHANGED_FUSION}", "head ops", f"head {CHANGED_FUSION}"]
    order = figure["layout"]["yaxis"]["categoryarray"]  # bottom to top: head's tracks under base's
    sides = [label.split(" · ", 1)[0] for label in order]
    assert "base" in sides and "head" in sides and sides == sorted(sides, reverse=True)
    assert len(figure["layout"].get("xaxis", {})) and "xaxis2" not in figure["layout"]  # one time axis
    starts = {trace["name"]: min(trace["base"]) for trace in figure["data"] if trace["base"]}
    assert min(starts["base ops"], starts[f"base {CHANGED_FUSION}"]) == 0  # each side from its own first op
    assert min(starts["head ops"], starts[f"head {CHANGED_FUSION}"]) == 0
    assert f'href="/results/{base_id}/trace"' in html and f'href="/results/{head_id}/trace"' in html


def test_a_code_findings_figures_count_instructions(app: Flask) -> None:
    """A static finding sits on a time series and counts code: its Diff page read "459 s → 828 s" for
    instruction counts, and called them the series' level over all its runs."""
    with app.extensions["kernelwatch"].sessions() as s:
        static = s.scalars(select(Finding).where(Finding.kind == "static")).one()
        finding_id, before, after = static.id, int(static.value_before), int(static.value_after)
        assert static.unit == "instructions" and before != after
    client = app.test_client()
    redirect = client.get(f"/findings/{finding_id}/diff")
    assert redirect.status_code == 302
    figures = client.get(redirect.headers["Location"]).get_data(as_text=True).split('id="finding-figures"', 1)[1]
    figures = figures.split("</p>", 1)[0]
    assert f"({before} instructions → {after} instructions)" in figures and " s →" not in figures
    assert "generated code's size" in figures and "over all its runs" not in figures
