"""Hostile uploads through /api/v1 on both databases: a decompression bomb, manifests too large, too long, with
NaN, with unicode and control characters, artifact names and digests that try to name a path. Each is refused in
the stable error shape, or stored whole and read back exactly; a refusal leaves no row and no file behind, and
nothing is ever written outside the artifact store."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import InvalidInput
from service.contract import parse_manifest
from service.contract.manifest import MAX_RESULTS
from service.store.models import (
    Artifact,
    Benchmark,
    Commit,
    Environment,
    Repository,
    Result,
    ResultArtifact,
    Run,
    Series,
)
from tests import builders
from tests.api_client import Api, error_of, make_api
from tests.bombs import gzip_bomb

TABLES = (Repository, Commit, Environment, Run, Benchmark, Series, Result, Artifact, ResultArtifact)


@pytest.fixture
def api(sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> Iterator[Api]:
    """The API with its home (artifact store inside) in a parent folder of its own, so a test can see every file
    written anywhere near it."""
    api = make_api(database_url, tmp_path / "parent" / "home")
    try:
        yield api
    finally:
        api.ctx.close()


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def counts(api: Api) -> dict[str, int]:
    with api.ctx.sessions() as s:
        return {t.__tablename__: s.scalar(select(func.count()).select_from(t)) or 0 for t in TABLES}


class Guard:
    """Counts rows and files before, and checks after, that a refused upload wrote nothing anywhere."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.parent = api.ctx.artifacts.root.parents[1]
        self.rows = counts(api)
        self.files = files_under(self.parent)

    def nothing_written(self) -> None:
        assert counts(self.api) == self.rows
        assert files_under(self.parent) == self.files


def post(api: Api, body: dict[str, Any] | str | bytes) -> Any:
    data = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
    return api.client.post("/api/v1/runs", data=data, headers={**api.auth("submit"),
                                                               "Content-Type": "application/json"})


def refused(api: Api, body: dict[str, Any] | str | bytes, status: int = 400, *words: str) -> str:
    guard = Guard(api)
    response = post(api, body)
    error = error_of(response)
    assert response.status_code == status, (response.status_code, error)
    assert error["code"] == ("payload_too_large" if status == 413 else "invalid_input")
    for word in words:
        assert word in error["message"], (word, error["message"])
    guard.nothing_written()
    return error["message"]


# --- decompression bombs ----------------------------------------------------------------------------------------

def test_a_gzip_bomb_is_stored_as_sent_and_refused_by_the_parse_with_its_error(api: Api) -> None:
    api.ctx.artifacts.max_bytes = 8 << 20
    bomb = gzip_bomb(1 << 30)  # 1 GiB of zeros in about 1 MiB
    hlo = b"HloModule m\n\nENTRY %main () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n"
    outside = files_under(api.ctx.artifacts.root.parents[1])
    bomb_digest, hlo_digest = api.upload(bomb), api.upload(hlo)
    doc = builders.manifest()
    doc["results"][0]["artifacts"] = [
        {"kind": "xplane", "name": "host.xplane.pb.gz", "sha256": bomb_digest, "size": len(bomb)},
        {"kind": "hlo", "name": "module_0001.jit_f.txt", "sha256": hlo_digest, "size": len(hlo)}]
    started = time.monotonic()
    response = post(api, doc)  # the embedded form parses in-process, right after the commit
    assert response.status_code == 201, response.json
    assert time.monotonic() - started < 30
    with api.ctx.sessions() as s:
        bad = s.scalars(select(Artifact).where(Artifact.sha256 == bomb_digest)).one()
        good = s.scalars(select(Artifact).where(Artifact.sha256 == hlo_digest)).one()
    assert bad.parse_error is not None and bad.parse_error.startswith(
        f"host.xplane.pb.gz: expands past {8 << 20} bytes"), bad.parse_error
    assert good.parse_error is None and good.parsed_version is not None  # the rest of the run is still parsed
    # Stored as sent, never expanded: the download is the compressed bytes, their digest the one uploaded.
    download = api.client.get(f"/api/v1/artifacts/{bomb_digest}")
    assert download.status_code == 200 and download.data == bomb
    assert download.headers["Content-Disposition"] == f"attachment; filename={bomb_digest}"
    new = files_under(api.ctx.artifacts.root.parents[1]) - outside
    assert new and all(api.ctx.artifacts.root in p.parents for p in new), new
    assert not [p for p in new if p.name.startswith(".incoming-")]


def test_an_artifact_over_the_cap_is_refused_before_it_is_stored(api: Api) -> None:
    api.ctx.artifacts.max_bytes = 1 << 20
    data = bytes(2 << 20)
    digest = hashlib.sha256(data).hexdigest()
    guard = Guard(api)
    response = api.client.put(f"/api/v1/artifacts/{digest}", data=data, headers=api.auth("submit"))
    assert response.status_code == 413 and error_of(response)["code"] == "payload_too_large"
    guard.nothing_written()


