"""Retention (`kernelwatch prune`) over runs stored through the real pipeline, real files, both databases: what
goes, what stays (recent runs, open alerts, each series' newest run), pages after a prune, dry run, rerun."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactRef, ArtifactStore
from service import cli
from service.app import create_app
from service.cli.common import EXIT_USAGE
from service.context import Context
from service.pipeline.parse_artifacts import parse_result, stale_results
from service.pipeline.prune import apply_prune, plan_prune
from service.settings import load_settings
from service.store.models import Alert, Artifact, Finding, KernelCode, Result, ResultArtifact, Run, Series
from service.store.read_filters import utc
from tests import builders
from tests.drilldown_data import FIXTURES, LLO_FIXTURE

NOW = datetime(2026, 6, 1, tzinfo=UTC)
OLD = NOW - timedelta(days=150)
RECENT = NOW - timedelta(days=2)
RETENTION = timedelta(days=90)


@dataclass
class Stored:
    app: Flask
    ctx: Context
    runs: dict[str, int]  # label -> run id
    refs: dict[str, ArtifactRef]  # label -> artifact


def _ref(ref: ArtifactRef) -> dict[str, Any]:
    return {"kind": ref.kind, "name": ref.name, "sha256": ref.sha256, "size": ref.size}


def _put(store: ArtifactStore, label: str) -> ArtifactRef:
    return store.put(f"raw capture {label}\n".encode(), "log", f"{label}.log")


def _manifest(position: int, finished: datetime, results: list[dict[str, Any]]) -> dict[str, Any]:
    started = finished - timedelta(seconds=30)
    return builders.manifest(position, results, started_at=started.isoformat(), finished_at=finished.isoformat())


def _result(name: str, *refs: ArtifactRef) -> dict[str, Any]:
    return builders.result(name=name, artifacts=[_ref(r) for r in refs])


@pytest.fixture
def stored(sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> Iterator[Stored]:
    """Three runs of ``softmax_rows``: two old (``old0``, ``old1``), one recent (``new``); ``other`` is measured
    in the old runs only, so its newest run is ``old1``. ``shared`` is captured by ``old0`` and ``new`` alike."""
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path / "home"), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(settings)
    store = ctx.artifacts
    refs = {label: _put(store, label) for label in ("old0", "old1", "new", "shared", "other0", "other1")}
    refs["llo"] = store.put((FIXTURES / "llo" / LLO_FIXTURE).read_bytes(), "llo", LLO_FIXTURE)
    manifests = {
        "old0": _manifest(0, OLD, [_result("softmax_rows", refs["old0"], refs["shared"], refs["llo"]),
                                   _result("other", refs["other0"])]),
        "old1": _manifest(1, OLD + timedelta(hours=1), [_result("softmax_rows", refs["old1"]),
                                                        _result("other", refs["other1"])]),
        "new": _manifest(2, RECENT, [_result("softmax_rows", refs["new"], refs["shared"])]),
    }
    runs = {label: ctx.submit(m).run_id for label, m in manifests.items()}
    with sessions.begin() as s:  # detection's own verdicts are not what these tests are about
        s.execute(delete(Finding))
        s.execute(delete(Alert))
    try:
        yield Stored(create_app(settings, context=ctx), ctx, runs, refs)
    finally:
        ctx.close()


def _prune(stored: Stored, now: datetime = NOW) -> Any:
    with stored.ctx.sessions() as s:
        return apply_prune(s, stored.ctx.artifacts, plan_prune(s, RETENTION, now), now=now)


def _pruned(stored: Stored) -> set[str]:
    """The labels of artifacts whose rows are marked; each marked one has no file, each other one has its file."""
    store = stored.ctx.artifacts
    with stored.ctx.sessions() as s:
        marks = {sha: at for sha, at in s.execute(select(Artifact.sha256, Artifact.pruned_at))}
    labels = {label for label, ref in stored.refs.items() if marks[ref.sha256] is not None}
    for label, ref in stored.refs.items():
        assert store.has(ref.sha256) is (label not in labels), label
    return labels


def _result_id(stored: Stored, run: str, name: str = "softmax_rows") -> int:
    with stored.ctx.sessions() as s:
        return s.scalars(select(Result.id).join(Series).where(Result.run_id == stored.runs[run],
                                                              Series.metric == "wall_time")
                         .where(Series.benchmark.has(name=name))).one()


def _open_alert(stored: Stored, state: str) -> int:
    """An alert (in ``state``) with one finding on softmax_rows from ``old0``'s commit to ``old1``'s."""
    with stored.ctx.sessions.begin() as s:
        old0, old1 = (s.get(Run, stored.runs[label]) for label in ("old0", "old1"))
        assert old0 is not None and old1 is not None
        series_id = s.scalars(select(Result.series_id).where(Result.id == _result_id(stored, "old1"))).one()
        repository_id = s.scalars(select(Series.repository_id).where(Series.id == series_id)).one()
        alert = Alert(repository_id=repository_id, commit_id=old1.commit_id, previous_commit_id=old0.commit_id,
                      state=state, kind="regression", created_at=OLD, updated_at=OLD)
        s.add(alert)
        s.flush()
        s.add(Finding(series_id=series_id, commit_id=old1.commit_id, previous_commit_id=old0.commit_id,
                      detector="test", detector_version=1, kind="time", direction="regression", magnitude=0.2,
                      confidence=5.0, value_before=1e-3, value_after=1.2e-3, created_at=OLD, attribution={},
                      alert_id=alert.id))
        return alert.id


def test_old_artifacts_go_and_everything_derived_stays(stored: Stored) -> None:
    with stored.ctx.sessions() as s:
        results_before = s.execute(select(Result.id, Result.samples, Result.median).order_by(Result.id)).all()
        kernels_before = s.scalar(select(func.count()).select_from(KernelCode))
    assert kernels_before, "the LLO fixture was parsed into kernel records"
    outcome = _prune(stored)
    # other1 is the newest evidence of `other`; shared and new are used by the recent run.
    assert _pruned(stored) == {"old0", "old1", "other0", "llo"}
    assert (outcome.artifacts, outcome.marked, outcome.files_deleted, outcome.files_missing) == (4, 4, 4, 0)
    assert outcome.bytes_freed > 0
    with stored.ctx.sessions() as s:
        assert s.execute(select(Result.id, Result.samples, Result.median).order_by(Result.id)).all() == results_before
        assert s.scalar(select(func.count()).select_from(KernelCode)) == kernels_before
        marked = s.scalars(select(Artifact.pruned_at).where(Artifact.pruned_at.is_not(None)))
        assert {utc(at) for at in marked} == {NOW}
    # A newer parser (`kernelwatch reparse`) leaves a pruned result's records alone: they are all that is left.
    with stored.ctx.sessions.begin() as s:
        s.execute(update(ResultArtifact).values(parsed_version=0))
        assert _result_id(stored, "old0") not in stale_results(s)
        assert parse_result(s, stored.ctx.artifacts, _result_id(stored, "old0")) == 0
    with stored.ctx.sessions() as s:
        assert s.scalar(select(func.count()).select_from(KernelCode)) == kernels_before

    client = stored.app.test_client()
    rid = _result_id(stored, "old0")
    page = client.get(f"/results/{rid}")
    assert page.status_code == 200
    assert page.get_data(as_text=True).count("pruned by retention on 2026-06-01") == 2  # old0 and llo; not shared
    listing = client.get(f"/results/{rid}/kernels/synthetic_form_a")
    assert listing.status_code == 200
    assert "pruned by retention on 2026-06-01" in listing.get_data(as_text=True)
    assert client.get(f"/results/{_result_id(stored, 'new')}").status_code == 200


def test_an_open_alert_keeps_its_commits_artifacts_until_it_is_closed(stored: Stored) -> None:
    alert_id = _open_alert(stored, "acknowledged")
    plan_outcome = _prune(stored)
    assert _pruned(stored) == set()  # old0 and old1 are the alert's two commits
    assert plan_outcome.artifacts == 0
    with stored.ctx.sessions() as s:
        plan = plan_prune(s, RETENTION, NOW)
    assert plan.kept_for_alerts == 5 and plan.kept_as_newest == 0

    with stored.ctx.sessions.begin() as s:
        s.execute(update(Alert).where(Alert.id == alert_id).values(state="fixed"))
    _prune(stored)
    assert _pruned(stored) == {"old0", "old1", "other0", "llo"}


def test_a_finding_not_grouped_yet_counts_as_open(stored: Stored) -> None:
    alert_id = _open_alert(stored, "wontfix")
    with stored.ctx.sessions.begin() as s:
        s.execute(update(Finding).values(alert_id=None))
        s.execute(delete(Alert).where(Alert.id == alert_id))
    _prune(stored)
    assert _pruned(stored) == set()


def test_a_closed_alert_keeps_nothing(stored: Stored) -> None:
    _open_alert(stored, "wontfix")
    _prune(stored)
    assert _pruned(stored) == {"old0", "old1", "other0", "llo"}


def test_nothing_younger_than_the_retention_goes(stored: Stored) -> None:
    _prune(stored, now=OLD + RETENTION - timedelta(minutes=1))
    assert _pruned(stored) == set()


def test_rerun_is_idempotent_and_finishes_an_interrupted_prune(stored: Stored) -> None:
    _prune(stored)
    again = _prune(stored)
    assert (again.artifacts, again.marked, again.files_deleted, again.files_missing) == (4, 0, 0, 4)
    assert again.bytes_freed == 0
    assert _pruned(stored) == {"old0", "old1", "other0", "llo"}

    # A crash after the commit, before the files went: rows marked, files still there.
    store = stored.ctx.artifacts
    for label in ("old0", "old1", "other0"):
        store.put(f"raw capture {label}\n".encode(), "log", f"{label}.log")
    finished = _prune(stored)
    assert (finished.marked, finished.files_deleted, finished.files_missing) == (0, 3, 1)
    assert _pruned(stored) == {"old0", "old1", "other0", "llo"}


def test_the_unfinished_writes_of_a_killed_process_are_swept_and_one_in_flight_is_not(stored: Stored) -> None:
    """A process killed while writing an artifact leaves its temporary file (its ``finally`` never ran); prune
    sweeps those older than an hour and leaves a write in flight alone. Stored artifacts are untouched."""
    import os
    import time

    store = stored.ctx.artifacts
    kept = store.put(b"a finished artifact\n", "log", "kept.log")
    folder = store.path_for(kept.sha256).parent
    dead, live = folder / ".incoming-killed1", folder / ".incoming-writing"
    dead.write_bytes(b"x" * 4096)
    live.write_bytes(b"y" * 10)
    an_hour_and_more = time.time() - 3700
    os.utime(dead, (an_hour_and_more, an_hour_and_more))
    outcome = _prune(stored)
    assert outcome.unfinished_swept == 1 and outcome.bytes_freed >= 4096
    assert not dead.exists() and live.exists() and store.has(kept.sha256)
    assert store.sweep_incoming(0, now=time.time() + 1) == (1, 10)  # anything older than "now" goes
    assert not live.exists() and store.has(kept.sha256)


def test_a_new_run_capturing_pruned_bytes_again_keeps_them(stored: Stored) -> None:
    _prune(stored)
    store = stored.ctx.artifacts
    again = _put(store, "old0")  # the runner uploads it again: the service said it had no such file
    stored.ctx.submit(_manifest(3, NOW + timedelta(hours=1), [_result("softmax_rows", again)]))
    with stored.ctx.sessions() as s:  # the bytes are back: the row is no longer marked, so no page says "pruned"
        assert s.scalars(select(Artifact.pruned_at).where(Artifact.sha256 == again.sha256)).one() is None
    _prune(stored, now=NOW + timedelta(days=1))
    assert store.has(again.sha256)


def test_dry_run_changes_nothing_and_the_cli_prunes(stored: Stored, database_url: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KERNELWATCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELWATCH_DATABASE_URL", database_url)
    # The CLI prunes as of now; the stored runs are from 2026: retention long enough to keep even the old ones
    # first, then one that reaches them.
    age_of_old = (datetime.now(UTC) - OLD).days
    assert cli.main(["prune", "--older-than", f"{age_of_old + 30}d", "--dry-run"]) == 0
    assert "would prune 0 artifact(s)" in capsys.readouterr().out

    assert cli.main(["prune", "--older-than", f"{age_of_old - 1}d", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would prune 4 artifact(s)" in out and "4 to mark" in out and "4 file(s) to delete" in out, out
    assert _pruned(stored) == set()

    assert cli.main(["prune", "--older-than", f"{age_of_old - 1}d"]) == 0
    out = capsys.readouterr().out
    assert "pruned 4 artifact(s)" in out and "4 marked, 4 file(s) deleted" in out and "bytes freed" in out, out
    assert _pruned(stored) == {"old0", "old1", "other0", "llo"}

    assert cli.main(["prune", "--older-than", "90 days"]) == EXIT_USAGE
    assert "--older-than: '90 days' is not a duration" in capsys.readouterr().err
