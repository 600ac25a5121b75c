"""Runners upload through the HTTP API: the real `kernelwatch serve` process on PostgreSQL, a token from
`kernelwatch token create`, a real runner with KERNELWATCH_URL and KERNELWATCH_TOKEN (and no database of its own),
then 20 uploaders at once submitting 50 manifests each, some of them the same run twice."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from runners.uploader import HttpUploader, UploadConflict, UploadOutcome, UploadRejected
from service.store.models import Artifact, Result, ResultArtifact, Run
from tests import builders
from tests.conftest import fresh_redis
from tests.gitrepo import SCALE_KERNEL, commit_all, suite_repo
from tests.integration.test_bisect import make_repository
from tests.processes import clean_env, kernelwatch, start_web

# Follow-up tasks of the concurrent test go to this Redis database (no worker takes them): detection would
# otherwise run inside each request of the embedded server and the test would measure detection, not uploads.
UPLOAD_REDIS_URL = "redis://127.0.0.1:6379/7"


@pytest.fixture
def database_url(pg_database: str) -> str:
    return pg_database  # PostgreSQL only: the concurrent writers are what it is for


@contextmanager
def serving(database_url: str, home: Path, **env: str) -> Iterator[str]:
    """`kernelwatch serve` in its own process; yields the service's root URL once /health answers."""
    with start_web(clean_env(home, KERNELWATCH_DATABASE_URL=database_url, **env), home.parent) as web:
        yield web.url


def submit_token(database_url: str, home: Path) -> str:
    out = kernelwatch("token", "create", "runner-cpu", "--scope", "submit",
                      env=clean_env(home, KERNELWATCH_DATABASE_URL=database_url))
    token = out.strip().splitlines()[-1]
    assert token.startswith("kw_")
    return token