def test_a_damaged_stored_artifact_is_repaired_by_uploading_it_again(api: Api) -> None:
    """Write-once must not mean broken for good: a stored file truncated on disk answered HEAD 200 (so no runner
    sent it again), a re-PUT of the right bytes "created": false, and GET "damaged". Now HEAD says 404 for a file
    that does not hold its bytes, and the PUT replaces it."""
    data = b"HloModule m\n" * 5000
    digest = hashlib.sha256(data).hexdigest()
    submit = api.auth("submit")
    assert api.client.put(f"/api/v1/artifacts/{digest}", data=data, headers=submit).status_code == 201
    path = api.ctx.artifacts.path_for(digest)
    path.write_bytes(path.read_bytes()[:40])  # truncated on disk
    assert api.client.head(f"/api/v1/artifacts/{digest}").status_code == 404
    assert api.client.get(f"/api/v1/artifacts/{digest}").status_code == 404
    again = api.client.put(f"/api/v1/artifacts/{digest}", data=data, headers=submit)
    assert again.status_code == 201 and again.json["created"] is True
    assert api.client.head(f"/api/v1/artifacts/{digest}").status_code == 200
    assert api.client.get(f"/api/v1/artifacts/{digest}").data == data
    twice = api.client.put(f"/api/v1/artifacts/{digest}", data=data, headers=submit)
    assert twice.status_code == 200 and twice.json["created"] is False  # intact: write-once as before


# --- manifests: size, length, numbers ---------------------------------------------------------------------------

def test_a_manifest_over_the_size_limit_is_413_before_parsing(api: Api) -> None:
    api.app.config["KERNELWATCH_MAX_MANIFEST_BYTES"] = 4096
    doc = builders.manifest(results=[builders.result(name=f"r{i}") for i in range(40)])
    message = refused(api, doc, 413)
    assert "4096" in message
    refused(api, b"{" * 10_000, 413)  # not even looked at: it would not parse


def test_more_results_than_the_limit_are_refused_up_front(api: Api) -> None:
    results = [{"suite": "s", "name": "n", "params": {"i": i}, "status": "ok", "samples": [1e-3]}
               for i in range(100_000)]
    started = time.monotonic()
    message = refused(api, builders.manifest(results=results), 400, "100000 results",
                      f"over the limit of {MAX_RESULTS}")
    assert time.monotonic() - started < 30, message
    refused(api, builders.manifest(results=results[:MAX_RESULTS + 1]), 400, f"{MAX_RESULTS + 1} results")


def test_a_run_of_many_results_is_stored_whole(api: Api) -> None:
    results = [builders.result(suite="many", name="r", params={"i": i}) for i in range(300)]
    doc = builders.manifest(results=results)
    assert post(api, doc).status_code == 201
    stored = api.client.get(f"/api/v1/runs/{doc['run_id']}/results").json["results"]
    assert sorted(r["params"]["i"] for r in stored if r["metric"] == "wall_time") == list(range(300))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinite_samples_are_refused_naming_the_result(api: Api, literal: str) -> None:
    poisoned = builders.result(name="poisoned", samples=[0.5, 0.25, 0.125])
    doc = builders.manifest(results=[builders.result(name="fine"), poisoned])
    text = json.dumps(doc).replace("[0.5, 0.25, 0.125]", f"[0.5, {literal}, 0.125]")
    assert literal in text
    refused(api, text, 400, "results.1 (softmax/poisoned).samples", "sample 1 is")


@pytest.mark.parametrize(("field", "value"), [("flops", "Infinity"), ("compile_time_s", "NaN"),
                                              ("max_abs_error", "1e999")])
def test_nan_and_infinite_figures_are_refused(api: Api, field: str, value: str) -> None:
    poisoned = builders.result(name="poisoned")
    poisoned[field] = 123.0
    doc = builders.manifest(results=[poisoned])
    text = json.dumps(doc).replace(f'"{field}": 123.0', f'"{field}": {value}')
    refused(api, text, 400, f"results.0 (softmax/poisoned).{field}", "finite")


@pytest.mark.parametrize("params", [{"x": float("nan")}, {"x": 10**30}, {"": 1}, {"k" * 201: 1},
                                    {f"p{i}": i for i in range(65)}])
def test_parameters_a_series_identity_cannot_carry_are_refused(api: Api, params: dict[str, Any]) -> None:
    refused(api, builders.manifest(results=[builders.result(params=params)]), 400, "params")


