"""The pages over a real database, through Flask's test client (the browser test covers the rendering)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.app import create_app
from service.context import Context
from service.pipeline.submit import submit_manifest
from service.settings import load_settings
from service.store.models import Series
from tests import builders


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
    assert culprit[:10] in page and "edivisive v1" in page
    assert "/static/plotly.min.js" in page and "cdn" not in page.lower()
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and len(js.data) > 1_000_000
    assert client.get("/series/424242").status_code == 404


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
