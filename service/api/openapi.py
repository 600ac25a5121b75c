"""The OpenAPI 3.0 document of /api/v1, written out by hand from one table (a test checks that every route of
the URL map is in it, and nothing else)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flask import Response

from runners.host_health import HEAVY_STEAL_FRACTION
from service.api.auth import public
from service.api.blueprint import API_PREFIX, bp, reply

OBJECT: dict[str, Any] = {"type": "object"}
BYTES: dict[str, Any] = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


@dataclass(frozen=True)
class Op:
    method: str
    path: str
    summary: str
    scope: str | None = None  # None: a read (public unless KERNELWATCH_READ_TOKEN_REQUIRED=1)
    query: tuple[tuple[str, str, str], ...] = ()  # (name, type, description)
    body: dict[str, Any] | None = None  # request content
    ok: tuple[int, ...] = (200,)
    errors: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}


STATE_NAMES = "untriaged, acknowledged, investigating, invalid, wontfix, fixed, improvement"
# The filters the bounded reads share (service.store.read_filters); the time window is half-open.
FILTERS: tuple[tuple[str, str, str], ...] = (
    ("repository", "string", "repository name"),
    ("hardware", "string", "device kind (\"NVIDIA H200\", \"TPU v5 lite\", \"cpu\") or backend (\"tpu\"), any case"),
    ("since", "string", "ISO-8601 date or datetime (UTC unless an offset is given), inclusive: findings by when they "
     "were found, alerts by when raised, commits by authored date"),
    ("until", "string", "ISO-8601 date or datetime, exclusive"),
)
CURSOR = ("cursor", "string", "the `next` of the previous page (opaque), with the same filters")
FINDINGS_LIMIT = ("findings_limit", "integer", "findings listed per item, 0 to 200, default 20")

OPS: tuple[Op, ...] = (
    Op("get", "/health", "Service health: schema revision and version; 503 when the database is unreachable",
       errors=(503,)),
    Op("get", "/openapi.json", "This document"),
    Op("put", "/artifacts/{sha256}", "Upload an artifact's raw bytes under their sha256 (checked on arrival); "
       "uploading what is already stored answers 200", scope="submit", body=BYTES, ok=(200, 201),
       errors=(400, 413)),
    Op("head", "/artifacts/{sha256}", "Whether the service has an artifact (200 or 404)", errors=(404,)),
    Op("get", "/artifacts/{sha256}", "Download an artifact's bytes", errors=(404,),
       extra={"responses": {"200": {"description": "the artifact", "content": BYTES}}}),
    Op("post", "/runs", "Submit a finished run's manifest (format_version 1). Idempotent by run_id: the same "
       "payload again answers 200, another payload under the same run_id 409 (code conflict); a run whose repository "
       "name the store holds for another project (no root commit in common) 409 with code another_project; "
       "artifacts it references must be uploaded first (400 lists the missing ones)", scope="submit",
       body=_json("Manifest"), ok=(200, 201),
       errors=(400, 409, 413)),
    Op("post", "/runs/enqueue", "Enqueue a suite run at a commit on runner.<hardware> (503 in the embedded "
       "form, which has no runner queue)", scope="submit", body=_json("EnqueueRequest"), ok=(202,),
       errors=(400, 503)),
    Op("get", "/runs/{run_uid}", "A run: commit, environment, status, and host_health (the share of CPU time "
       "stolen and busy while it measured, 1-minute load, cores, GPU clocks and throttle reasons; null where the "
       "runner could not read them) with heavy_steal, whether the steal reached "
       f"{HEAVY_STEAL_FRACTION:.0%} of CPU time", errors=(404,)),
    Op("get", "/runs/{run_uid}/results", "A run's results with their samples and artifacts", errors=(404,)),
    Op("get", "/repositories", "Repositories with their commit and run counts"),
    Op("get", "/commits", "Measured commits, newest first (authored date), a page at a time; each with its worst "
       "findings_limit findings (those that flag the commit first) and finding_count; `next` is the cursor of the "
       "following page (null on the last)",
       query=(*FILTERS, ("limit", "integer", "commits per page, 1 to 1000, default 100"), CURSOR, FINDINGS_LIMIT),
       errors=(400, 404)),
    Op("get", "/series/{series_id}", "A series: per-commit points (samples, median) and findings", errors=(404,)),
    Op("get", "/findings", "Findings, newest first (by when detection found them), a page at a time; `next` is the "
       "cursor of the following page (null on the last)",
       query=(("state", "string", f"the state of the finding's alert: {STATE_NAMES}"),
              ("kind", "string", "time, static, numerics or efficiency"),
              ("direction", "string", "regression or improvement"),
              *FILTERS, ("limit", "integer", "findings per page, 1 to 1000, default 100"), CURSOR),
       errors=(400, 404)),
    Op("get", "/alerts", "Alerts, newest first, a page at a time, with notes and their worst findings_limit findings "
       "(largest relative change) and finding_count; `total` counts the matching alerts (null with hardware); "
       "`next` is the cursor of the following page (null on the last)",
       query=(("state", "string", STATE_NAMES), *FILTERS,
              ("limit", "integer", "alerts per page, 1 to 1000, default 100"), CURSOR, FINDINGS_LIMIT),
       errors=(400, 404)),
    Op("post", "/alerts/{alert_id}/triage", "Triage an alert: a state change, a note, or both; the author is the "
       "token's name", scope="triage", body=_json("TriageRequest"), errors=(400, 404)),
    Op("get", "/compare", "Two runs or commits compared benchmark by benchmark (benchstat style)",
       query=(("base", "string", "run id, commit sha or unique sha prefix"),
              ("head", "string", "run id, commit sha or unique sha prefix"), ("repo", "string", "repository name"),
              ("alpha", "number", "largest Benjamini-Hochberg q of a change, default 0.05"),
              ("min_effect", "number", "smallest relative change, default 0.01"),
              ("verdict", "string", "list only these verdicts (comma-separated: regression, improvement, "
               "unchanged, inconclusive, failed, new, missing)"),
              ("sort", "string", "name (default) or change: regressions then improvements, largest first"),
              ("offset", "integer", "rows to skip, default 0"),
              ("limit", "integer", "rows to list, default 100, at most 5000; the summary and geomeans cover all")),
       errors=(400, 404)),
    Op("get", "/github/deliveries", "GitHub webhook deliveries, newest first: state (received, queued, done, or "
       "failed: dead-lettered after its handling failed repeatedly), attempts, last error, outcome; never the "
       "payload", scope="admin",
       query=(("state", "string", "list only these states (comma-separated: received, queued, done, failed)"),
              ("limit", "integer", "deliveries to list, 1 to 1000, default 50")), errors=(400,)),
    Op("post", "/github/deliveries/{delivery_id}/retry", "Hand a failed (dead-lettered) or never queued delivery "
       "out again with a fresh count of attempts (409 when it is handled or queued already)", scope="admin",
       ok=(202,), errors=(404, 409)),
    Op("get", "/tokens", "API tokens (prefix only, never the secret)", scope="admin"),
    Op("post", "/tokens", "Create a token; the response holds its text, shown this once", scope="admin",
       body=_json("TokenRequest"), ok=(201,), errors=(400, 409)),
    Op("delete", "/tokens/{token_id}", "Revoke a token", scope="admin", errors=(404,)),
)

ERROR_TEXT = {400: "invalid input", 401: "no valid token", 403: "the token lacks the scope", 404: "not found",
              409: "conflict", 413: "body too large", 503: "unavailable; retry later", 500: "internal error"}

SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {"code": {"type": "string", "description": "stable: invalid_input, payload_too_large, "
                                "unauthorized, forbidden, not_found, method_not_allowed, conflict, unavailable, "
                                "internal"},
                       "message": {"type": "string"}, "details": {"type": "object"}}}}},
    "Manifest": {"type": "object", "description": "A runner's manifest, format_version 1: the JSON schema is "
                 "service/contract/manifest.v1.schema.json"},
    "EnqueueRequest": {"type": "object", "required": ["repo", "commit"], "properties": {
        "repo": {"type": "string"}, "commit": {"type": "string"}, "hardware": {"type": "string", "default": "cpu"},
        "suite": {"type": "string", "default": "*"}, "params": {"type": "string"},
        "quick": {"type": "boolean", "default": False}, "samples": {"type": "integer", "default": 20},
        "trigger": {"type": "string", "default": "manual"}, "branch": {"type": "string"},
        "rounds": {"type": "integer", "default": 1}, "capture": {"type": "boolean", "default": True}}},
    "TriageRequest": {"type": "object", "required": ["state"], "properties": {
        "state": {"type": "string"}, "note": {"type": "string"}}},
    "TokenRequest": {"type": "object", "required": ["name", "scopes"], "properties": {
        "name": {"type": "string"},
        "scopes": {"type": "array", "items": {"type": "string", "enum": ["submit", "triage", "admin"]}}}},
}


def _operation(op: Op) -> dict[str, Any]:
    params = [{"name": name, "in": "path", "required": True, "schema": {"type": "integer" if name.endswith("_id")
                                                                          and name != "run_uid" else "string"}}
              for name in (part[1:-1] for part in op.path.split("/") if part.startswith("{"))]
    params += [{"name": n, "in": "query", "required": False, "schema": {"type": t}, "description": d}
               for n, t, d in op.query]
    responses: dict[str, Any] = {str(code): {"description": "success", "content": {"application/json":
                                                                                    {"schema": OBJECT}}}
                                 for code in op.ok}
    if op.method == "head":
        responses = {"200": {"description": "stored"}}
    responses.update(op.extra.get("responses", {}))
    # Every operation can answer 400 (an argument no column can hold: NUL, an id past BIGINT), 503 (the database
    # unreachable, or a statement past the web timeout) and 500; writes 401 and 403 too (reads as well where
    # KERNELWATCH_READ_TOKEN_REQUIRED=1).
    codes = set(op.errors) | {400, 500, 503} | {401, 403}
    for code in sorted(codes):
        responses[str(code)] = {"$ref": "#/components/responses/Error"} if op.method != "head" else {
            "description": ERROR_TEXT[code]}
    out: dict[str, Any] = {"summary": op.summary, "operationId": f"{op.method}_{op.path}", "responses": responses}
    if params:
        out["parameters"] = params
    if op.body is not None:
        out["requestBody"] = {"required": True, "content": op.body}
    if op.scope:
        out["security"] = [{"bearer": []}]
        out["x-required-scope"] = op.scope
    return out


def document() -> dict[str, Any]:
    from service.api.reads import package_version

    paths: dict[str, dict[str, Any]] = {}
    for op in OPS:
        paths.setdefault(op.path, {})[op.method] = _operation(op)
    return {
        "openapi": "3.0.3",
        "info": {"title": "KernelWatch API", "version": package_version(),
                 "description": "Writes need `Authorization: Bearer <token>` with the scope each names (admin "
                                "grants every scope); reads are public unless KERNELWATCH_READ_TOKEN_REQUIRED=1. "
                                "Errors are {\"error\": {\"code\", \"message\"}}."},
        "servers": [{"url": API_PREFIX}],
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "responses": {"Error": {"description": "an error", "content": _json("Error")}},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "kw_<prefix>_<secret>, from `kernelwatch token create`"}},
        },
    }


@bp.get("/openapi.json")
@public
def openapi() -> Response:
    return reply(document())