@pytest.mark.parametrize(("path", "value", "words"), [
    (("commit", "position"), 2**31, "commit.position"),
    (("pr_number",), 2**40, "pr_number"),
    (("started_at",), "0001-01-01T00:00:00+01:00", "started_at"),
    (("finished_at",), "9999-12-31T23:59:59-05:00", "finished_at"),
    (("finished_at",), "2026-02-01T00:10:00", "UTC offset"),
])
def test_numbers_and_times_past_what_the_database_reads_back_are_refused(api: Api, path: tuple[str, ...],
                                                                         value: Any, words: str) -> None:
    doc = builders.manifest()
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    refused(api, doc, 400, words)


def test_json_nested_past_the_parser_is_400_not_a_crash(api: Api) -> None:
    refused(api, "[" * 100_000 + "]" * 100_000, 400, "nested too deeply")
    doc = builders.manifest()
    doc["environment"]["extra"] = {"deep": json.loads("[" * 500 + "]" * 500)}
    refused(api, doc, 400, "environment.extra.deep")


# --- text: unicode and control characters -----------------------------------------------------------------------

UNICODE = "naïve 数据 🚀 e\u0301 \u202egnp.exe \u200b ∑"


def test_unicode_is_stored_and_read_back_exactly(api: Api) -> None:
    failed = builders.result(name="broken", status="failed", samples=[],
                             message=f"Traceback:\n\tKeyError: '{UNICODE}'\n\x1b[31mred\x1b[0m")
    ok = builders.result(name="unicode_params", params={"dtype": UNICODE, "ключ": 1, "🔑": True})
    doc = builders.manifest(results=[failed, ok])
    doc["commit"]["subject"] = f"fix: {UNICODE}\n\nbody line"
    doc["commit"]["author"] = "Zoë Ångström <zoe@例え.jp>"
    doc["environment"]["extra"] = {"hostname": UNICODE}
    assert post(api, json.dumps(doc, ensure_ascii=False).encode("utf-8")).status_code == 201
    run = api.client.get(f"/api/v1/runs/{doc['run_id']}").json
    assert run["commit_subject"] == doc["commit"]["subject"]
    results = {r["name"]: r for r in api.client.get(f"/api/v1/runs/{doc['run_id']}/results").json["results"]}
    assert results["broken"]["message"] == failed["message"]
    assert results["unicode_params"]["params"] == ok["params"]
    with api.ctx.sessions() as s:
        stored = s.scalars(select(Run).where(Run.run_uid == doc["run_id"])).one()
        commit = s.get(Commit, stored.commit_id)
        assert stored.host_details == {"hostname": UNICODE} and commit is not None
        assert commit.author == doc["commit"]["author"]
    # The same document again is the same run (its digest survives the round trip), not a conflict.
    again = post(api, json.dumps(doc).encode())
    assert again.status_code == 200 and again.json["created"] is False


@pytest.mark.parametrize("field", ["suite", "name", "metric"])
def test_unicode_in_identifiers_is_refused_plainly(api: Api, field: str) -> None:
    result = {**builders.result(), field: "sóftmax"}
    refused(api, builders.manifest(results=[result]), 400, f".{field}", "pattern")


@pytest.mark.parametrize("bad", ["\x00", "\n", "\r", "\t", "\x1b", "\x7f", "\x85"])
def test_control_characters_in_names_and_parameters_are_refused(api: Api, bad: str) -> None:
    code = f"U+{ord(bad):04X}"
    refused(api, builders.manifest(results=[builders.result(params={f"k{bad}": 1})]), 400,
            "results.0 (softmax/softmax_rows).params", code)
    refused(api, builders.manifest(results=[builders.result(params={"k": f"v{bad}"})]), 400,
            "results.0 (softmax/softmax_rows).params.k", code)
    for field in ("suite", "name", "metric"):
        result = {**builders.result(), field: f"a{bad}b"}
        refused(api, builders.manifest(results=[result]), 400, f".{field}")
    refused(api, builders.manifest(branch=f"main{bad}"), 400, "branch", code)
    refused(api, builders.manifest(environment=builders.environment(device_kind=f"cpu{bad}")), 400,
            "environment.device_kind", code)
    refused(api, builders.manifest(environment=builders.environment(extra={f"host{bad}": "x"})), 400,
            "environment.extra", code)


@pytest.mark.parametrize("field", [("commit", "subject"), ("commit", "author"), ("environment", "xla_flags")])
def test_nul_and_lone_surrogates_are_refused_even_in_free_text(api: Api, field: tuple[str, str]) -> None:
    doc = builders.manifest()
    doc[field[0]][field[1]] = "before\x00after"
    refused(api, doc, 400, ".".join(field), "U+0000", "cannot be stored")
    doc[field[0]][field[1]] = "SURROGATE"
    text = json.dumps(doc).replace("SURROGATE", "\\ud800")
    refused(api, text, 400, ".".join(field), "U+D800")
    message = builders.result(name="broken", status="failed", samples=[], message="oops\x00")
    refused(api, builders.manifest(results=[message]), 400, "results.0 (softmax/broken).message", "U+0000")


