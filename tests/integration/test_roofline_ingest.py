"""Ingest stores every wall-time result's roofline figures (both databases): against the published table on an
H200, with an efficiency series beside its time series; against the run's calibration on a CPU host, without one;
not at all where neither is known. A drop of efficiency is a finding of its own kind, grouped into the alert of
its commit range; and the result page shows what was stored."""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.hardware import H200_SXM
from service.app import create_app
from service.context import Context
from service.contract import parse_manifest
from service.contract.manifest import UNSET_IDENTITY
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.alerts import list_alerts
from service.pipeline.detection import detect_many
from service.pipeline.identity import manifest_digest
from service.pipeline.ingest import ingest_manifest
from service.settings import load_settings
from service.store.db import unit_of_work
from service.store.models import Benchmark, Environment, Finding, Result, Run, Series
from tests import builders

FLOPS, BYTES = builders.result()["flops"], builders.result()["bytes_accessed"]  # 0.625 FLOP/B: memory-bound
SAMPLES = [1e-3, 1.01e-3, 0.99e-3]


def ingest(sessions: sessionmaker[Session], docs: Sequence[dict[str, Any]]) -> list[int]:
    touched: list[int] = []
    with unit_of_work(sessions) as s:
        for doc in docs:
            touched += ingest_manifest(s, parse_manifest(doc)).series_ids
    return touched


def results_by_metric(s: Session) -> dict[str, Result]:
    return {metric: r for r, metric in s.execute(select(Result, Series.metric).join(Series))}


def test_an_h200_result_gets_its_published_roofline_and_an_efficiency_series(
        sessions: sessionmaker[Session]) -> None:
    doc = builders.manifest(results=[builders.result(samples=SAMPLES, params={"rows": 256, "dtype": "bfloat16"})],
                            environment=builders.environment(**builders.H200))
    touched = ingest(sessions, [doc])
    with sessions() as s:
        stored = results_by_metric(s)
        assert set(stored) == {"wall_time", "roofline_fraction"}
        time, efficiency = stored["wall_time"], stored["roofline_fraction"]
        roof_s = BYTES / H200_SXM.memory_bytes_per_s
        assert time.roofline_bound == "memory" and time.roofline_intensity == pytest.approx(FLOPS / BYTES)
        assert time.roofline_s == pytest.approx(roof_s) and time.roofline_fraction == pytest.approx(roof_s / 1e-3)
        assert time.roofline_peak_flops_per_s == H200_SXM.peak_flops("bf16")
        assert time.roofline_peak_bytes_per_s == H200_SXM.memory_bytes_per_s
        assert time.roofline_peak_source is not None and time.roofline_peak_source.startswith("NVIDIA H200 SXM, bf")
        assert efficiency.samples == pytest.approx([roof_s / t for t in SAMPLES])
        assert efficiency.median == pytest.approx(roof_s / 1e-3) and efficiency.roofline_s is None
        series = s.get(Series, efficiency.series_id)
        assert series is not None and (series.unit, series.direction) == ("1", "higher_is_better")
        assert sorted(touched) == sorted([time.series_id, efficiency.series_id])  # both go to detection


def test_a_cpu_result_is_measured_against_the_runs_calibration(sessions: sessionmaker[Session]) -> None:
    calibrated = builders.manifest(0, environment=builders.environment(calibration=builders.calibration()))
    plain = builders.manifest(1)
    ingest(sessions, [calibrated, plain])
    with sessions() as s:
        runs = {r.run_uid: r for r in s.scalars(select(Run))}
        assert runs[calibrated["run_id"]].calibration == builders.calibration()
        assert runs[plain["run_id"]].calibration is None
        # The calibration differs from run to run and stays out of the identity: one environment, one series each.
        assert len(s.scalars(select(Environment)).all()) == 1
        rows = {(run_uid, metric): r for r, metric, run_uid in
                s.execute(select(Result, Series.metric, Run.run_uid).join(Series).join(Run))}
        # Figures, but no efficiency series: a roof measured afresh each run would put its own noise in it.
        assert set(rows) == {(calibrated["run_id"], "wall_time"), (plain["run_id"], "wall_time")}
        time = rows[(calibrated["run_id"], "wall_time")]
        # 0.625 FLOP/B under the host's ridge of 10: memory-bound at 10 GB/s.
        assert time.roofline_bound == "memory" and time.roofline_s == pytest.approx(BYTES / 10e9)
        assert time.roofline_peak_source == "host (calibrated), fp32 peak (calibrated on this host)"
        assert rows[(plain["run_id"], "wall_time")].roofline_s is None  # no calibration: no guessed roof


