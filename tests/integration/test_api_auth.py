"""Every write route of /api/v1, found by walking the URL map, refuses a missing, wrong, revoked or under-scoped
token: a new endpoint cannot be added without a scope, nor reached without one."""

from __future__ import annotations

from sqlalchemy import func, select
from werkzeug.routing import Rule

from service import tokens
from service.api.auth import PUBLIC, READ
from service.pipeline.tokens import create_token, revoke_token
from service.store.db import unit_of_work
from service.store.models import Artifact, Run
from tests import builders
from tests.api_client import Api, error_of

WRITE_METHODS = {"POST", "PUT", "DELETE", "PATCH"}
KNOWN_WRITES = {("PUT", "/api/v1/artifacts/<sha256>"), ("POST", "/api/v1/runs"), ("POST", "/api/v1/runs/enqueue"),
                ("POST", "/api/v1/alerts/<int:alert_id>/triage"), ("POST", "/api/v1/tokens"),
                ("DELETE", "/api/v1/tokens/<int:token_id>")}


def api_rules(api: Api) -> list[Rule]:
    return [r for r in api.app.url_map.iter_rules() if r.rule.startswith("/api/v1/")]


def sample_url(rule: Rule) -> str:
    values: dict[str, object] = {}
    for name in rule.arguments:
        converter = rule._converters[name]  # noqa: SLF001 - which converter decides what a valid value is
        values[name] = 1 if type(converter).__name__ == "IntegerConverter" else (
            "0" * 64 if name == "sha256" else "x")
    built = rule.build(values, append_unknown=False)
    assert built is not None
    return built[1]


def test_every_api_route_says_what_it_needs(api: Api) -> None:
    for rule in api_rules(api):
        needed = getattr(api.app.view_functions[rule.endpoint], "required_scope", None)
        if rule.methods and rule.methods & WRITE_METHODS:
            assert needed in tokens.SCOPES, f"{rule.rule} writes without a scope"
        else:
            assert needed in (READ, PUBLIC, *tokens.SCOPES), f"{rule.rule} is not marked"


def test_every_write_refuses_bad_tokens(api: Api) -> None:
    with unit_of_work(api.ctx.sessions) as s:
        everything, revoked = (create_token(s, name, list(tokens.SCOPES))[1] for name in ("all", "gone"))
        revoke_token(s, "gone")
    prefix = tokens.parse(everything)[0]
    refusals = {
        "missing": ({}, 401),
        "not a bearer": ({"Authorization": f"Basic {everything}"}, 401),
        "malformed": ({"Authorization": "Bearer hunter2"}, 401),
        "wrong secret": ({"Authorization": f"Bearer kw_{prefix}_{'A' * 43}"}, 401),
        "unknown prefix": ({"Authorization": f"Bearer kw_{'0' * 12}_{tokens.parse(everything)[1]}"}, 401),
        "revoked": ({"Authorization": f"Bearer {revoked}"}, 401),
    }
    seen = set()
    for rule in api_rules(api):
        scope = api.app.view_functions[rule.endpoint].required_scope
        lacking = [s for s in tokens.SCOPES if not tokens.grants([s], scope)]
        assert lacking, f"every scope grants {scope}?"
        with unit_of_work(api.ctx.sessions) as s:
            under = create_token(s, f"under-{rule.endpoint}", lacking)[1]
        url = sample_url(rule)
        for method in sorted((rule.methods or set()) & WRITE_METHODS):
            seen.add((method, rule.rule))
            body = builders.manifest()
            cases = {**refusals, "under-scoped": ({"Authorization": f"Bearer {under}"}, 403)}
            for what, (headers, status) in cases.items():
                response = api.client.open(url, method=method, json=body, headers=headers)
                assert response.status_code == status, f"{method} {rule.rule} with a {what} token"
                assert error_of(response)["code"] == ("forbidden" if status == 403 else "unauthorized")
                if status == 401:
                    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert seen >= KNOWN_WRITES  # the walk found the routes it is meant to guard
    with api.ctx.sessions() as s:  # and none of them did anything
        assert s.scalar(select(func.count(Run.id))) == 0 and s.scalar(select(func.count(Artifact.id))) == 0
    assert not api.ctx.artifacts.has("0" * 64)


def test_a_header_in_another_scheme_is_told_which_scheme_to_use(api: Api) -> None:
    with unit_of_work(api.ctx.sessions) as s:
        token = create_token(s, "writer", ["submit"])[1]
    for header, said in ((f"Token {token}", "uses the 'Token' scheme: send Authorization: Bearer <token>"),
                         (token, "uses no scheme this API knows: send Authorization: Bearer <token>"),
                         ("Bearer", "scheme is 'Bearer', with no token after it"),
                         (None, "this needs a token: send Authorization: Bearer <token>")):
        headers = {"Authorization": header} if header is not None else {}
        response = api.client.post("/api/v1/runs", json=builders.manifest(), headers=headers)
        assert response.status_code == 401
        assert said in error_of(response)["message"]
        assert token not in response.get_data(as_text=True)  # the refusal does not echo a secret back


def test_admin_holds_every_scope_and_last_use_is_recorded(api: Api) -> None:
    doc = builders.manifest()
    assert api.client.post("/api/v1/runs", json=doc, headers=api.auth("admin")).status_code == 201
    listed = api.client.get("/api/v1/tokens", headers=api.auth("admin")).json["tokens"]
    used = {t["name"]: t["last_used_at"] for t in listed}
    assert used["admin-bot"] is not None and used["triage-bot"] is None
