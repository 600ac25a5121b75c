"""The drill-down pages over a real captured run stored through the real pipeline (both databases): the result
page, its HLO, and the code of an x86 kernel, a TPU LLO program and a SASS kernel; dump text escaped."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.app import create_app
from service.context import Context
from service.settings import load_settings
from service.store import drilldown
from service.store.models import Result, Series
from tests.drilldown_data import HOSTILE, captured_run, drilldown_manifest

SASS_KERNEL = "_ZN4cute14wgmma_mainloopILi128EEEvPK13__nv_bfloat16Pf"


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    workdir = tmp_path_factory.mktemp("captured")
    manifest, store = captured_run(workdir)
    return manifest, store.root


@pytest.fixture
def app_and_result(captured: tuple[dict[str, Any], Path], sessions: sessionmaker[Session], database_url: str,
                   tmp_path: Path) -> tuple[Any, int]:
    manifest, artifacts = captured
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(settings)
    shutil.copytree(artifacts, ctx.artifacts.root, dirs_exist_ok=True)
    ctx.submit(drilldown_manifest(manifest, ctx.artifacts))
    with ctx.sessions() as s:
        result_id = s.scalars(select(Result.id).join(Series).where(Series.metric == "wall_time")).one()
    return create_app(settings, context=ctx), result_id


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_store_functions_read_the_parsed_records(app_and_result: tuple[Any, int]) -> None:
    app, rid = app_and_result
    ctx = app.extensions["kernelwatch"]
    store: ArtifactStore = ctx.artifacts
    with ctx.sessions() as s:
        header = drilldown.result_header(s, rid)
        assert header is not None and header.label.startswith("norms/rmsnorm") and header.unit == "s"
        assert header.flops and header.bytes_accessed and header.intensity == header.flops / header.bytes_accessed
        assert header.records_result_id == rid and {a.kind for a in header.artifacts} >= {"hlo", "xplane", "llo"}
        ops = drilldown.op_table(s, rid)
        assert ops and [o.self_ns for o in ops] == sorted((o.self_ns for o in ops), reverse=True)
        assert abs(sum(o.share for o in ops) - 1) < 1e-9 and any(o.kernel for o in ops)
        view = drilldown.hlo_view(s, rid, store)
        assert view is not None and view.note is None
        [module] = view.modules
        timed = [f for f in module.fusions if f.self_ns is not None]
        assert timed and timed[0].self_ns == max(f.self_ns or 0 for f in module.fusions)
        assert all(f.body and f.call for f in module.fusions) and module.lines[0].text.startswith("HloModule")
        assert any(HOSTILE in line.text for line in module.lines)
        without_text = drilldown.hlo_view(s, rid)
        assert without_text is not None and without_text.modules[0].lines == [] and without_text.note
        compiled = drilldown.kernels(s, rid)
        assert {k.isa for k in compiled} == {"x86-64", "tpu-llo", "sass-sm_80", "sass-sm_90a"}
        x86 = next(k for k in compiled if k.isa == "x86-64" and k.self_ns is not None)
        listing = drilldown.kernel_listing(s, rid, x86.name, store)
        assert listing is not None and listing.rows and len(listing.rows) == listing.total_rows == x86.instructions
        assert {r.cls for r in listing.rows} <= set(x86.mix) and listing.note is None
        llo = drilldown.kernel_listing(s, rid, "synthetic_form_a", store)
        assert llo is not None and llo.is_bundled and len(llo.rows) == llo.bundles == 12 and len(llo.loops) == 2
        assert all(len(r.slots) == len(llo.columns) for r in llo.rows)
        assert drilldown.kernel_listing(s, rid, "no_such_kernel", store) is None
        assert drilldown.result_header(s, 424242) is None and drilldown.op_table(s, 424242) == []
        assert drilldown.hlo_view(s, 424242) is None and drilldown.kernel_listing(s, 424242, "x") is None


def test_result_page_shows_header_ops_cost_and_links(app_and_result: tuple[Any, int]) -> None:
    app, rid = app_and_result
    client = app.test_client()
    html = client.get(f"/results/{rid}").get_data(as_text=True)
    text = text_of(html)
    assert "norms/rmsnorm" in text and "median wall_time" in text and "cpu · cpu ×1" in text
    assert re.search(r"\d(\.\d+)? (ms|µs|ns)", text)  # the median with its unit
    assert "MFLOP" in text and "FLOP/B" in text and "peak" in text and "are not known" in text
    assert 'id="ops"' in html and "broadcast_multiply_fusion" in html and "%" in text
    assert f'href="/results/{rid}/hlo"' in html
    assert f"/results/{rid}/kernels/broadcast_multiply_fusion?isa=x86-64" in html
    assert f"/results/{rid}/kernels/synthetic_form_a?isa=tpu-llo" in html
    assert "/series/" in html and "/static/plotly.min.js" in html
    assert HOSTILE not in html and "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html  # commit subject
    filtered = client.get(f"/results/{rid}?category=library").get_data(as_text=True)
    assert "ynn_fusion" in filtered and 'data-op="broadcast_multiply_fusion"' not in filtered
    assert client.get("/results/424242").status_code == 404


def test_hlo_page_lists_fusions_by_time_with_their_instructions(app_and_result: tuple[Any, int]) -> None:
    app, rid = app_and_result
    html = app.test_client().get(f"/results/{rid}/hlo?fusion=broadcast_multiply_fusion&text=1").get_data(as_text=True)
    assert html.index('id="fusion-broadcast_multiply_fusion"') < html.index('id="fusion-add_rsqrt_fusion"')
    assert re.search(r'<details class="fusion" id="fusion-broadcast_multiply_fusion"\s+open>', html)
    assert '<span class="hl-op">fusion</span>' in html and 'class="hl-shape">f32[1024,4096]{1,0}<' in html
    assert "norms.py:56" in html and "calls <code>fused_computation" in html
    assert HOSTILE not in html and "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    assert app.test_client().get("/results/424242/hlo").status_code == 404


def test_kernel_pages_show_x86_sass_and_llo_code(app_and_result: tuple[Any, int]) -> None:
    app, rid = app_and_result
    client = app.test_client()
    x86 = client.get(f"/results/{rid}/kernels/broadcast_multiply_fusion?isa=x86-64").get_data(as_text=True)
    assert 'id="listing"' in x86 and "vmulps" in x86 and 'id="mix"' in x86 and "vector_mul" in x86
    assert "Loop bodies" in x86 and "in-loop" in x86
    loops_only = client.get(f"/results/{rid}/kernels/broadcast_multiply_fusion?isa=x86-64&only=loops")
    rows = loops_only.get_data(as_text=True).count('<tr id="addr-')
    assert 0 < rows < x86.count('<tr id="addr-')
    llo = client.get(f"/results/{rid}/kernels/synthetic_form_a?isa=tpu-llo").get_data(as_text=True)
    assert llo.count('<tr id="addr-') == 12 and "empty-slot" in llo and "mxu_matmul" in llo
    assert "vmatmul.8x128.bf16" in llo and "↱" in llo and "↰" in llo
    sass = client.get(f"/results/{rid}/kernels/{SASS_KERNEL}?isa=sass-sm_90a").get_data(as_text=True)
    assert "HGMMA.64x128x16.F32.BF16" in sass and "@!P1" in sass and "Loop bodies (1)" in sass
    assert client.get(f"/results/{rid}/kernels/nope").status_code == 404


def test_series_page_links_each_point_to_its_result(app_and_result: tuple[Any, int]) -> None:
    app, rid = app_and_result
    with app.extensions["kernelwatch"].sessions() as s:
        series_id = s.scalars(select(Result.series_id).where(Result.id == rid)).one()
    html = app.test_client().get(f"/series/{series_id}").get_data(as_text=True)
    assert f'href="/results/{rid}"' in html and "plotly_click" in html
    api = app.test_client().get(f"/api/v1/series/{series_id}").get_json()
    assert api["points"][0]["result_ids"] == [rid]


def test_a_result_without_artifacts_says_what_is_missing(sessions: sessionmaker[Session], database_url: str,
                                                          tmp_path: Path) -> None:
    from tests import builders

    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(settings)
    ctx.submit(builders.manifest())
    with ctx.sessions() as s:
        rid = s.scalars(select(Result.id)).one()
    client = create_app(settings, context=ctx).test_client()
    page = text_of(client.get(f"/results/{rid}").get_data(as_text=True))
    assert "No op table" in page and "No compiled kernel" in page and "none captured" in page
    assert "1 ms" in page and "5.24 MFLOP" in page  # median and the benchmark's own FLOP count
    hlo = text_of(client.get(f"/results/{rid}/hlo").get_data(as_text=True))
    assert "No optimized HLO module" in hlo
