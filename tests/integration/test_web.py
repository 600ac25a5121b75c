"""The pages over a real database, through Flask's test client (the browser test covers the rendering)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.app import create_app
from service.context import Context
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.submit import submit_manifest
from service.settings import load_settings
from service.store.models import Commit, Environment, Run, Series
from tests import builders
from tests.drilldown_data import FIXTURES, LLO_FIXTURE


def app_for(database_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url})
    return create_app(settings, context=Context.create(settings))


def test_empty_database_says_how_to_start(sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> None:
    client = app_for(database_url, tmp_path).test_client()
    inbox = client.get("/")
    assert inbox.status_code == 200 and b"No alerts: nothing has moved yet" in inbox.data
    page = client.get("/commits")
    assert page.status_code == 200 and b"No runs stored yet" in page.data


def test_index_and_series_show_the_finding(sessions: sessionmaker[Session], database_url: str,
                                           tmp_path: Path) -> None:
    app = app_for(database_url, tmp_path)
    ctx = app.extensions["kernelwatch"]
    docs = builders.step_series_manifests([1e-3] * 5 + [2e-3] * 5)
    for doc in docs:
        submit_manifest(ctx.sessions, ctx.queue, doc)
    client = app.test_client()
    index = client.get("/commits").get_data(as_text=True)
    culprit = docs[5]["commit"]["sha"]
    assert f'data-sha="{culprit}"' in index and "regression +" in index
    assert index.count('class="flagged"') == 1
    with ctx.sessions() as s:
        series_id = s.scalars(select(Series.id)).one()
    page = client.get(f"/series/{series_id}").get_data(as_text=True)
    assert culprit[:10] in page and f"edivisive v{EDivisiveDetector.version}" in page
    assert "/static/plotly.min.js" in page and "cdn" not in page.lower()
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and len(js.data) > 1_000_000
    assert client.get("/series/424242").status_code == 404
    # An icon of its own: a browser asks every site for one, and a 404 there was an error in every page's console.
    assert '<link rel="icon" href="/static/favicon.svg"' in page
    for path in ("/favicon.ico", "/static/favicon.svg"):
        icon = client.get(path)
        assert icon.status_code == 200 and icon.mimetype == "image/svg+xml" and b"<svg" in icon.data


def test_untrusted_text_is_escaped(sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> None:
    app = app_for(database_url, tmp_path)
    ctx = app.extensions["kernelwatch"]
    doc = builders.manifest()
    doc["commit"]["subject"] = '<script>alert("x")</script>'
    submit_manifest(ctx.sessions, ctx.queue, doc)
    client = app.test_client()
    for path in ("/commits", f"/commits/{doc['commit']['sha']}"):
        html = client.get(path).get_data(as_text=True)
        assert '<script>alert("x")</script>' not in html and "&lt;script&gt;" in html, path


def _figure(page: str) -> dict[str, Any]:
    found = re.search(r'<script id="figure" type="application/json">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def test_series_page_shows_intervals_runs_companions_and_other_toolchains(
        sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> None:
    app = app_for(database_url, tmp_path)
    ctx = app.extensions["kernelwatch"]
    # A TPU program listing on every run: parsed on submit into kernel_code rows, as a TPU runner's capture is.
    llo = ctx.artifacts.put((FIXTURES / "llo" / LLO_FIXTURE).read_bytes(), "llo", LLO_FIXTURE)
    ref = {"kind": "llo", "name": LLO_FIXTURE, "sha256": llo.sha256, "size": llo.size}
    old, new = builders.environment(), builders.environment(jax_version="0.10.3", jaxlib_version="0.10.3")
    docs = builders.step_series_manifests([1e-3] * 4 + [2e-3] * 4)
    for position, doc in enumerate(docs):
        wall = doc["results"][0]
        wall.update(artifacts=[ref], max_abs_error=1e-7 * (1 + position))
        # A second metric of the benchmark carries neither the artifacts nor the error: they are read from
        # the run's wall-time result all the same.
        doc["results"].append(builders.result(metric="execution_time", samples=wall["samples"], max_abs_error=None))
        doc["environment"] = old
        ctx.submit(doc)
    for position in (8, 9):  # the toolchain moves on: a new fingerprint, a new series of the same benchmark
        ctx.submit(builders.manifest(position, [builders.result()], environment=new))
    with ctx.sessions() as s:
        ids = {details["jax_version"]: sid for details, sid in s.execute(
            select(Environment.details, Series.id).join(Environment, Environment.id == Series.environment_id)
            .where(Series.metric == "wall_time"))}
        runs = s.scalars(select(Run.run_uid).join(Commit).order_by(Commit.position)).all()
        execution = s.scalar(select(Series.id).where(Series.metric == "execution_time"))
    client = app.test_client()
    page = client.get(f"/series/{ids['0.10.2']}").get_data(as_text=True)

    assert "Toolchain: jax 0.10.2 · jaxlib 0.10.2" in page
    sibling = page[page.index('id="sibling-series"'):page.index('id="chart"')]
    assert f'href="/series/{ids["0.10.3"]}"' in sibling and "jax 0.10.2 → 0.10.3; jaxlib 0.10.2 → 0.10.3" in sibling
    # Issue 17: the toolchain change is an event between the two series, on the page and on the chart.
    events = page[page.index('id="toolchain-events"'):page.index('id="sibling-series"')]
    assert "After position 7 this history continues as" in events and f'href="/series/{ids["0.10.3"]}"' in events
    assert "from position 8: jax 0.10.2 → 0.10.3; jaxlib 0.10.2 → 0.10.3." in events
    later = client.get(f"/series/{ids['0.10.3']}").get_data(as_text=True)
    back = later[later.index('id="toolchain-events"'):later.index('id="sibling-series"')]
    assert "This history takes over at position 8 from" in back and f'href="/series/{ids["0.10.2"]}"' in back
    assert "last measured at position 7: jax 0.10.2 → 0.10.3; jaxlib 0.10.2 → 0.10.3." in back
    assert f'href="/api/v1/runs/{runs[7]}"' in page and "95 % CI" in page
    assert client.get(f"/api/v1/runs/{runs[7]}").status_code == 200  # the run link leads somewhere

    fig = _figure(page)
    marks = [a["text"] for a in fig["layout"]["annotations"] if "jax" in a["text"]]
    assert marks == ["jax 0.10.2 → 0.10.3; jaxlib 0.10.2 → 0.10.3 (continues after)"], fig["layout"]["annotations"]
    names = [t["name"] for t in fig["data"]]
    assert names == ["samples", "median", "tpu-llo bundles", "tpu-llo ops", "max abs error"]
    median = fig["data"][1]
    assert all(c[3].startswith("95% CI [") for c in median["customdata"])  # 10 samples a commit
    assert median["customdata"][7][4].startswith(f"run {runs[7][:12]} · ")
    error = fig["data"][4]
    assert error["y"] == pytest.approx([1e-7 * (1 + p) for p in range(8)])
    bundles = fig["data"][2]
    assert len(bundles["x"]) == 8 and len(set(bundles["y"])) == 1 and bundles["y"][0] > 0
    # The static signals of another metric's series come from the result that captured the listing.
    other = _figure(client.get(f"/series/{execution}").get_data(as_text=True))
    assert [t["name"] for t in other["data"]] == names
    assert other["data"][2]["customdata"][0][2] == median["customdata"][0][2]

    newer = client.get(f"/series/{ids['0.10.3']}").get_data(as_text=True)
    assert [t["name"] for t in _figure(newer)["data"]] == ["samples", "median", "max abs error"]  # no listing
    assert "jax 0.10.3 → 0.10.2" in newer


def test_a_series_measured_out_of_order_draws_its_companions_in_commit_order(
        sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> None:
    """The demo runs its commits in an order of its own each round, and a backfill measures old commits last: a
    companion line drawn in the order the runs were made went back and forth across the chart's axis of commits
    (a code size that changed once drew a box over every commit between)."""
    app = app_for(database_url, tmp_path)
    ctx = app.extensions["kernelwatch"]
    docs = builders.step_series_manifests([1e-3] * 3 + [2e-3] * 3)
    for made, position in enumerate((4, 1, 5, 0, 3, 2)):  # the order the runs were made in
        doc = docs[position]
        doc["results"][0]["max_abs_error"] = 1e-7 * (1 + position)
        doc["started_at"] = f"2026-03-01T00:{made:02d}:00+00:00"
        doc["finished_at"] = f"2026-03-01T00:{made:02d}:30+00:00"
        ctx.submit(doc)
    with ctx.sessions() as s:
        series = s.scalar(select(Series.id).where(Series.metric == "wall_time"))
    fig = _figure(app.test_client().get(f"/series/{series}").get_data(as_text=True))
    median, error = fig["data"][1], next(t for t in fig["data"] if t["name"] == "max abs error")
    assert error["x"] == median["x"] and len(error["x"]) == 6
    assert error["y"] == pytest.approx([1e-7 * (1 + p) for p in range(6)])
