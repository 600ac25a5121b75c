"""Runs and artifacts through /api/v1 on both databases: upload, submit, read back, and every refusal."""

from __future__ import annotations

import hashlib
import json

import pytest
from sqlalchemy import func, select

from service.store.models import Run
from tests import builders
from tests.api_client import Api, error_of


def with_artifacts(doc: dict, *blobs: bytes) -> dict:  # type: ignore[type-arg]
    doc["results"][0]["artifacts"] = [
        {"kind": "hlo", "name": f"module_{i}.txt", "sha256": hashlib.sha256(b).hexdigest(), "size": len(b)}
        for i, b in enumerate(blobs)]
    return doc


def run_count(api: Api) -> int:
    with api.ctx.sessions() as s:
        return s.scalar(select(func.count(Run.id))) or 0


def test_round_trip_upload_submit_read(api: Api) -> None:
    blobs = [b"HloModule jit_softmax\n" * 50, b"\x7fELF\x02\x01" + bytes(range(256))]
    c, submit = api.client, api.auth("submit")
    first = hashlib.sha256(blobs[0]).hexdigest()
    assert c.head(f"/api/v1/artifacts/{first}").status_code == 404
    put = c.put(f"/api/v1/artifacts/{first}", data=blobs[0], headers=submit)
    assert put.status_code == 201 and put.json == {"sha256": first, "size": len(blobs[0]), "created": True}
    again = c.put(f"/api/v1/artifacts/{first}", data=blobs[0], headers=submit)
    assert again.status_code == 200 and again.json["created"] is False  # idempotent: a retry is harmless
    assert c.head(f"/api/v1/artifacts/{first}").status_code == 200
    api.upload(blobs[1])
    assert c.get(f"/api/v1/artifacts/{first}").data == blobs[0]

    doc = with_artifacts(builders.manifest(3), *blobs)
    created = c.post("/api/v1/runs", data=json.dumps(doc), headers=submit)
    assert created.status_code == 201 and created.json["created"] is True and created.json["run_id"] == doc["run_id"]
    repeat = c.post("/api/v1/runs", data=json.dumps(doc), headers=submit)
    assert repeat.status_code == 200 and repeat.json == {**created.json, "created": False}
    assert run_count(api) == 1

    run = c.get(f"/api/v1/runs/{doc['run_id']}").json
    assert run["commit_sha"] == doc["commit"]["sha"] and run["repository"] == "demo" and run["results"] == 1
    assert run["environment"]["device_kind"] == "cpu"
    results = c.get(f"/api/v1/runs/{doc['run_id']}/results").json["results"]
    assert results[0]["samples"] == doc["results"][0]["samples"] and results[0]["median"] == pytest.approx(1e-3)
    assert {a["sha256"] for a in results[0]["artifacts"]} == {hashlib.sha256(b).hexdigest() for b in blobs}
    repos = c.get("/api/v1/repositories").json["repositories"]
    assert [(r["name"], r["commits"], r["runs"]) for r in repos] == [("demo", 1, 1)]
    commits = c.get("/api/v1/commits?repository=demo&limit=5").json["commits"]
    assert [x["sha"] for x in commits] == [doc["commit"]["sha"]]
    assert c.get("/api/v1/commits?repository=elsewhere").status_code == 404  # no such repository, said
    assert error_of(c.get("/api/v1/commits?limit=0"))["code"] == "invalid_input"
    assert error_of(c.get("/api/v1/runs/nope"))["code"] == "not_found"


def test_a_changed_payload_under_the_same_run_id_is_a_conflict(api: Api) -> None:
    doc = builders.manifest()
    assert api.client.post("/api/v1/runs", json=doc, headers=api.auth("submit")).status_code == 201
    doc["results"][0]["samples"] = [2e-3, 2e-3, 2e-3]
    response = api.client.post("/api/v1/runs", json=doc, headers=api.auth("submit"))
    assert response.status_code == 409 and error_of(response)["code"] == "conflict"
    results = api.client.get(f"/api/v1/runs/{doc['run_id']}/results").json["results"]
    assert results[0]["samples"] == [1e-3, 1.01e-3, 0.99e-3]  # the first payload stands


def test_digest_and_size_are_checked_on_arrival(api: Api) -> None:
    c, submit = api.client, api.auth("submit")
    data = b"x" * 100
    wrong = hashlib.sha256(b"something else").hexdigest()
    bad = c.put(f"/api/v1/artifacts/{wrong}", data=data, headers=submit)
    assert bad.status_code == 400 and "sha256" in error_of(bad)["message"]
    assert not api.ctx.artifacts.has(wrong)
    assert c.put("/api/v1/artifacts/NOT-A-DIGEST", data=data, headers=submit).status_code == 400

    api.ctx.artifacts.max_bytes = 64
    digest = hashlib.sha256(data).hexdigest()
    big = c.put(f"/api/v1/artifacts/{digest}", data=data, headers=submit)
    assert big.status_code == 413 and error_of(big)["code"] == "payload_too_large"
    assert not api.ctx.artifacts.has(digest)

    api.app.config["KERNELWATCH_MAX_MANIFEST_BYTES"] = 200
    too_big = c.post("/api/v1/runs", json=builders.manifest(), headers=submit)
    assert too_big.status_code == 413 and error_of(too_big)["code"] == "payload_too_large"
    assert run_count(api) == 0


