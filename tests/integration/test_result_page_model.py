"""The result page's two checks of stored figures against the model, over runs stored through the real ingest
(both databases): where the benchmark's own FLOP and byte counts disagree with XLA's cost analysis, and a
collective's algorithm and bus bandwidth, against NVLink's per-direction peak on an H200 and with no peak on a CPU
host."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.hardware import H200_SXM
from service.app import create_app
from service.context import Context
from service.settings import load_settings
from service.store import drilldown
from service.store.models import Benchmark, Result, Series
from tests import builders
from tests.drilldown_data import collective_results
from web.units import format_fraction, format_si

FLOPS, BYTES = builders.result()["flops"], builders.result()["bytes_accessed"]
SAMPLES = [1.2e-3, 1.0e-3, 1.1e-3]
MIB = 1024 * 1024


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture
def context(sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> Context:
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url})
    return Context.create(settings)


def result_id(ctx: Context, name: str, metric: str = "wall_time") -> int:
    with ctx.sessions() as s:
        return s.scalars(select(Result.id).join(Series, Series.id == Result.series_id)
                         .join(Benchmark, Benchmark.id == Series.benchmark_id)
                         .where(Benchmark.name == name, Series.metric == metric)).one()


def page(ctx: Context, rid: int) -> tuple[str, str]:
    html = create_app(ctx.settings, context=ctx).test_client().get(f"/results/{rid}").get_data(as_text=True)
    return html, text_of(html)


def test_a_cost_analysis_that_disagrees_is_shown_and_one_that_agrees_is_not(context: Context) -> None:
    disagrees = builders.result(name="padded", cost={"flops": FLOPS * 1.02, "bytes accessed": BYTES * 1.8,
                                                     "footprint bytes": 50.3e6})
    halves = builders.result(name="fused", cost={"flops": FLOPS * 0.5, "bytes accessed": BYTES})
    agrees = builders.result(name="agrees", cost={"flops": FLOPS * 1.05, "bytes accessed": BYTES * 0.95})
    context.submit(builders.manifest(results=[disagrees, halves, agrees]))

    with context.sessions() as s:
        header = drilldown.result_header(s, result_id(context, "padded"))
        assert header is not None
        [d] = header.cost_disagreements
        assert d.quantity == "bytes" and d.analytic == BYTES and d.xla == pytest.approx(1.8 * BYTES)

    html, text = page(context, result_id(context, "padded"))
    assert 'id="cost-disagreements"' in html
    assert "XLA counts 1.8× the benchmark's bytes (+80 %)" in text
    assert "XLA counts" not in text.replace("XLA counts 1.8× the benchmark's bytes", "")  # FLOPs within 10 %
    assert "fused ops' bytes once, transcendentals apart, and padded shapes" in html  # the why-tooltip
    assert "XLA footprint bytes 50.3 MB" in text  # every count of bytes in bytes (it read "50.3 M")

    _, text = page(context, result_id(context, "fused"))
    assert "XLA counts 0.5× the benchmark's FLOPs (-50 %)" in text and "benchmark's bytes" not in text

    html, text = page(context, result_id(context, "agrees"))
    assert 'id="cost-disagreements"' not in html and "XLA counts" not in text
    assert "Bandwidth" not in text  # not a collective


def test_a_collective_on_a_cpu_host_shows_algbw_and_busbw_without_a_peak(context: Context) -> None:
    context.submit(builders.manifest(results=collective_results("all_reduce", 1024, SAMPLES),
                                     environment=builders.environment(device_count=8)))
    rid = result_id(context, "all_reduce")
    with context.sessions() as s:
        median = s.scalars(select(Result.median).where(Result.id == rid)).one()
        header = drilldown.result_header(s, rid)
    assert median is not None and header is not None and header.bandwidth is not None
    algbw = MIB / median  # S / t, S the per-device buffer of size_kib KiB
    busbw = algbw * 2 * 7 / 8  # all-reduce over 8 ranks
    bw = header.bandwidth
    assert bw.collective == "all-reduce" and bw.ranks == 8 and bw.size_bytes == MIB
    assert bw.algbw_bytes_per_s == pytest.approx(algbw) and bw.busbw_bytes_per_s == pytest.approx(busbw)
    assert bw.peak_bytes_per_s is None and bw.fraction_of_peak is None

    html, text = page(context, rid)
    assert 'id="bandwidth"' in html and "all-reduce over n = 8 ranks" in text
    assert f"algbw = S / t {format_si(algbw, 'B/s')}" in text
    assert f"busbw = algbw × 2(n−1)/n (1.75) {format_si(busbw, 'B/s')}" in text
    assert "no published interconnect figure" in text and 'id="bw-fraction"' not in html

    # The algbw series' own page: its GB/s median turned back into the time of S, the same figures.
    algbw_rid = result_id(context, "all_reduce", metric="algbw")
    _, text = page(context, algbw_rid)
    assert f"algbw = S / t {format_si(algbw, 'B/s')}" in text
    assert f"{format_si(busbw, 'B/s')}" in text


def test_a_collective_on_h200s_shows_its_fraction_of_the_nvlink_peak(context: Context) -> None:
    results: list[dict[str, Any]] = [
        *collective_results("all_gather", 8192, SAMPLES), *collective_results("ring_all_reduce_ppermute", 64, SAMPLES)]
    context.submit(builders.manifest(results=results,
                                     environment=builders.environment(**builders.H200, device_count=8)))
    rid = result_id(context, "all_gather")
    with context.sessions() as s:
        median = s.scalars(select(Result.median).where(Result.id == rid)).one()
    assert median is not None
    algbw = 8192 * 1024 / median
    busbw = algbw * 7 / 8  # all-gather: (n-1)/n
    peak = 900e9 / 2  # NVLink's 900 GB/s are both directions; busbw is one
    assert H200_SXM.interconnect is not None and H200_SXM.interconnect.per_direction_bytes_per_s == peak

    html, text = page(context, rid)
    assert "all-gather over n = 8 ranks" in text and f"{format_si(busbw, 'B/s')}" in text
    assert "busbw = algbw × (n−1)/n (0.875)" in text
    assert "NVLink peak, per direction 450 GB/s" in text and "900 GB/s as published, both directions" in text
    fraction = re.search(r'id="bw-fraction">([^<]+)<', html)
    assert fraction is not None and fraction.group(1) == format_fraction(busbw / peak)
    assert "NVIDIA H200 SXM: NVIDIA H200 Tensor Core GPU datasheet (2024), SXM" in text
    assert "no published interconnect figure" not in text

    # The hand-written ring is an all-reduce too: 2(n-1)/n.
    _, text = page(context, result_id(context, "ring_all_reduce_ppermute"))
    ring_busbw = 64 * 1024 / median * 2 * 7 / 8  # the same samples, so the same median
    assert "all-reduce over n = 8 ranks" in text and format_si(ring_busbw, "B/s") in text