def test_a_runner_with_url_and_token_uploads_its_run_and_artifacts(
        sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> None:
    service_home, runner_home = tmp_path / "service", tmp_path / "runner"
    repo, shas = make_repository(tmp_path)
    token = submit_token(database_url, service_home)
    with serving(database_url, service_home) as root:
        # No database and no broker: the service's address and a token are all a runner host is given.
        runner_env = clean_env(runner_home, KERNELWATCH_URL=root, KERNELWATCH_TOKEN=token)
        # `kernelwatch run` measures here and sends its run, artifacts and all, to the service.
        out = kernelwatch("run", "--repo", str(repo), "--commit", shas[-1], "--samples", "3", env=runner_env)
        found = re.search(r"uploaded as run (\S+) to " + re.escape(f"{root}/api/v1"), out)
        assert found, out
        run_id = found[1]

        with sessions() as s:
            assert s.scalar(select(func.count()).select_from(Run).where(Run.run_uid == run_id)) == 1
            digests = set(s.scalars(select(Artifact.sha256).join(ResultArtifact).join(Result).join(Run)
                                    .where(Run.run_uid == run_id)))
        assert digests, "a captured run names artifacts"
        service_store = ArtifactStore(service_home / "artifacts")
        runner_store = ArtifactStore(runner_home / "artifacts")
        for digest in digests:  # they crossed over HTTP: the runner's bytes are in the service's store
            assert service_store.get(digest) == runner_store.get(digest)
        assert not (runner_home / "kernelwatch.db").exists(), "the runner never opened a database of its own"

        # Another run naming the same artifacts: the service has them, nothing is sent twice.
        with urllib.request.urlopen(f"{root}/api/v1/runs/{run_id}") as response:
            assert response.status == 200
        send = HttpUploader(root, token, runner_store, timeout=30, retries=2, backoff=0.2)
        assert token not in repr(send)
        outcome = send(_naming(digests, runner_store))
        assert outcome.created and outcome.artifacts_present == len(digests) and outcome.artifacts_sent == 0

        # `kernelwatch run` outside Celery: the same two variables send its run to the service.
        out = kernelwatch("run", "--repo", str(repo), "--commit", shas[0], "--samples", "2", "--no-capture",
                          env=runner_env)
        assert f"to {root}/api/v1" in out, out

        # `kernelwatch submit` with the service's address asks the service's runners, not this host: this service
        # has no runner queue (the embedded form), which is said at once, and nothing ran here.
        asked = subprocess.run([sys.executable, "-m", "service.cli", "submit", "--repo", str(repo), "--commit",
                                shas[0], "--hardware", "h200"], capture_output=True, text=True, env=runner_env,
                               timeout=120)
        assert asked.returncode == 2 and f"not queued at {root}" in asked.stderr, asked.stderr
        assert "no runner queue in the embedded form" in asked.stderr and "[1/" not in asked.stderr

        # A token that cannot submit is found before the suite is measured, not after (which lost the run).
        reader = kernelwatch("token", "create", "reader", "--scope", "triage",
                             env=clean_env(service_home, KERNELWATCH_DATABASE_URL=database_url)).strip()
        for wrong in (reader, "kw_000000000000_not-a-secret"):
            refused = subprocess.run([sys.executable, "-m", "service.cli", "run", "--repo", str(repo), "--commit",
                                      shas[0], "--samples", "2", "--no-capture"], capture_output=True, text=True,
                                     env=clean_env(runner_home, KERNELWATCH_URL=root, KERNELWATCH_TOKEN=wrong))
            assert refused.returncode == 2 and "check KERNELWATCH_TOKEN" in refused.stderr, refused.stderr
            assert "[1/" not in refused.stderr  # no benchmark was run
            # A runner worker with it does not start (it took tasks, measured them and lost every run at upload).
            worker = subprocess.run([sys.executable, "-m", "service.cli", "worker", "--queues", "runner.cpu"],
                                    capture_output=True, text=True, timeout=120,
                                    env=clean_env(runner_home, KERNELWATCH_URL=root, KERNELWATCH_TOKEN=wrong,
                                                  KERNELWATCH_REDIS_URL="redis://127.0.0.1:6379/15"))
            assert worker.returncode == 2 and "check KERNELWATCH_TOKEN" in worker.stderr, worker.stderr[-2000:]

        # Another project in a folder of the same name: the service holds "planted" as the first's, and says so
        # before this one is measured (at ingest the run would be refused, its measurements lost).
        other = tmp_path / "elsewhere" / "planted"
        suite_repo(other, SCALE_KERNEL)
        commit_all(other, "another project")
        clash = subprocess.run([sys.executable, "-m", "service.cli", "run", "--repo", str(other), "--samples", "2",
                                "--no-capture"], capture_output=True, text=True, env=runner_env)
        assert clash.returncode == 2 and "'planted' in this store is another project" in clash.stderr, clash.stderr
        assert "[1/" not in clash.stderr
        # A runner uploading such a run anyway is told so: not the 409 of a run id stored already, which a
        # redelivered task takes as done (service/pipeline/jobs.py), since this run is stored nowhere.
        doc = builders.manifest(7, repo="planted")
        doc["repository"]["first_commits"] = ["f" * 40]
        with pytest.raises(UploadRejected, match="another project") as refused_upload:
            send(doc)
        assert not isinstance(refused_upload.value, UploadConflict) and refused_upload.value.code == "another_project"
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(Run).where(Run.run_uid == run_id)) == 1
        assert s.scalar(select(func.count()).select_from(Run)) == 3


def _naming(digests: set[str], store: ArtifactStore) -> dict[str, Any]:
    """A new run naming the same artifacts: what a second commit's upload from this runner looks like."""
    doc = builders.manifest(3)
    doc["results"][0]["artifacts"] = [{"kind": "hlo", "name": f"a{i}", "sha256": d, "size": len(store.get(d))}
                                      for i, d in enumerate(sorted(digests))]
    return doc