def test_only_ok_wall_time_results_with_counts_get_figures(sessions: sessionmaker[Session]) -> None:
    results = [builders.result(name="ok"), builders.result(name="nocounts", flops=None, bytes_accessed=None),
               builders.result(name="failed", status="failed", samples=[], message="boom"),
               builders.result(name="ok", metric="rel_error", unit="1")]
    ingest(sessions, [builders.manifest(results=results, environment=builders.environment(**builders.H200))])
    with sessions() as s:
        figured = {(name, metric) for name, metric, roof in s.execute(
            select(Benchmark.name, Series.metric, Result.roofline_s).join(Series, Series.benchmark_id == Benchmark.id)
            .join(Result, Result.series_id == Series.id)) if roof is not None}
        metrics = set(s.execute(select(Benchmark.name, Series.metric)
                                .join(Series, Series.benchmark_id == Benchmark.id)))
    assert figured == {("ok", "wall_time")}
    assert ("ok", "roofline_fraction") in metrics and ("nocounts", "roofline_fraction") not in metrics


def test_a_calibrated_run_submitted_twice_is_stored_once(sessions: sessionmaker[Session]) -> None:
    doc = builders.manifest(environment=builders.environment(calibration=builders.calibration()))
    ingest(sessions, [doc])
    with unit_of_work(sessions) as s:
        assert not ingest_manifest(s, parse_manifest(copy.deepcopy(doc))).created
    with sessions() as s:
        assert len(s.scalars(select(Result)).all()) == 1


def test_a_run_without_calibration_keeps_the_digest_it_had_before_the_field(sessions: sessionmaker[Session]) -> None:
    doc = builders.manifest()
    ingest(sessions, [doc])
    before_the_field = parse_manifest(doc).model_dump(mode="json")
    del before_the_field["environment"]["calibration"]  # what the dump was when the contract had no such field
    # ...nor the fields added since, while unset (the environment's pinning, the run's host health, the results'
    # benchmark versions, the repository's root commits)
    for name in UNSET_IDENTITY:
        del before_the_field["environment"][name]
    del before_the_field["host_health"], before_the_field["round"]
    for result in before_the_field["results"]:
        del result["benchmark_version"]
    del before_the_field["repository"]["first_commits"]
    with sessions() as s:
        assert s.scalars(select(Run.manifest_digest)).one() == manifest_digest(before_the_field)


def test_an_efficiency_drop_is_a_finding_grouped_with_the_time_regression(sessions: sessionmaker[Session]) -> None:
    docs = []
    for p, level in enumerate([1e-3] * 5 + [1.5e-3] * 5):
        samples = [level * (1 + 0.002 * i) for i in range(5)]
        docs.append(builders.manifest(p, [builders.result(samples=samples)],
                                      environment=builders.environment(**builders.H200)))
    ingest(sessions, docs)
    with unit_of_work(sessions) as s:
        detect_many(s, list(s.scalars(select(Series.id))), EDivisiveDetector())
    with sessions() as s:
        findings = {metric: f for f, metric in s.execute(select(Finding, Series.metric).join(Series))}
        assert set(findings) == {"wall_time", "roofline_fraction"}
        efficiency = findings["roofline_fraction"]
        assert (efficiency.kind, efficiency.direction) == ("efficiency", "regression")
        assert efficiency.value_after < efficiency.value_before  # higher is better, and it fell by a third
        assert efficiency.value_after / efficiency.value_before == pytest.approx(1 / 1.5, rel=0.02)
        assert findings["wall_time"].kind == "time"
        [alert] = list_alerts(s)
        assert alert.kind == "regression" and alert.commit_sha == builders.sha_for("demo-5")
        assert sorted(f.metric for f in alert.findings) == ["roofline_fraction", "wall_time"]


def test_the_result_page_shows_the_stored_figures(sessions: sessionmaker[Session], database_url: str,
                                                  tmp_path: Path) -> None:
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(settings)
    calibrated = builders.manifest(0, environment=builders.environment(calibration=builders.calibration()))
    ctx.submit(calibrated)
    ctx.submit(builders.manifest(1))  # no calibration: no stored figures, and the page says why
    with ctx.sessions() as s:
        ids = {(uid, metric): rid for rid, uid, metric in s.execute(
            select(Result.id, Run.run_uid, Series.metric).join(Run).join(Series))}
    client = create_app(settings, context=ctx).test_client()
    page = client.get(f"/results/{ids[(calibrated['run_id'], 'wall_time')]}").get_data(as_text=True)
    assert 'id="roofline-bound">memory<' in page and 'id="roofline-fraction">83.9 %<' in page
    assert "Roof: host (calibrated), fp32 peak (calibrated on this host): 100 GFLOP/s and 10 GB/s" in page
    other = [rid for (uid, metric), rid in ids.items() if uid != calibrated["run_id"]]
    assert "are not known" in client.get(f"/results/{other[0]}").get_data(as_text=True)


