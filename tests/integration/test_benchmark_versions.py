"""An edited benchmark starts a series of its own (issue 17): results carry the version of the benchmark's code,
the first version adopts a series stored before versions existed (no history is cut by the upgrade), another
version goes to a series of its own, and a comparison across the edit pairs nothing and says why."""

from __future__ import annotations

import tempfile
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.compare import compare_params, compare_resolved, runs_side
from service.pipeline.jobs import JobEnv
from service.pipeline.queue import InProcessQueue
from service.pipeline.submit import submit_manifest
from service.store.models import Result, Run, Series
from service.store.queries import series_view
from service.store.series_companions import series_companions
from tests import builders

V1, V2 = "a" * 16, "b" * 16


def test_an_edited_benchmark_starts_a_series_of_its_own(sessions: sessionmaker[Session]) -> None:
    docs = [builders.manifest(0, results=[builders.result()]),  # stored before versions: none
            builders.manifest(1, results=[builders.result(benchmark_version=V1)]),
            builders.manifest(2, results=[builders.result(benchmark_version=V2)]),
            builders.manifest(3, results=[builders.result(benchmark_version=V1)]),
            builders.manifest(4, results=[builders.result()])]  # an older runner again: the series as it is
    queue = InProcessQueue(JobEnv(sessions, EDivisiveDetector(), ArtifactStore(Path(tempfile.mkdtemp()))))
    for doc in docs:
        submit_manifest(sessions, queue, doc)
    with sessions() as s:
        rows = s.execute(select(Series.benchmark_version, Result.run_id).join(Result, Result.series_id == Series.id)
                         .where(Series.metric == "wall_time")).all()
        runs = {doc["run_id"]: i for i, doc in enumerate(docs)}
        uid = dict(s.execute(select(Run.id, Run.run_uid)).all())
        by_version: dict[str | None, list[int]] = {}
        for version, run_id in rows:
            by_version.setdefault(version, []).append(runs[uid[run_id]])
        assert {v: sorted(p) for v, p in by_version.items()} == {V1: [0, 1, 3, 4], V2: [2]}

        across = compare_resolved(s, runs_side(s, [docs[1]["run_id"]]), runs_side(s, [docs[2]["run_id"]]),
                                  compare_params())
        timed = [row for row in across.report.rows if row.key.metric == "wall_time"]
        assert sorted(row.verdict for row in timed) == ["missing", "new"]
        assert any("its benchmark code differs between the sides" in note for note in across.notes), across.notes
        same = compare_resolved(s, runs_side(s, [docs[1]["run_id"]]), runs_side(s, [docs[3]["run_id"]]),
                                compare_params())
        assert [row.verdict for row in same.report.rows if row.key.metric == "wall_time"] not in (["missing"], ["new"])
        assert not any("benchmark code differs" in note for note in same.notes)
        assert not any("versions of its benchmark code" in note for note in same.notes + across.notes)

    # One side measured with both versions (edited between two runs of one commit, as a working copy's benchmark
    # file can be), the other with one: two rows under one label, and a note that says why.
    edited = [builders.manifest(5, results=[builders.result(benchmark_version=v)]) for v in (V1, V2)]
    for doc in edited:
        submit_manifest(sessions, queue, doc)
    with sessions() as s:
        mixed = compare_resolved(s, runs_side(s, [docs[3]["run_id"]]), runs_side(s, [d["run_id"] for d in edited]),
                                 compare_params())
        assert len([row for row in mixed.report.rows if row.key.metric == "wall_time"]) == 2
        assert any("2 versions of its benchmark code were measured" in note for note in mixed.notes), mixed.notes

    with sessions() as s:
        # The series page lists the edited benchmark's series as a sibling, saying what differs.
        [v1_series] = s.scalars(select(Series.id).where(Series.metric == "wall_time",
                                                        Series.benchmark_version == V1)).all()
        view = series_view(s, v1_series)
        assert view is not None
        [sibling] = series_companions(s, view).siblings
        assert sibling.differences == [f"benchmark code {V1} → {V2}"], sibling
