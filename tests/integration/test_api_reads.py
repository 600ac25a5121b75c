"""The bounded reads of /api/v1 (findings, commits, alerts) on both databases: every filter, paging by cursor
(every item once, in order, until ``next`` is null), the per-item cap on findings, and every refusal."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest
from alembic import command
from sqlalchemy import inspect, select
from sqlalchemy.orm import Session

from service.contract import parse_manifest
from service.detect.static_diff import STATIC_DETECTOR
from service.pipeline.alerts import group_findings, list_alerts, triage
from service.pipeline.ingest import ingest_manifest
from service.store.db import alembic_config, make_engine, unit_of_work, upgrade
from service.store.models import BisectJob, Commit, Finding, Repository, Series
from service.store.queries import recent_commits
from tests import builders
from tests.api_client import Api, error_of

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
H200 = {"backend": "gpu", "device_kind": "NVIDIA H200", "cpu_model": "Host CPU"}


@dataclass
class World:
    """Two repositories; demo measured on cpu and on an H200 at commits 0..5, other on cpu at 0..3."""

    commits: dict[tuple[str, int], int] = field(default_factory=dict)  # (repo, position) -> commit id
    series: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (repo, device kind, name) -> id
    findings: dict[str, int] = field(default_factory=dict)  # label -> finding id

    def sha(self, repo: str, position: int) -> str:
        return builders.sha_for(f"{repo}-{position}")


def build_world(api: Api) -> World:
    w = World()
    with unit_of_work(api.ctx.sessions) as s:
        for repo, positions, envs in (("demo", 6, ({}, H200)), ("other", 4, ({},))):
            for p in range(positions):
                for env in envs:
                    doc = builders.manifest(p, [builders.result(suite="k", name=n) for n in ("a", "b")], repo=repo,
                                            environment=builders.environment(**env))
                    ingest_manifest(s, parse_manifest(doc))
    with api.ctx.sessions() as s:
        for c, repo in s.execute(select(Commit, Repository.name).join(Repository)):
            w.commits[(repo, c.position)] = c.id
        # The time series; on the H200 ingest also derives each benchmark's efficiency (roofline_fraction) series.
        for sr in s.scalars(select(Series).where(Series.metric == "wall_time")):
            w.series[(sr.repository.name, sr.environment.device_kind, sr.benchmark.name)] = sr.id
    return w


def add_finding(s: Session, w: World, label: str, repo: str, device: str, name: str, position: int,
                created_at: datetime, direction: str = "regression", kind: str = "time",
                magnitude: float = 0.5) -> None:
    f = Finding(series_id=w.series[(repo, device, name)], commit_id=w.commits[(repo, position)],
                previous_commit_id=w.commits[(repo, position - 1)], detector=f"test-{label}", detector_version=1,
                kind=kind, direction=direction, magnitude=magnitude, confidence=10.0, value_before=1.0,
                value_after=1.0 + magnitude, created_at=created_at, attribution={})
    s.add(f)
    s.flush()
    w.findings[label] = f.id


def with_findings(api: Api) -> World:
    """Seven findings; two share a created_at (paging must break the tie), each filter excludes some."""
    w = build_world(api)
    with unit_of_work(api.ctx.sessions) as s:
        add_finding(s, w, "demo-cpu-a-2", "demo", "cpu", "a", 2, T0)
        add_finding(s, w, "demo-h200-a-2", "demo", "NVIDIA H200", "a", 2, T0 + timedelta(hours=1),
                    direction="improvement", magnitude=-0.3)
        add_finding(s, w, "demo-cpu-b-4", "demo", "cpu", "b", 4, T0 + timedelta(days=1))
        add_finding(s, w, "demo-h200-b-4", "demo", "NVIDIA H200", "b", 4, T0 + timedelta(days=1), kind="static",
                    magnitude=0.1)
        add_finding(s, w, "demo-cpu-a-5", "demo", "cpu", "a", 5, T0 + timedelta(days=2), magnitude=0.2)
        add_finding(s, w, "other-cpu-a-2", "other", "cpu", "a", 2, T0 + timedelta(days=2, hours=5),
                    kind="numerics", magnitude=2.0)
        add_finding(s, w, "other-cpu-b-3", "other", "cpu", "b", 3, T0 + timedelta(days=3), magnitude=0.05)
        group_findings(s, list(w.findings.values()))
    return w


def walk(api: Api, path: str, key: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Every item of a read, page by page following ``next``; and how many pages it took."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    sep = "&" if "?" in path else "?"
    while True:
        url = f"{path}{sep}limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        response = api.client.get(url)
        assert response.status_code == 200, response.json
        body = response.json
        pages += 1
        assert len(body[key]) <= limit
        items += body[key]
        cursor = body["next"]
        if cursor is None:
            return items, pages
        assert body[key], "a page that says more follow is not empty"
        assert pages < 50, "next never ends"


def labels(w: World, findings: list[dict[str, Any]]) -> list[str]:
    by_id = {v: k for k, v in w.findings.items()}
    return [by_id[f["id"]] for f in findings]


NEWEST_FIRST = ["other-cpu-b-3", "other-cpu-a-2", "demo-cpu-a-5", "demo-h200-b-4", "demo-cpu-b-4", "demo-h200-a-2",
                "demo-cpu-a-2"]


def newest_first(w: World) -> list[str]:
    # demo-cpu-b-4 and demo-h200-b-4 share a created_at: the later id comes first.
    tied = sorted(["demo-cpu-b-4", "demo-h200-b-4"], key=lambda k: -w.findings[k])
    return NEWEST_FIRST[:3] + tied + NEWEST_FIRST[5:]


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 100])
def test_findings_pages_cover_everything_once_newest_first(api: Api, limit: int) -> None:
    w = with_findings(api)
    found, pages = walk(api, "/api/v1/findings", "findings", limit)
    assert labels(w, found) == newest_first(w)
    assert pages == max(1, -(-7 // limit))  # the page that ends exactly at the last item says so: no empty page
    first = found[0]
    assert first["repository"] == "other" and first["hardware"] == "cpu" and first["alert_id"] is not None
    assert first["created_at"] == (T0 + timedelta(days=3)).isoformat()


def test_findings_filters(api: Api) -> None:
    w = with_findings(api)

    def only(query: str) -> list[str]:
        response = api.client.get(f"/api/v1/findings?{query}")
        assert response.status_code == 200, response.json
        assert response.json["next"] is None
        return labels(w, response.json["findings"])

    everything = newest_first(w)
    assert only("kind=static") == ["demo-h200-b-4"]
    assert only("kind=numerics") == ["other-cpu-a-2"]
    assert only("direction=improvement") == ["demo-h200-a-2"]
    assert only("repository=other") == ["other-cpu-b-3", "other-cpu-a-2"]
    # An unknown repository is said to be one, as /alerts says it: an empty page read as nothing measured there.
    assert error_of(api.client.get("/api/v1/findings?repository=nowhere"))["code"] == "not_found"
    on_h200 = [x for x in everything if "h200" in x]
    assert only("hardware=NVIDIA%20H200") == on_h200
    assert only("hardware=nvidia%20h200") == on_h200  # any case
    assert only("hardware=GPU") == on_h200  # the backend names every device of it
    assert only("hardware=cpu") == [x for x in everything if "cpu" in x]
    assert only("hardware=TPU%20v5e") == []
    # since inclusive, until exclusive; a date is midnight UTC
    assert only(f"since={quote((T0 + timedelta(days=2)).isoformat())}") == everything[:3]
    assert only(f"until={quote((T0 + timedelta(days=1)).isoformat())}") == ["demo-h200-a-2", "demo-cpu-a-2"]
    assert only("since=2026-03-02&until=2026-03-03") == everything[3:5]
    assert only("since=2026-03-02T13:00:00%2B01:00&until=2026-03-02T12:00:01Z") == everything[3:5]  # offsets
    assert only("repository=demo&hardware=cpu&direction=regression&kind=time") == [
        "demo-cpu-a-5", "demo-cpu-b-4", "demo-cpu-a-2"]


def test_findings_filter_by_their_alert_state(api: Api) -> None:
    w = with_findings(api)
    with unit_of_work(api.ctx.sessions) as s:
        fixed = s.get(Finding, w.findings["demo-cpu-b-4"])
        assert fixed is not None and fixed.alert_id is not None
        triage(s, fixed.alert_id, "fixed", "", "ada")  # its alert holds demo-h200-b-4 too (same range)
        ungrouped = s.get(Finding, w.findings["other-cpu-b-3"])
        assert ungrouped is not None
        ungrouped.alert_id = None  # not grouped yet: it has no state
    found = api.client.get("/api/v1/findings?state=fixed").json["findings"]
    assert labels(w, found) == [x for x in newest_first(w) if x.endswith("-b-4")]
    untriaged = api.client.get("/api/v1/findings?state=untriaged").json["findings"]
    # the ungrouped finding has no state; demo-h200-a-2 shares a mixed (untriaged) alert with a regression
    assert labels(w, untriaged) == ["other-cpu-a-2", "demo-cpu-a-5", "demo-h200-a-2", "demo-cpu-a-2"]
    assert api.client.get("/api/v1/findings?state=improvement").json["findings"] == []


def test_paging_keeps_the_filters(api: Api) -> None:
    w = with_findings(api)
    found, pages = walk(api, "/api/v1/findings?repository=demo&hardware=cpu", "findings", 2)
    assert labels(w, found) == ["demo-cpu-a-5", "demo-cpu-b-4", "demo-cpu-a-2"] and pages == 2


def cursor_of(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


@pytest.mark.parametrize("query", [
    "limit=0", "limit=1001", "limit=ten", "limit=-1", "cursor=not-a-cursor", "cursor=" + cursor_of([1]),
    "cursor=" + cursor_of(["yesterday", 3]), "cursor=" + cursor_of(["2026-01-01T00:00:00", "3"]),
    "cursor=" + cursor_of(["2026-01-01T00:00:00", 2**64]), "cursor=" + cursor_of({"a": 1}),  # type: ignore[arg-type]
    "since=last%20week", "until=2026-13-01", "since=2026-03-02&until=2026-03-02", "since=2026-03-03&until=2026-03-02",
    "state=closed", "kind=bogus", "direction=up", "hardware=" + "x" * 201, "repository=" + "r" * 201,
])
def test_bad_findings_queries_are_400(api: Api, query: str) -> None:
    response = api.client.get(f"/api/v1/findings?{query}")
    assert response.status_code == 400 and error_of(response)["code"] == "invalid_input", query


@pytest.mark.parametrize("path", [
    "/api/v1/commits?cursor=" + cursor_of(["2026-01-01T00:00:00", 1]), "/api/v1/commits?findings_limit=201",
    "/api/v1/commits?findings_limit=-1", "/api/v1/commits?since=tomorrow", "/api/v1/alerts?cursor=" + cursor_of([]),
    "/api/v1/alerts?cursor=" + cursor_of([True]), "/api/v1/alerts?findings_limit=x", "/api/v1/alerts?limit=1001",
    "/api/v1/alerts?until=noon", "/api/v1/alerts?state=closed",
])
def test_bad_commit_and_alert_queries_are_400(api: Api, path: str) -> None:
    response = api.client.get(path)
    assert response.status_code == 400 and error_of(response)["code"] == "invalid_input", path


def test_a_cursor_from_one_read_is_refused_by_another(api: Api) -> None:
    with_findings(api)
    findings_next = api.client.get("/api/v1/findings?limit=1").json["next"]
    alerts_next = api.client.get("/api/v1/alerts?limit=1").json["next"]
    assert findings_next and alerts_next
    for path in (f"/api/v1/alerts?cursor={findings_next}", f"/api/v1/findings?cursor={alerts_next}",
                 f"/api/v1/commits?cursor={findings_next}"):
        assert error_of(api.client.get(path))["code"] == "invalid_input", path


def test_commits_page_newest_first_with_filters(api: Api) -> None:
    w = with_findings(api)
    commits, pages = walk(api, "/api/v1/commits", "commits", 3)
    # authored: demo-p and other-p share an hour; the larger id (other, ingested later) first
    expected = []
    for p in range(5, -1, -1):
        expected += [("other", p)] if p < 4 else []
        expected += [("demo", p)]
    assert [(c["repository"], c["position"]) for c in commits] == expected and pages == 4
    assert [c["sha"] for c in commits].count(w.sha("demo", 2)) == 1
    demo2 = next(c for c in commits if c["sha"] == w.sha("demo", 2))
    assert demo2["runs"] == 2 and demo2["finding_count"] == 2

    demo, _ = walk(api, "/api/v1/commits?repository=demo", "commits", 4)
    assert [c["position"] for c in demo] == [5, 4, 3, 2, 1, 0]
    on_h200, _ = walk(api, "/api/v1/commits?hardware=nvidia%20h200", "commits", 4)
    assert {c["repository"] for c in on_h200} == {"demo"} and len(on_h200) == 6
    h200_2 = next(c for c in on_h200 if c["position"] == 2)
    assert h200_2["runs"] == 1 and h200_2["finding_count"] == 1
    assert labels(w, h200_2["findings"]) == ["demo-h200-a-2"]  # its cpu finding is not on that hardware
    window = api.client.get("/api/v1/commits?since=2026-01-01T03:00:00Z&until=2026-01-01T05:00:00Z").json
    assert [(c["repository"], c["position"]) for c in window["commits"]] == [("demo", 4), ("other", 3), ("demo", 3)]
    unknown = api.client.get("/api/v1/commits?repository=nowhere")
    assert unknown.status_code == 404 and error_of(unknown)["message"] == "no repository named 'nowhere'"


def test_commit_findings_are_capped_worst_first_and_counted(api: Api) -> None:
    w = build_world(api)
    with unit_of_work(api.ctx.sessions) as s:
        # At demo commit 3: a small regression, a large improvement, a larger static diff, and two
        # regressions on the H200, one of which a re-run refuted.
        add_finding(s, w, "small", "demo", "cpu", "a", 3, T0, magnitude=0.05)
        add_finding(s, w, "improvement", "demo", "cpu", "b", 3, T0, direction="improvement", magnitude=-0.6)
        add_finding(s, w, "static", "demo", "NVIDIA H200", "a", 3, T0, kind="static", magnitude=0.9)
        add_finding(s, w, "refuted", "demo", "NVIDIA H200", "b", 3, T0, magnitude=0.8)
        add_finding(s, w, "big", "demo", "cpu", "a", 3, T0, magnitude=0.3)  # beside "small", another detector
        repository_id = s.scalars(select(Repository.id).where(Repository.name == "demo")).one()
        s.add(BisectJob(series_id=w.series[("demo", "NVIDIA H200", "b")], repository_id=repository_id,
                        good_commit_sha=w.sha("demo", 2), bad_commit_sha=w.sha("demo", 3), hardware="h200",
                        state="done", purpose="confirm", runs_requested=[], culprit_sha=None,
                        created_at=T0, updated_at=T0))
    # Flags first (regressions, not static, not refuted), largest change first; then the rest the same way.
    order = ["big", "small", "static", "refuted", "improvement"]

    def commit3(query: str) -> dict[str, Any]:
        commits = api.client.get(f"/api/v1/commits?repository=demo{query}").json["commits"]
        return next(c for c in commits if c["position"] == 3)

    assert labels(w, commit3("")["findings"]) == order
    for n in (0, 1, 2, 4):
        capped = commit3(f"&findings_limit={n}")
        assert labels(w, capped["findings"]) == order[:n] and capped["finding_count"] == 5
    with api.ctx.sessions() as s:  # the dashboard's call lists them all, in the same order
        [view] = [c for c in recent_commits(s, limit=200) if c.sha == w.sha("demo", 3)]
        assert [f.id for f in view.findings] == [w.findings[x] for x in order] and view.finding_count == 5
        assert [f.confirmation for f in view.findings] == [None, None, None, "refuted", None]
        [capped_view] = [c for c in recent_commits(s, findings_limit=2) if c.sha == w.sha("demo", 3)]
        assert [f.id for f in capped_view.findings] == [w.findings[x] for x in order[:2]]


def test_alerts_page_filter_and_cap_their_findings(api: Api) -> None:
    w = build_world(api)
    with unit_of_work(api.ctx.sessions) as s:
        for i, name in enumerate(("a", "b")):
            for device in ("cpu", "NVIDIA H200"):
                add_finding(s, w, f"wide-{device}-{name}", "demo", device, name, 4, T0,
                            magnitude=0.1 * (i + 1) * (2 if device == "cpu" else 1))
        add_finding(s, w, "h200-only", "demo", "NVIDIA H200", "a", 2, T0)
        add_finding(s, w, "other", "other", "cpu", "a", 3, T0)
        group_findings(s, list(w.findings.values()))
    with api.ctx.sessions() as s:
        alerts = {a.commit_sha: a.id for a in list_alerts(s)}
    wide, h200, other = alerts[w.sha("demo", 4)], alerts[w.sha("demo", 2)], alerts[w.sha("other", 3)]

    body = api.client.get("/api/v1/alerts").json
    assert [a["id"] for a in body["alerts"]] == sorted(alerts.values(), reverse=True)
    assert body["total"] == 3 and body["next"] is None
    listed, pages = walk(api, "/api/v1/alerts", "alerts", 2)
    assert [a["id"] for a in listed] == sorted(alerts.values(), reverse=True) and pages == 2
    assert api.client.get("/api/v1/alerts?limit=1").json["total"] == 3  # the total is of all pages

    capped = next(a for a in api.client.get("/api/v1/alerts?findings_limit=2").json["alerts"] if a["id"] == wide)
    assert capped["finding_count"] == 4
    assert labels(w, capped["findings"]) == ["wide-cpu-b", "wide-cpu-a"]  # |change| 0.4, 0.2 of 0.4, 0.2, 0.2, 0.1
    full = next(a for a in api.client.get("/api/v1/alerts").json["alerts"] if a["id"] == wide)
    assert len(full["findings"]) == 4 == full["finding_count"]  # the default cap (20) is above 4

    on_h200 = api.client.get("/api/v1/alerts?hardware=NVIDIA%20h200").json
    assert [a["id"] for a in on_h200["alerts"]] == sorted([wide, h200], reverse=True) and on_h200["total"] is None
    wide_h200 = next(a for a in on_h200["alerts"] if a["id"] == wide)
    assert wide_h200["finding_count"] == 2 and sorted(labels(w, wide_h200["findings"])) == [
        "wide-NVIDIA H200-a", "wide-NVIDIA H200-b"]
    assert [a["id"] for a in api.client.get("/api/v1/alerts?repository=other").json["alerts"]] == [other]
    assert error_of(api.client.get("/api/v1/alerts?repository=nowhere"))["code"] == "not_found"

    with unit_of_work(api.ctx.sessions) as s:
        triage(s, h200, "investigating", "", "ada")
    investigating = api.client.get("/api/v1/alerts?state=investigating").json
    assert [a["id"] for a in investigating["alerts"]] == [h200] and investigating["total"] == 1
    raised = api.client.get("/api/v1/alerts?since=2000-01-01&until=2000-01-02").json
    assert raised == {"alerts": [], "total": 0, "next": None}
    now = datetime.now(UTC)
    recent = api.client.get(f"/api/v1/alerts?since={(now - timedelta(hours=1)).date().isoformat()}").json
    assert recent["total"] == 3


def test_the_cli_listing_is_not_capped(api: Api) -> None:
    w = build_world(api)
    with unit_of_work(api.ctx.sessions) as s:
        add_finding(s, w, "x", "demo", "cpu", "a", 3, T0)
        group_findings(s, list(w.findings.values()))
    with unit_of_work(api.ctx.sessions) as s:
        alert_id = list_alerts(s)[0].id
        base = s.get(Series, w.series[("demo", "cpu", "a")])
        assert base is not None
        for i in range(25):  # more than the API's default cap, each on a series of its own
            sr = Series(key=f"extra-{i}", repository_id=base.repository_id, benchmark_id=base.benchmark_id,
                        environment_id=base.environment_id, metric=f"m{i}", unit="s", direction="lower_is_better")
            s.add(sr)
            s.flush()
            s.add(Finding(series_id=sr.id, commit_id=w.commits[("demo", 3)], previous_commit_id=w.commits[("demo", 2)],
                          detector="test", detector_version=1, kind="time", direction="regression",
                          magnitude=0.01 * i, confidence=5.0, value_before=1.0, value_after=1.0, created_at=T0,
                          attribution={}, alert_id=alert_id))
    with api.ctx.sessions() as s:
        [alert] = list_alerts(s)
        assert len(alert.findings) == alert.finding_count == 26
    api_alert = api.client.get("/api/v1/alerts").json["alerts"][0]
    assert len(api_alert["findings"]) == 20 and api_alert["finding_count"] == 26


def test_migration_0007_goes_down_and_up_again(database_url: str) -> None:
    upgrade(database_url)
    command.downgrade(alembic_config(database_url), "0006")
    engine = make_engine(database_url)
    try:
        assert "ix_finding_created" not in {i["name"] for i in inspect(engine).get_indexes("finding")}
        upgrade(database_url)
        inspector = inspect(engine)
        assert "ix_finding_created" in {i["name"] for i in inspector.get_indexes("finding")}
        assert "ix_commit_authored" in {i["name"] for i in inspector.get_indexes("commit")}
        assert "ix_alert_state" in {i["name"] for i in inspector.get_indexes("alert")}
    finally:
        engine.dispose()


def test_the_series_page_says_a_static_finding_is_exact_not_in_noise_units(api: Api) -> None:
    """A static finding counts code (instructions, bundles): exact on every run, so no noise to measure it in.
    The series page gave it "noise units 1.0" (or whatever its stored confidence was) like a time finding."""
    w = with_findings(api)
    static = api.client.get(f"/series/{w.series[('demo', 'NVIDIA H200', 'b')]}").get_data(as_text=True)
    timed = api.client.get(f"/series/{w.series[('demo', 'cpu', 'b')]}").get_data(as_text=True)
    cell = re.compile(r'<td class="num"[^>]*>([^<]*)</td>\s*<td class="muted">test-')
    assert cell.findall(static) == ["exact"] and cell.findall(timed) == ["10.0"]


def test_enter_in_the_inbox_opens_the_change_its_worst_column_shows(api: Api) -> None:
    """An alert of a +794 % instruction count and a +179 % time: the worst-change column shows the time (a code
    count does not stand in for a slow-down), and Enter (the finding marked ``open``) opened the code count's
    series, listed first for being larger."""
    w = build_world(api)
    with unit_of_work(api.ctx.sessions) as s:
        add_finding(s, w, "code", "demo", "cpu", "a", 3, T0, kind="static", magnitude=7.94)
        code = s.get(Finding, w.findings["code"])
        assert code is not None
        code.detector = STATIC_DETECTOR
        add_finding(s, w, "time", "demo", "cpu", "b", 3, T0, magnitude=1.79)
        group_findings(s, [w.findings["code"], w.findings["time"]])
    inbox = api.client.get("/").get_data(as_text=True)
    opened = re.findall(r'<a class="finding open" href="/series/(\d+)"', inbox)
    assert opened == [str(w.series[("demo", "cpu", "b")])], opened
    assert re.search(r'<td class="num"><span class="regression">\+179', inbox)
