"""Measurement health end to end (issue 16): a real local run records the host's steal and load, ingest stores it
on its Run, the result page and the API show it, a heavy-steal run is marked and counted, and a run asked to pin
its process and hold XLA to one thread is an environment of its own (both databases)."""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from runners.host_health import heavy, parse_proc_stat
from runners.local import RunRequest, run_at_commit
from service.contract import parse_manifest
from service.pipeline.ingest import ingest_manifest
from service.store.db import unit_of_work
from service.store.models import Result, Run, Series
from service.store.run_health import heavy_steal_runs
from tests import builders
from tests.api_client import Api
from tests.gitrepo import project_suite_repo

# The digest of builders.manifest(run_id=GOLDEN_RUN_ID) as ingest computed it before host_health and the noise
# reduction facts existed (read off the commit before them): a run stored then, submitted again, is the same run.
GOLDEN_RUN_ID = "golden0123456789"
DIGEST_BEFORE = "485c48bf8ff7a0590fe508dd4e0f2517e6cd9618884d080abeecbfd25bc02577"


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any], int]:
    """A plain run and a pinned, single-threaded run that keeps its pages, of one small benchmark (the expensive
    part: shared)."""
    if not hasattr(os, "sched_getaffinity") or not Path("/proc/stat").exists():
        pytest.skip("needs Linux: /proc/stat and CPU affinity")
    workdir = tmp_path_factory.mktemp("host-health")
    plain_request = RunRequest(repo=project_suite_repo(workdir / "repo"), rev="HEAD", samples=3, warmup=1,
                               suite="norms/rmsnorm", params="fused=True", quick=True)
    [plain] = run_at_commit(plain_request, workdir / "worktrees")
    cpu = min(os.sched_getaffinity(0))
    [quiet] = run_at_commit(dataclasses.replace(plain_request, cpu_affinity=(cpu,), xla_single_thread=True,
                                                keep_pages=True), workdir / "worktrees")
    return plain, quiet, cpu


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def stored_run(api: Api, run_uid: str) -> tuple[int, dict[str, Any] | None, int, int]:
    """(Run.id, Run.host_health, Run.environment_id, its wall-time result's id)."""
    with api.ctx.sessions() as s:
        run = s.scalars(select(Run).where(Run.run_uid == run_uid)).one()
        result_id = s.scalars(select(Result.id).join(Series)
                              .where(Result.run_id == run.id, Series.metric == "wall_time")).one()
        return run.id, run.host_health, run.environment_id, result_id


def test_a_real_run_stores_its_host_health_and_the_pages_show_it(real_runs: tuple[Any, ...], api: Api) -> None:
    plain, _, _ = real_runs
    health = plain["host_health"]
    assert set(health) >= {"steal_fraction", "busy_fraction", "cores", "load_1m"}
    assert health["cores"] == parse_proc_stat(Path("/proc/stat").read_text()).cores
    assert 0 <= health["steal_fraction"] <= 1 and 0 < health["busy_fraction"] <= 1  # the benchmark ran
    # The run's span holds its benchmark: started_at was read after the first benchmark returned (runs of one
    # benchmark lasted 10 µs).
    [timed] = [r for r in plain["results"] if r["metric"] == "wall_time"]
    span = datetime.fromisoformat(plain["finished_at"]) - datetime.fromisoformat(plain["started_at"])
    assert span.total_seconds() >= sum(timed["samples"]), (plain["started_at"], plain["finished_at"])

    api.ctx.submit(plain)
    _, stored, _, result_id = stored_run(api, plain["run_id"])
    assert stored is not None
    assert {k: stored[k] for k in health} == health and stored.get("gpus") == []  # no GPU on this host

    page = api.client.get(f"/results/{result_id}")
    assert page.status_code == 200
    card = text_of(page.get_data(as_text=True).split('id="host-health"', 1)[1].split("</div>\n</div>", 1)[0])
    assert f"steal {100 * health['steal_fraction']:.1f} %" in card
    assert f"load {health['load_1m']:.2f} on {health['cores']} cores" in card
    assert ("heavy steal" in card) == heavy(health)

    body = api.client.get(f"/api/v1/runs/{plain['run_id']}").get_json()
    assert {k: body["host_health"][k] for k in health} == health
    assert body["heavy_steal"] is heavy(health)


