"""The inbox, login and triage, commit and compare pages over data stored through the real pipeline, on SQLite
and PostgreSQL, through Flask's test client (tests/e2e/test_inbox_browser.py drives them in Chromium)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from service.pipeline.alerts import list_alerts
from service.pipeline.submit import submit_manifest
from service.pipeline.tokens import create_token, revoke_token
from service.store.db import unit_of_work
from service.store.models import Artifact, KernelCode, Result, Run, Series
from tests import builders
from tests.api_client import Api

LEVELS = [1e-3] * 5 + [2e-3] * 5  # a step at position 5: one regression alert


def store(api: Api, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        submit_manifest(api.ctx.sessions, api.ctx.queue, doc)


def stepped(api: Api) -> list[dict[str, Any]]:
    docs = builders.step_series_manifests(LEVELS)
    store(api, docs)
    return docs


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "no CSRF field on the page"
    return match.group(1)


def log_in(client: FlaskClient, token: str, next_path: str = "/") -> Any:
    csrf = csrf_of(client.get("/login").get_data(as_text=True))
    return client.post("/login", data={"token": token, "csrf_token": csrf, "next": next_path})


def only_alert_id(api: Api) -> int:
    with api.ctx.sessions() as s:
        alerts = list_alerts(s)
    assert len(alerts) == 1
    return alerts[0].id


# ---- inbox ---------------------------------------------------------------------------------------------------

def test_inbox_lists_the_alert_with_its_commit_hardware_change_and_links(api: Api) -> None:
    docs = stepped(api)
    culprit = docs[5]["commit"]
    alert_id = only_alert_id(api)
    html = api.client.get("/").get_data(as_text=True)
    group = html[html.index(f'id="alert-{alert_id}"'):]
    group = group[:group.index("</tbody>")]
    assert culprit["sha"][:10] in group and culprit["subject"] in group
    assert "Ada Park &lt;ada@example.com&gt;" in group  # the author, escaped
    assert '<span class="pill">cpu</span>' in group  # the hardware
    assert 'data-state="untriaged"' in group
    assert re.search(r'<span class="regression">\+\d+\.\d%</span>', group)  # the worst change
    with api.ctx.sessions() as s:
        series_id = s.scalars(select(Series.id)).one()
    assert f'href="/series/{series_id}"' in group
    assert re.search(r'href="/findings/\d+/diff"', group)  # the finding has a range: the diff page link
    assert f'/commits/{culprit["sha"]}?repo=demo' in group
    assert f'/compare?base={docs[4]["commit"]["sha"]}&amp;head={culprit["sha"]}' in group
    assert "/static/inbox.js" in html and ">1 alert.</p>" in html
    js = api.client.get("/static/inbox.js")
    assert js.status_code == 200 and b'"j"' in js.data and js.mimetype == "text/javascript"


def test_hostile_commit_text_is_shown_as_text(api: Api) -> None:
    docs = builders.step_series_manifests(LEVELS)
    hostile = '<script>window.__pwned=1</script><img src=x onerror=alert(1)>'
    docs[5]["commit"]["subject"] = hostile
    docs[5]["commit"]["author"] = hostile
    store(api, docs)
    sha = docs[5]["commit"]["sha"]
    for path in ("/", f"/commits/{sha}", f"/compare?base={docs[4]['commit']['sha']}&head={sha}"):
        html = api.client.get(path).get_data(as_text=True)
        assert hostile not in html and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html, path


@pytest.mark.parametrize(("query", "shown"), [
    ("repository=demo", True), ("branch=main", True), ("branch=feature-x", False), ("hardware=cpu", True),
    ("hardware=tpu", False), ("state=untriaged", True), ("state=fixed", False), ("suite=softmax", True),
    ("suite=matmul", False), ("repository=demo&branch=main&hardware=cpu&state=untriaged&suite=softmax", True),
])
def test_inbox_filters_by_the_url(api: Api, query: str, shown: bool) -> None:
    stepped(api)
    page = api.client.get(f"/?{query}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert ('data-alert="' in html) is shown
    assert ("No alerts match these filters" in html) is not shown


def test_inbox_filter_errors_are_pages_not_500s(api: Api) -> None:
    stepped(api)
    unknown = api.client.get("/?repository=nope")
    assert unknown.status_code == 404 and "no repository named" in unknown.get_data(as_text=True)
    bad_state = api.client.get("/?state=on-fire")
    assert bad_state.status_code == 400 and "unknown alert state" in bad_state.get_data(as_text=True)
    assert api.client.get("/?after=xyz").status_code == 400
    # "²" is a digit to str.isdigit() and not to int(): each was a 500
    for url in ("/?after=%C2%B2", "/compare?base=a&head=b&limit=%C2%B2", "/compare?base=a&head=b&page=%C2%B2",
                "/diff?base=%C2%B2&head=1", "/diff?base=1&head=%D9%A1"):
        assert api.client.get(url).status_code in (400, 404), url


def test_inbox_pages_through_older_alerts(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    import web.views

    # Two steps in two repositories: two alerts; pages of one.
    store(api, builders.step_series_manifests(LEVELS, repo="one"))
    store(api, builders.step_series_manifests(LEVELS, repo="two", seed=1))
    monkeypatch.setattr(web.views, "PAGE_SIZE", 1)
    first = api.client.get("/").get_data(as_text=True)
    assert first.count('data-alert="') == 1 and "2 alerts; 1 on this page." in first
    older = re.search(r'id="older" href="([^"]+)"', first)
    assert older
    second = api.client.get(older.group(1).replace("&amp;", "&")).get_data(as_text=True)
    assert second.count('data-alert="') == 1 and 'id="older"' not in second
    ids = {re.search(r'data-alert="(\d+)"', html).group(1) for html in (first, second)}  # type: ignore[union-attr]
    assert len(ids) == 2
    # The branch filter is applied here, not by the store: it pages the same way.
    filtered = api.client.get("/?branch=main").get_data(as_text=True)
    assert filtered.count('data-alert="') == 1 and 'id="older"' in filtered


def test_commit_list_moved_to_commits(api: Api) -> None:
    docs = stepped(api)
    html = api.client.get("/commits").get_data(as_text=True)
    assert html.count("data-sha=") == len(docs)
    assert f'href="/commits/{docs[5]["commit"]["sha"]}?repo=demo"' in html


SASS = Path(__file__).parents[1] / "fixtures" / "sass" / "synthetic_sm80_sm90a.sass"  # 52 instructions


def test_a_code_regression_is_counted_and_shown_in_what_it_counts(api: Api) -> None:
    """A static finding (the same SASS at commits 0 to 2, one instruction more at 3) through the real pipeline: the
    commit list counts it as the regression its alert is, and every page and the API show its values as the
    instructions they are, not as the seconds of the wall-time series it sits on."""
    line = "        /*0090*/                   LDGDEPBAR ;\n"
    grown = SASS.read_text().replace(line, line + "        /*0098*/                   NOP ;\n").encode()
    for position, listing in enumerate([SASS.read_bytes()] * 3 + [grown]):
        ref = api.ctx.artifacts.put(listing, "sass", "k.sass")
        result = builders.result(artifacts=[{"kind": "sass", "name": "k.sass", "sha256": ref.sha256,
                                             "size": ref.size}])
        submit_manifest(api.ctx.sessions, api.ctx.queue, builders.manifest(position, [result]), api.ctx.artifacts)
    with api.ctx.sessions() as s:
        [alert] = list_alerts(s)
        series_id = alert.findings[0].series_id
    assert alert.kind == "regression"
    commits = api.client.get("/commits").get_data(as_text=True)
    assert "1 flagged with a regression" in commits and commits.count('class="flagged"') == 1
    assert "code grew +1.9%" in commits and "52 instructions → 53 instructions" in commits
    assert "kernel_instructions" in commits and "wall_time" not in commits
    findings = api.client.get(f"/series/{series_id}").get_data(as_text=True)
    findings = findings[findings.index('id="findings"'):]
    assert "<td class=\"num\">52 instructions</td><td class=\"num\">53 instructions</td>" in findings
    inbox = api.client.get("/").get_data(as_text=True)
    assert "kernel_instructions · static-diff" in inbox and "wall_time ·" not in inbox
    [found] = api.client.get("/api/v1/findings?kind=static", headers=api.auth("submit")).get_json()["findings"]
    assert (found["metric"], found["unit"], found["value_before"], found["value_after"]) == (
        "kernel_instructions", "instructions", 52, 53)
    [listed] = api.client.get("/api/v1/alerts", headers=api.auth("submit")).get_json()["alerts"]
    assert [(f["metric"], f["unit"]) for f in listed["findings"]] == [("kernel_instructions", "instructions")]


# ---- login, CSRF and triage ----------------------------------------------------------------------------------

def test_login_refuses_wrong_revoked_and_underscoped_tokens(api: Api) -> None:
    client = api.client
    wrong = log_in(client, "kw_000000000000_" + "x" * 43)
    assert wrong.status_code == 401 and "not valid" in wrong.get_data(as_text=True)
    garbage = log_in(client, "hello")
    assert garbage.status_code == 401
    submit_only = log_in(client, api.tokens["submit"])
    assert submit_only.status_code == 403 and "cannot triage" in submit_only.get_data(as_text=True)
    with unit_of_work(api.ctx.sessions) as s:
        revoke_token(s, "admin-bot")
    revoked = log_in(client, api.tokens["admin"])
    assert revoked.status_code == 401
    assert 'id="login-link"' in client.get("/").get_data(as_text=True)  # still nobody


def test_login_with_a_triage_token_names_the_user(api: Api) -> None:
    ok = log_in(api.client, api.tokens["triage"])
    assert ok.status_code == 303 and ok.headers["Location"] == "/"
    html = api.client.get("/").get_data(as_text=True)
    assert "triage-bot" in html and 'id="logout"' in html
    # The cookie holds the token's id, signed; never the token.
    cookie = api.client.get_cookie("session")
    assert cookie is not None and api.tokens["triage"] not in cookie.value


def test_login_refuses_an_offsite_next(api: Api) -> None:
    csrf = csrf_of(api.client.get("/login").get_data(as_text=True))
    # A tab or newline is dropped by browsers (issue 18: /<TAB>/evil.example went to //evil.example), and a
    # newline in a Location header was a 500.
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "/\t/evil.example/phish",
                   "/\n/evil.example", "/\r\n/evil.example", "/\x7f/evil.example"):
        response = api.client.post("/login", data={"token": api.tokens["triage"], "csrf_token": csrf,
                                                   "next": target})
        assert response.headers["Location"] == "/"
        csrf = csrf_of(api.client.get("/login").get_data(as_text=True))


def test_triage_from_the_page_is_stored_and_shown(api: Api) -> None:
    stepped(api)
    alert_id = only_alert_id(api)
    log_in(api.client, api.tokens["triage"])
    html = api.client.get("/?repository=demo&state=untriaged").get_data(as_text=True)
    form = html[html.index(f'action="/alerts/{alert_id}/triage"'):]
    response = api.client.post(f"/alerts/{alert_id}/triage", data={
        "csrf_token": csrf_of(form), "state": "investigating", "note": "<b>looking</b> at the fusion",
        "return": re.search(r'name="return" value="([^"]*)"', form).group(1).replace("&amp;", "&"),  # type: ignore[union-attr]
    })
    assert response.status_code == 303
    location = response.headers["Location"]
    assert location.startswith("/?") and "repository=demo" in location and "state=untriaged" in location
    assert location.endswith(f"#alert-{alert_id}")
    with api.ctx.sessions() as s:
        alert = list_alerts(s)[0]
    assert alert.state == "investigating"
    assert alert.notes[-1].author == "triage-bot" and alert.notes[-1].text == "<b>looking</b> at the fusion"
    reloaded = api.client.get("/?repository=demo").get_data(as_text=True)
    assert 'data-state="investigating"' in reloaded and "Alert" in reloaded
    assert "&lt;b&gt;looking&lt;/b&gt;" in reloaded and "<b>looking</b>" not in reloaded
    # A triage that changes nothing is refused with a message, not a 500.
    again = api.client.post(f"/alerts/{alert_id}/triage", data={"csrf_token": csrf_of(reloaded),
                                                               "state": "investigating", "note": ""})
    assert again.status_code == 303
    page = api.client.get("/").get_data(as_text=True)
    assert "already investigating" in page
    # A NUL in the note: PostgreSQL's text cannot hold one (a 500 there, stored as given in SQLite).
    nul = api.client.post(f"/alerts/{alert_id}/triage", data={"csrf_token": csrf_of(page), "state": "",
                                                             "note": "a\x00b"})
    assert nul.status_code == 303 and "cannot hold a NUL" in api.client.get("/").get_data(as_text=True)
    with api.ctx.sessions() as s:
        assert not any("\x00" in n.text for n in list_alerts(s)[0].notes)


def test_triage_without_the_csrf_token_is_refused(api: Api) -> None:
    stepped(api)
    alert_id = only_alert_id(api)
    log_in(api.client, api.tokens["triage"])
    for data in ({"state": "fixed"}, {"state": "fixed", "csrf_token": "forged"}):
        refused = api.client.post(f"/alerts/{alert_id}/triage", data=data)
        assert refused.status_code == 400
    no_login_csrf = api.client.post("/login", data={"token": api.tokens["triage"]})
    assert no_login_csrf.status_code == 400
    assert api.client.post("/logout").status_code == 400
    with api.ctx.sessions() as s:
        assert list_alerts(s)[0].state == "untriaged"


def test_a_revoked_tokens_session_stops_working(api: Api) -> None:
    stepped(api)
    alert_id = only_alert_id(api)
    with unit_of_work(api.ctx.sessions) as s:
        _, token = create_token(s, "ada", ["triage"])
    log_in(api.client, token)
    html = api.client.get("/").get_data(as_text=True)
    assert "ada" in html and 'class="triage"' in html
    csrf = csrf_of(html)
    with unit_of_work(api.ctx.sessions) as s:
        revoke_token(s, "ada")
    refused = api.client.post(f"/alerts/{alert_id}/triage", data={"csrf_token": csrf, "state": "fixed"})
    assert refused.status_code == 403
    after = api.client.get("/").get_data(as_text=True)
    assert 'class="triage"' not in after and 'id="login-link"' in after
    with api.ctx.sessions() as s:
        assert list_alerts(s)[0].state == "untriaged"


def test_triage_of_an_unknown_alert_is_404(api: Api) -> None:
    log_in(api.client, api.tokens["triage"])
    csrf = csrf_of(api.client.get("/").get_data(as_text=True))
    assert api.client.post("/alerts/999999/triage", data={"csrf_token": csrf, "state": "fixed"}).status_code == 404


def test_logout_ends_the_session(api: Api) -> None:
    log_in(api.client, api.tokens["triage"])
    html = api.client.get("/").get_data(as_text=True)
    assert api.client.post("/logout", data={"csrf_token": csrf_of(html)}).status_code == 303
    assert 'id="login-link"' in api.client.get("/").get_data(as_text=True)
    assert api.client.get("/logout").status_code == 200


# ---- commit page ---------------------------------------------------------------------------------------------

def two_benchmark_docs(count: int = 8, step_at: int = 4) -> list[dict[str, Any]]:
    """Two benchmarks per commit; softmax doubles at ``step_at``, matmul stays put."""
    import numpy as np

    rng = np.random.default_rng(3)
    docs = []
    for position in range(count):
        level = 2e-3 if position >= step_at else 1e-3
        results = [builders.result(samples=[float(level * (1 + 0.01 * rng.standard_normal())) for _ in range(10)]),
                   builders.result(suite="matmul", name="matmul_tiled", params={"n": 512},
                                   samples=[float(5e-4 * (1 + 0.01 * rng.standard_normal())) for _ in range(10)])]
        docs.append(builders.manifest(position, results))
    return docs


def test_commit_page_compares_against_the_measured_parent(api: Api) -> None:
    docs = two_benchmark_docs()
    store(api, [run for doc in docs for run in builders.replicated(doc)])  # three runs a commit
    head, parent = docs[4]["commit"], docs[3]["commit"]
    page = api.client.get(f"/commits/{head['sha']}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert head["subject"] in html and f'title="{parent["sha"]}"' in html
    table = html[html.index('id="compare-table"'):]
    rows = re.findall(r'<tr class="v-(\w+)" data-verdict="\w+">\s*<td>([^<]+)', table)
    assert ("regression", "softmax/softmax_rows cols=4096 rows=256") in [(v, n.strip()) for v, n in rows]
    assert ("unchanged", "matmul/matmul_tiled n=512") in [(v, n.strip()) for v, n in rows]
    assert rows[0][0] == "regression"  # by change, the default: the regression first
    assert re.search(r"\+\d+\.\d%</td>", table) and "ms ±" in table  # change in percent, times with a unit
    assert 'id="geomeans"' in html and 'id="ratio-figure"' in html
    assert "No kernel code was recorded" in html
    # Sorted by name instead: matmul first.
    by_name = api.client.get(f"/commits/{head['sha']}?sort=name").get_data(as_text=True)
    first = re.search(r'<tr class="v-(\w+)" data-verdict', by_name[by_name.index('id="compare-table"'):])
    assert first and first.group(1) == "unchanged"
    assert 'href="/commits/' + head["sha"] + '?sort=p"' in by_name  # a sortable header keeps the path
    # Only the regressions.
    only = api.client.get(f"/commits/{head['sha']}?verdict=regression").get_data(as_text=True)
    assert only.count('data-verdict="') == 1


def test_commit_page_of_the_first_commit_and_errors(api: Api) -> None:
    docs = two_benchmark_docs(3)
    store(api, docs)
    first = api.client.get(f"/commits/{docs[0]['commit']['sha']}")
    assert first.status_code == 200 and 'id="no-parent"' in first.get_data(as_text=True)
    unknown = api.client.get("/commits/" + "f" * 40)
    assert unknown.status_code == 404 and "no run or commit" in unknown.get_data(as_text=True)
    assert unknown.mimetype == "text/html"
    assert api.client.get(f"/commits/{docs[1]['commit']['sha']}?sort=bogus").status_code == 400
    assert api.client.get(f"/commits/{docs[1]['commit']['sha']}?page=0").status_code == 400


def test_a_large_comparison_is_listed_a_page_at_a_time(api: Api) -> None:
    def results() -> list[dict[str, Any]]:
        return [builders.result(suite="grid", name=f"case_{i:02d}", params={},
                                samples=[1e-3 * (1 + 0.001 * j) for j in range(6)]) for i in range(25)]

    store(api, [builders.manifest(0, results()), builders.manifest(1, results())])
    head = builders.sha_for("demo-1")
    html = api.client.get(f"/commits/{head}?limit=10&sort=name").get_data(as_text=True)
    assert html.count('data-verdict="') == 10 and "rows 1–10 of 25" in html
    third = api.client.get(f"/commits/{head}?limit=10&sort=name&page=3").get_data(as_text=True)
    assert third.count('data-verdict="') == 5 and "rows 21–25 of 25" in third and 'id="next-page"' not in third
    assert "grid/case_24" in third and "grid/case_00" not in third


# ---- compare page --------------------------------------------------------------------------------------------

def test_compare_page_shows_table_chart_geomean(api: Api) -> None:
    docs = two_benchmark_docs()
    store(api, [run for doc in docs for run in builders.replicated(doc)])  # three runs a commit
    base, head = docs[0]["commit"]["sha"], docs[7]["commit"]["sha"]
    page = api.client.get(f"/compare?base={base[:8]}&head={head}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="sides"' in html and base[:10] in html and head[:10] in html
    assert 'data-verdict="regression"' in html and 'data-verdict="unchanged"' in html
    figure = re.search(r'<script id="ratio-figure" type="application/json">(.*?)</script>', html, re.S)
    assert figure and '"error_x"' in figure.group(1) and "geomean wall_time" in figure.group(1)
    assert re.search(r'<td class="num">\[[+-]\d+\.\d%, [+-]\d+\.\d%\]</td>', html)  # the geomean's interval
    assert api.client.get("/compare").status_code == 200  # the empty form


def test_compare_page_errors_are_pages(api: Api) -> None:
    store(api, two_benchmark_docs(2))
    # Two more commits whose shas share a prefix: a prefix of both is ambiguous.
    store(api, [builders.manifest(5, commit=builders.commit(5, sha="abcd" + "1" * 36)),
                builders.manifest(6, commit=builders.commit(6, sha="abcd" + "2" * 36))])
    sha = builders.sha_for("demo-0")
    cases = {f"/compare?base=abcd&head={sha}": (400, "ambiguous"),
             f"/compare?base=ab&head={sha}": (400, "too short"),
             f"/compare?base={'e' * 40}&head={sha}": (404, "no run or commit"),
             f"/compare?base={sha}": (400, "give both base and head"),
             f"/compare?base={sha}&head={sha}&verdict=awful": (400, "verdict")}
    for url, (status, text) in cases.items():
        response = api.client.get(url)
        assert response.status_code == status, url
        assert response.mimetype == "text/html" and text in response.get_data(as_text=True), url


def test_compare_page_lists_kernel_count_changes(api: Api) -> None:
    docs = two_benchmark_docs(2)
    store(api, docs)
    # Kernel records come from parsing real dumps (tests/e2e covers that path); here they are written beside the
    # stored results, as the parser writes them, to check the join and the diff.
    with unit_of_work(api.ctx.sessions) as s:
        artifact = Artifact(sha256="0" * 64, kind="disassembly", size=1, created_at=datetime.now(UTC))
        s.add(artifact)
        s.flush()
        for position, (instructions, bundles) in enumerate(((120, 40), (150, 40))):
            result_id = s.scalars(select(Result.id).join(Run).join(Series).where(
                Run.commit_id == select(Run.commit_id).where(Run.run_uid == docs[position]["run_id"])
                .scalar_subquery(), Series.metric == "wall_time")).first()
            s.add(KernelCode(result_id=result_id, artifact_id=artifact.id, name="fusion.3", isa="x86-64",
                             instructions=instructions, bundles=bundles, mix={}, details={}, parser_version=1))
            s.add(KernelCode(result_id=result_id, artifact_id=artifact.id, name="loop_fusion", isa="x86-64",
                             instructions=10, bundles=None, mix={}, details={}, parser_version=1))
    html = api.client.get(f"/compare?base={docs[0]['commit']['sha']}&head={docs[1]['commit']['sha']}"
                          ).get_data(as_text=True)
    table = html[html.index('id="static-diff"'):]
    assert "fusion.3" in table and "+30" in table and "loop_fusion" not in table
    assert "1 of 2 kernels differ" in html


def test_every_page_form_post_checks_the_csrf_token(api: Api) -> None:
    """A page route added later that writes without the check fails here: each POST of the pages (the web
    package; the API and webhooks authenticate otherwise) refuses a request without the session's token."""
    log_in(api.client, api.tokens["triage"])
    posts = [r for r in api.app.url_map.iter_rules()
             if api.app.view_functions[r.endpoint].__module__.startswith("web.") and r.methods
             and "POST" in r.methods]
    assert {r.rule for r in posts} >= {"/login", "/logout", "/alerts/<int:alert_id>/triage"}
    for rule in posts:
        built = rule.build({name: 1 for name in rule.arguments}, append_unknown=False)
        assert built is not None
        assert api.client.post(built[1], data={"state": "fixed"}).status_code == 400, rule.rule