def test_twenty_uploaders_at_once_store_every_run_exactly_once(
        sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> None:
    service_home = tmp_path / "service"
    token = submit_token(database_url, service_home)
    store = ArtifactStore(tmp_path / "runner" / "artifacts")
    shared_blob = store.put(b"HloModule shared\n" * 50, "hlo", "shared.txt")
    uploaders, per_uploader, shared = 20, 50, 40
    # 40 runs every uploader may send (each sent by three uploaders), the rest each uploader's own.
    pool = [builders.manifest(i) for i in range(shared)]
    work: list[list[dict[str, Any]]] = []
    position = shared
    for u in range(uploaders):
        mine = [pool[(u * 6 + k) % shared] for k in range(6)]
        for _ in range(per_uploader - len(mine)):
            doc = builders.manifest(position, [builders.result(samples=[1e-3, 1.1e-3, 0.9e-3])])
            position += 1
            if position % 7 == 0:
                doc["results"][0]["artifacts"] = [{"kind": "hlo", "name": "shared.txt", "sha256": shared_blob.sha256,
                                                   "size": shared_blob.size}]
            mine.append(doc)
        work.append(mine)
    unique = {doc["run_id"] for mine in work for doc in mine}

    with serving(database_url, service_home, KERNELWATCH_REDIS_URL=fresh_redis(UPLOAD_REDIS_URL)) as root:
        def run(mine: list[dict[str, Any]]) -> list[UploadOutcome]:
            send = HttpUploader(root, token, store, timeout=60, retries=5, backoff=0.2)
            return [send(doc) for doc in mine]

        # The same run from every uploader at the same instant: the race a redelivered task runs into.
        same, gate = builders.manifest(10_000), threading.Barrier(uploaders)

        def race(_: int) -> UploadOutcome:
            send = HttpUploader(root, token, store, timeout=60, retries=5, backoff=0.2)
            gate.wait()
            return send(same)

        with ThreadPoolExecutor(max_workers=uploaders) as pool_exec:
            raced = list(pool_exec.map(race, range(uploaders)))
        assert sum(o.created for o in raced) == 1

        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=uploaders) as pool_exec:
            outcomes = [o for batch in pool_exec.map(run, work) for o in batch]
        elapsed = time.monotonic() - started

        # A host given only the service's address and a token (a laptop, no broker): `kernelwatch submit` queues
        # its run for the service's runners of the hardware it names, rounds and capture as asked. It was made
        # on the laptop itself and uploaded under the laptop's hardware, whatever --hardware said.
        laptop = clean_env(tmp_path / "laptop", KERNELWATCH_URL=root, KERNELWATCH_TOKEN=token)
        out = kernelwatch("submit", "--repo", "https://example.com/kernels.git", "--commit", "a" * 40,
                          "--hardware", "h200", "--rounds", "3", "--no-capture", "--samples", "7", env=laptop)
        assert f"on runner.h200 at {root} as task" in out, out
        broker = redis.Redis.from_url(UPLOAD_REDIS_URL)
        [message] = [json.loads(m) for m in broker.lrange("runner.h200", 0, -1)]
        kwargs = json.loads(base64.b64decode(message["body"]))[1]
        assert message["headers"]["id"] == out.split("as task ")[1].strip()
        assert (kwargs["rounds"], kwargs["capture"], kwargs["samples"], kwargs["commit"]) == (3, False, 7, "a" * 40)
        assert not (tmp_path / "laptop" / "kernelwatch.db").exists()  # nothing was run or stored there
    fresh_redis(UPLOAD_REDIS_URL)

    assert len(outcomes) == uploaders * per_uploader  # every call a success: duplicates answered 200
    assert sum(o.created for o in outcomes) == len(unique)
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == len(unique) + 1
        assert s.scalar(select(func.count(func.distinct(Run.run_uid)))) == len(unique) + 1
        assert s.scalar(select(func.count()).select_from(Artifact)) == 1
    print(f"{len(outcomes)} uploads ({len(unique)} runs) in {elapsed:.1f} s")