def test_a_value_the_database_refuses_rolls_the_whole_run_back(api: Api) -> None:
    """Past the contract (a manifest built in-process, not parsed): the database refuses the last result's NUL
    after the run, its commit, series and earlier results were inserted. Nothing of it stays, and the caller is
    told it is invalid, not that the server broke."""
    if api.ctx.settings.effective_database_url.startswith("sqlite"):
        pytest.skip("SQLite stores NUL: the refusal to provoke is PostgreSQL's")
    results = [builders.result(name=f"r{i}") for i in range(50)]
    manifest = parse_manifest(builders.manifest(position=7, results=results))
    last = manifest.results[-1].model_copy(update={"message": "nul\x00here"})
    poisoned = manifest.model_copy(update={"results": [*manifest.results[:-1], last]})
    guard = Guard(api)
    with pytest.raises(InvalidInput, match="nothing was stored"):
        api.ctx.submit(poisoned)
    guard.nothing_written()
    assert api.ctx.submit(manifest).created  # the same run, without the poison, is stored whole
    after = counts(api)
    assert after["run"] == guard.rows["run"] + 1 and after["result"] >= guard.rows["result"] + 50


# --- artifact names and digests that try to name a path ---------------------------------------------------------

HOSTILE_NAMES = ["../../../../tmp/pwned", "../x", "..", ".", "/etc/passwd", "a/b", "a\\b", "C:\\evil",
                 "a\x00b", "x\r\nSet-Cookie: a=b", "x\nX-Injected: 1", "", " ", ".hidden", "-rf", "a" * 256,
                 "%2e%2e%2fx", "file:///etc/passwd", "naïve.txt"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_artifact_names_that_are_not_plain_file_names_are_refused(api: Api, name: str) -> None:
    digest = api.upload(b"HloModule m\n")
    doc = builders.manifest()
    doc["results"][0]["artifacts"] = [{"kind": "hlo", "name": name, "sha256": digest, "size": 12}]
    refused(api, doc, 400, "results.0 (softmax/softmax_rows).artifacts")


@pytest.mark.parametrize("kind", ["../x", "X", "a b", "a\x00", "k" * 33])
def test_artifact_kinds_outside_the_grammar_are_refused(api: Api, kind: str) -> None:
    digest = api.upload(b"HloModule m\n")
    doc = builders.manifest()
    doc["results"][0]["artifacts"] = [{"kind": kind, "name": "m.txt", "sha256": digest, "size": 12}]
    refused(api, doc, 400, "artifacts")


@pytest.mark.parametrize("path", ["..%2F..%2F..%2Ftmp%2Fpwned", "%2e%2e", "..", "../../etc/passwd",
                                  "%00" + "a" * 63, "A" * 64, "a" * 63, "a" * 65, "%2Fetc%2Fpasswd",
                                  "ab%0d%0aSet-Cookie:x"])
def test_digests_that_try_to_name_a_path_write_nothing(api: Api, path: str) -> None:
    guard = Guard(api)
    for method in ("PUT", "GET", "HEAD"):
        response = api.client.open(f"/api/v1/artifacts/{path}", method=method, data=b"payload",
                                   headers=api.auth("submit"))
        assert 400 <= response.status_code < 500, (method, path, response.status_code)
        if method != "HEAD":  # no body to a HEAD
            error_of(response)
        assert "Set-Cookie" not in response.headers
    guard.nothing_written()


def test_a_valid_name_is_metadata_only_never_a_path(api: Api) -> None:
    """A name that looks like a file elsewhere (``passwd``) is stored as a label: the bytes live under their
    digest in the store, and the download is named by the digest, not by the name."""
    outside = files_under(api.ctx.artifacts.root.parents[1])
    digest = api.upload(b"HloModule m\n")
    doc = builders.manifest()
    doc["results"][0]["artifacts"] = [{"kind": "hlo", "name": "passwd", "sha256": digest, "size": 12}]
    assert post(api, doc).status_code == 201
    new = files_under(api.ctx.artifacts.root.parents[1]) - outside
    assert [p.relative_to(api.ctx.artifacts.root) for p in new] == [Path(digest[:2]) / f"{digest}.gz"]
    download = api.client.get(f"/api/v1/artifacts/{digest}")
    assert download.headers["Content-Disposition"] == f"attachment; filename={digest}"