def test_malformed_or_invalid_manifests_are_400(api: Api) -> None:
    c, submit = api.client, api.auth("submit")
    for body in (b"{not json", b"[1, 2]", json.dumps({"format_version": 1}).encode(),
                 json.dumps({**builders.manifest(), "format_version": 99}).encode(), b""):
        response = c.post("/api/v1/runs", data=body, headers=submit)
        assert response.status_code == 400, body
        assert error_of(response)["code"] == "invalid_input"
    assert run_count(api) == 0


def test_missing_artifacts_are_named(api: Api) -> None:
    present, absent = b"uploaded", b"never uploaded"
    api.upload(present)
    doc = with_artifacts(builders.manifest(), present, absent)
    response = api.client.post("/api/v1/runs", json=doc, headers=api.auth("submit"))
    error = error_of(response)
    missing = hashlib.sha256(absent).hexdigest()
    assert response.status_code == 400 and missing in error["message"]
    assert error["details"] == {"missing_artifacts": [missing]}  # type: ignore[comparison-overlap]
    assert run_count(api) == 0
    api.upload(absent)
    assert api.client.post("/api/v1/runs", json=doc, headers=api.auth("submit")).status_code == 201


def test_series_findings_alerts_compare_and_triage(api: Api) -> None:
    c = api.client
    docs = builders.step_series_manifests([1e-3] * 5 + [2e-3] * 5)
    for doc in docs:
        assert c.post("/api/v1/runs", json=doc, headers=api.auth("submit")).status_code == 201
    findings = c.get("/api/v1/findings?direction=regression&kind=time").json["findings"]
    assert [f["commit_sha"] for f in findings] == [docs[5]["commit"]["sha"]]
    assert c.get("/api/v1/findings?direction=improvement").json["findings"] == []
    assert error_of(c.get("/api/v1/findings?kind=bogus"))["code"] == "invalid_input"

    series = c.get(f"/api/v1/series/{findings[0]['series_id']}").json
    assert len(series["points"]) == 10 and series["findings"][0]["id"] == findings[0]["id"]
    assert c.get("/api/v1/series/424242").status_code == 404

    alerts = c.get("/api/v1/alerts?state=untriaged&repository=demo").json["alerts"]
    assert len(alerts) == 1 and alerts[0]["commit_sha"] == docs[5]["commit"]["sha"]
    assert error_of(c.get("/api/v1/alerts?state=bogus"))["code"] == "invalid_input"
    triaged = c.post(f"/api/v1/alerts/{alerts[0]['id']}/triage", json={"state": "acknowledged", "note": "mine"},
                     headers=api.auth("triage"))
    assert triaged.status_code == 200 and triaged.json["state"] == "acknowledged"
    assert triaged.json["notes"][-1]["author"] == "triage-bot"  # the token's name, not a claim in the body
    assert error_of(c.post("/api/v1/alerts/424242/triage", json={"state": "fixed"},
                           headers=api.auth("triage")))["code"] == "not_found"

    # One run a side, and no commit of the series ran twice: no spread between runs is known, so no verdict.
    compared = c.get(f"/api/v1/compare?base={docs[4]['commit']['sha'][:10]}&head={docs[5]['run_id']}&repo=demo")
    body = compared.json
    assert compared.status_code == 200 and body["summary"]["inconclusive"] == 1
    assert body["head"]["runs"] == [docs[5]["run_id"]]
    # Two more runs of each commit: the replicates a verdict counts.
    for doc in (docs[4], docs[5]):
        for again in builders.replicated(doc)[1:]:
            assert c.post("/api/v1/runs", json=again, headers=api.auth("submit")).status_code == 201
    compared = c.get(f"/api/v1/compare?base={docs[4]['commit']['sha'][:10]}&head={docs[5]['commit']['sha']}"
                     "&repo=demo")
    assert compared.status_code == 200 and compared.json["summary"]["regression"] == 1
    assert error_of(c.get("/api/v1/compare?base=abc"))["code"] == "invalid_input"


def test_tokens_through_the_api(api: Api) -> None:
    c, admin = api.client, api.auth("admin")
    made = c.post("/api/v1/tokens", json={"name": "ci", "scopes": ["submit"]}, headers=admin)
    assert made.status_code == 201 and made.json["token"].startswith(f"kw_{made.json['prefix']}_")
    token = made.json["token"]
    listed = c.get("/api/v1/tokens", headers=admin)
    assert token not in listed.get_data(as_text=True) and "ci" in [t["name"] for t in listed.json["tokens"]]
    headers = {"Authorization": f"Bearer {token}"}
    assert c.post("/api/v1/runs", json=builders.manifest(), headers=headers).status_code == 201
    assert error_of(c.post("/api/v1/tokens", json={"name": "ci", "scopes": ["submit"]},
                           headers=admin))["code"] == "conflict"
    assert error_of(c.post("/api/v1/tokens", json={"name": "x", "scopes": ["root"]},
                           headers=admin))["code"] == "invalid_input"
    revoked = c.delete(f"/api/v1/tokens/{made.json['id']}", headers=admin)
    assert revoked.status_code == 200 and revoked.json["revoked_at"] is not None
    assert c.post("/api/v1/runs", json=builders.manifest(), headers=headers).status_code == 401
