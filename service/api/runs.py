"""Runs: a runner submits a manifest (idempotent by run id), anyone reads it back, a submitter enqueues one."""

from __future__ import annotations

import uuid

from flask import Response, current_app

from kernelwatch.errors import InvalidInput, NotFound, Transient
from service.api.auth import readable, requires
from service.api.blueprint import bp, context, json_object, read_body, reply
from service.contract import MAX_MANIFEST_BYTES, parse_manifest
from service.pipeline.suite_tasks import FIELDS, suite_task
from service.store.api_queries import run_results, run_view


class MissingArtifacts(InvalidInput):
    """A manifest names artifacts the service does not have; ``details`` lists them, so a runner can upload
    exactly those and submit again."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(f"the manifest references {len(missing)} artifact(s) the service does not have: "
                         f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}; PUT them to "
                         "/api/v1/artifacts/<sha256> first")
        self.details = {"missing_artifacts": missing}


@bp.post("/runs")
@requires("submit")
def submit_run() -> Response:
    ctx = context()
    raw = read_body(int(current_app.config.get("KERNELWATCH_MAX_MANIFEST_BYTES", MAX_MANIFEST_BYTES)))
    manifest = parse_manifest(raw)
    missing = sorted({a.sha256 for r in manifest.results for a in r.artifacts if not ctx.artifacts.has(a.sha256)})
    if missing:
        raise MissingArtifacts(missing)
    outcome = ctx.submit(manifest)
    body = {"run_id": manifest.run_id, "created": outcome.created, "url": f"/api/v1/runs/{manifest.run_id}"}
    return reply(body, 201 if outcome.created else 200)


@bp.get("/runs/<run_uid>")
@readable
def get_run(run_uid: str) -> Response:
    with context().sessions() as session:
        view = run_view(session, run_uid)
    if view is None:
        raise NotFound(f"no run {run_uid[:80]!r}")
    return reply(view)


@bp.get("/runs/<run_uid>/results")
@readable
def get_run_results(run_uid: str) -> Response:
    with context().sessions() as session:
        results = run_results(session, run_uid)
    if results is None:
        raise NotFound(f"no run {run_uid[:80]!r}")
    return reply({"run_id": run_uid, "results": results})


@bp.post("/runs/enqueue")
@requires("submit")
def enqueue_run() -> Response:
    hardware, kwargs = suite_task(json_object(FIELDS))
    settings = context().settings
    if not settings.redis_url:
        # A suite run takes minutes: an HTTP request is no place to wait for one, and the embedded form has no
        # runner to hand it to. `kernelwatch run` (or `kernelwatch submit`) runs it here instead.
        raise Transient("no runner queue in the embedded form: set KERNELWATCH_REDIS_URL and start a runner "
                        "(`kernelwatch worker --queues runner.HW`), or run it here with `kernelwatch run`")
    from service.pipeline.pull_requests import SuiteRun
    from service.task_names import runner_queue

    task_id = str(uuid.uuid4())
    context().queue.enqueue_suite_runs([SuiteRun(hardware, kwargs, task_id)])
    return reply({"task_id": task_id, "queue": runner_queue(hardware), "commit": kwargs["commit"]}, 202)