def test_a_result_faster_than_its_roof_is_flagged_and_shown_as_such(sessions: sessionmaker[Session],
                                                                     database_url: str, tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """A roof is an upper bound: measured faster than its calibrated roof allows (at 5 GB/s, the result's bytes
    take longer than its median), the result is flagged, ingest says so, and no page shows a fraction over 100 %.
    One at 10 GB/s (84 % of it) is not."""
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(settings)
    beaten = builders.manifest(0, environment=builders.environment(calibration=builders.calibration(
        bytes_per_s=5e9)))
    with caplog.at_level("WARNING", logger="service.pipeline.ingest"):
        ctx.submit(beaten)
    assert "1 result(s) measured faster than their roof allows" in caplog.text
    ctx.submit(builders.manifest(1, environment=builders.environment(calibration=builders.calibration())))
    # At 8 GB/s, 105 % of its roof: within the roof's noise, not flagged, and shown on the roof, not as 105 %.
    on_roof = builders.manifest(2, environment=builders.environment(calibration=builders.calibration(
        bytes_per_s=8e9)))
    ctx.submit(on_roof)
    with ctx.sessions() as s:
        rows = {uid: r for r, uid in s.execute(select(Result, Run.run_uid).join(Run).join(Series)
                                                .where(Series.metric == "wall_time"))}
        flagged, at_roof = rows[beaten["run_id"]], rows[on_roof["run_id"]]
        bounded = next(r for uid, r in rows.items() if uid not in (beaten["run_id"], on_roof["run_id"]))
        assert flagged.roofline_above is True and flagged.roofline_fraction == pytest.approx(1.68, rel=0.01)
        assert bounded.roofline_above is False and bounded.roofline_fraction == pytest.approx(0.839, rel=0.01)
        assert at_roof.roofline_above is False and at_roof.roofline_fraction == pytest.approx(1.049, rel=0.01)
        flagged_id, bounded_id, at_roof_id = flagged.id, bounded.id, at_roof.id
    client = create_app(settings, context=ctx).test_client()
    page = client.get(f"/results/{flagged_id}").get_data(as_text=True)
    # No fraction figure of it anywhere (a bare "168" also matched the page's random shas one time in a few dozen).
    assert 'id="roofline-above"' in page and 'id="roofline-fraction"' not in page
    assert not re.search(r"\b1(68|67|69)(\.\d+)?\s?%", page)
    assert "the roof does not bound it" in page
    assert 'id="roofline-fraction">83.9 %<' in client.get(f"/results/{bounded_id}").get_data(as_text=True)
    page = client.get(f"/results/{at_roof_id}").get_data(as_text=True)
    assert 'id="roofline-fraction">on the roof<' in page and "104.9" not in page and "105%" not in page


def test_results_stored_before_the_flag_are_flagged_by_the_migration(sessions: sessionmaker[Session],
                                                                     database_url: str) -> None:
    """Migration 0020 flags the results stored before it from their stored fraction, by ingest's own rule."""
    from alembic import command

    from service.store.db import alembic_config

    ingest(sessions, [builders.manifest(0, environment=builders.environment(calibration=builders.calibration(
        bytes_per_s=5e9))), builders.manifest(1, environment=builders.environment(
            calibration=builders.calibration()))])
    command.downgrade(alembic_config(database_url), "0019")
    command.upgrade(alembic_config(database_url), "head")
    with sessions() as s:
        flags = sorted((r.roofline_fraction > 1, r.roofline_above) for r in s.scalars(
            select(Result).join(Series).where(Series.metric == "wall_time")))
    assert flags == [(False, False), (True, True)]


def test_on_a_gpu_the_roofline_is_drawn_against_the_device_time(sessions: sessionmaker[Session]) -> None:
    """A run that recorded the benchmark's device time (the kernels' span per call, from the trace) is placed on
    its roof by that time, not by the wall time that carries Python's dispatch: on a real H200 a fused layernorm
    took 8 us of kernels in 100 us of wall time, 90 % of the memory roof by the one and 7 % by the other."""
    params = {"rows": 256, "dtype": "bfloat16"}
    device = [1.0e-4, 1.02e-4, 0.98e-4]
    doc = builders.manifest(results=[builders.result(samples=SAMPLES, params=params),
                                     builders.result(samples=device, params=params, metric="device_time",
                                                     flops=None, bytes_accessed=None)],
                            environment=builders.environment(**builders.H200))
    ingest(sessions, [doc])
    with sessions() as s:
        stored = results_by_metric(s)
        time, efficiency = stored["wall_time"], stored["roofline_fraction"]
        roof_s = BYTES / H200_SXM.memory_bytes_per_s
        assert time.roofline_fraction == pytest.approx(roof_s / 1.0e-4)  # the device median, not 1e-3
        assert efficiency.median == pytest.approx(roof_s / 1.0e-4)
        assert stored["device_time"].roofline_fraction is None  # one row carries the figures