def test_a_heavy_steal_run_is_marked_and_counted(real_runs: tuple[Any, ...], api: Api) -> None:
    plain, _, _ = real_runs
    stolen = copy.deepcopy(plain)
    stolen["run_id"] = uuid.uuid4().hex
    stolen["host_health"].update(steal_fraction=0.2, busy_fraction=0.5)
    api.ctx.submit(plain)
    api.ctx.submit(stolen)
    plain_id, plain_health, _, _ = stored_run(api, plain["run_id"])
    stolen_id, _, _, stolen_result = stored_run(api, stolen["run_id"])

    page = text_of(api.client.get(f"/results/{stolen_result}").get_data(as_text=True))
    assert "steal 20.0 % heavy steal" in page
    assert api.client.get(f"/api/v1/runs/{stolen['run_id']}").get_json()["heavy_steal"] is True
    with api.ctx.sessions() as s:
        expected = {stolen_id} | ({plain_id} if heavy(plain_health) else set())
        assert heavy_steal_runs(s, [plain_id, stolen_id, stolen_id + 1000]) == expected
        assert heavy_steal_runs(s, []) == set()


def test_a_run_without_host_health_shows_it_was_not_recorded(real_runs: tuple[Any, ...], api: Api) -> None:
    plain, _, _ = real_runs
    older = copy.deepcopy(plain)
    older["run_id"] = uuid.uuid4().hex
    del older["host_health"]  # as a runner from before issue 16 sends it
    api.ctx.submit(older)
    run_id, stored, _, result_id = stored_run(api, older["run_id"])
    assert stored is None
    card = api.client.get(f"/results/{result_id}").get_data(as_text=True).split('id="host-health"', 1)[1]
    assert "not recorded" in card.split("</div>\n</div>", 1)[0]
    assert api.client.get(f"/api/v1/runs/{older['run_id']}").get_json()["host_health"] is None
    with api.ctx.sessions() as s:
        assert heavy_steal_runs(s, [run_id]) == set()


def test_pinning_and_one_xla_thread_make_an_environment_of_their_own(real_runs: tuple[Any, ...], api: Api) -> None:
    plain, quiet, cpu = real_runs
    # Read by the benchmark process itself: its affinity once pinned, the pool size it was started with, and
    # glibc's mmap threshold in its own environment (--keep-pages).
    assert quiet["environment"]["cpu_affinity"] == str(cpu) and quiet["environment"]["cpu_threads"] == 1
    assert quiet["environment"]["malloc_mmap_threshold"] == 2**30
    assert "cpu_affinity" not in plain["environment"] and "cpu_threads" not in plain["environment"]
    assert "malloc_mmap_threshold" not in plain["environment"]
    api.ctx.submit(plain)
    api.ctx.submit(quiet)
    _, _, plain_env, _ = stored_run(api, plain["run_id"])
    _, _, quiet_env, _ = stored_run(api, quiet["run_id"])
    assert plain_env != quiet_env


def test_a_manifest_from_before_host_health_keeps_its_digest(sessions: sessionmaker[Session]) -> None:
    doc = builders.manifest(run_id=GOLDEN_RUN_ID)
    with unit_of_work(sessions) as s:
        ingest_manifest(s, parse_manifest(doc))
    with unit_of_work(sessions) as s:
        assert s.scalars(select(Run.manifest_digest)).one() == DIGEST_BEFORE
        assert ingest_manifest(s, parse_manifest(doc)).created is False
