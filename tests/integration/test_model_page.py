"""/model over manifests stored through the real pipeline on an H200: one point per benchmark, the ridge of the
published roofs, and the predict form answering with `kernelwatch predict`'s own table (or a 400)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.hardware import H200_SXM
from service.app import create_app
from service.context import Context
from service.settings import load_settings
from tests import builders


def softmax(rows: int, seconds: float) -> dict[str, Any]:
    # softmax/softmax_rows as the suite declares it: 5 FLOPs and 8 bytes per element.
    return builders.result(params={"rows": rows, "cols": 4096}, samples=[seconds, seconds * 1.01, seconds * 0.99],
                           flops=5.0 * rows * 4096, bytes_accessed=8.0 * rows * 4096)


@pytest.fixture
def client(sessions: sessionmaker[Session], database_url: str, tmp_path: Path) -> Iterator[FlaskClient]:
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": database_url})
    ctx = Context.create(settings)
    h200 = builders.environment(**builders.H200)
    ctx.submit(builders.manifest(0, [softmax(256, 2e-5), softmax(1024, 5e-5)], environment=h200))
    big = builders.result("matmul", "mm", params={"n": 4096}, samples=[1e-3, 1.01e-3, 0.99e-3],
                          flops=2.0 * 4096 ** 3, bytes_accessed=3.0 * 4096 ** 2 * 4)  # 683 FLOP/B: compute-bound
    ctx.submit(builders.manifest(1, [softmax(256, 1e-5), big], environment=h200))  # newer: this one is drawn
    # The older commit measured again after it, as a confirmation does: still the newer commit's result is drawn.
    again = (datetime(2026, 2, 1, 1, tzinfo=UTC)).isoformat()
    ctx.submit(builders.manifest(0, [softmax(256, 4e-5)], environment=h200, trigger="confirm", started_at=again,
                                 finished_at=again))
    ctx.submit(builders.manifest(2, [softmax(64, 1e-5)]))  # a CPU without calibration: no figures, not offered
    try:
        yield create_app(settings, context=ctx).test_client()
    finally:
        ctx.close()


def test_the_suite_on_the_h200_roofline(client: FlaskClient) -> None:
    response = client.get("/model?hardware=NVIDIA%20H200")
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    # softmax names no dtype: float32, whose fastest path on an H200 is the TF32 tensor-core peak.
    ridge = H200_SXM.peak_flops("tf32") / H200_SXM.memory_bytes_per_s  # type: ignore[operator]
    assert f'<span id="ridge">{ridge:.3g}</span>' in page
    assert f"ridge {ridge:.3g} FLOP/B" in page  # the figure's own label
    assert page.count("softmax/softmax_rows [cols=4096,rows=") == 2 + 2  # two points: in the table and the figure
    assert "cols=4096,rows=256" in page and "cols=4096,rows=1024" in page
    assert "rows=64" not in page  # the uncalibrated CPU host has no figures
    assert "NVIDIA H200" in page and 'href="/model"' in page
    # Each row's roof is the one that binds it: the compute peak for the matmul, the memory's for softmax.
    rows = {row.split("</td>")[0]: row for row in page.split('<tr><td>')[1:]}
    matmul = next(row for label, row in rows.items() if "matmul/mm" in label)
    assert "compute" in matmul and "FLOP/s" in matmul and "B/s" not in matmul, matmul
    assert all("B/s" in row for label, row in rows.items() if "softmax" in label)
    # softmax at 256 rows from commit 1 (5.24 MFLOP in 10 µs), not commit 0's re-run (40 µs) that landed after it.
    small = next(row for label, row in rows.items() if "rows=256" in label)
    assert "524 GFLOP/s" in small and builders.commit(1)["sha"][:10] in small, small


def test_the_predict_form_renders_the_commands_table(client: FlaskClient) -> None:
    response = client.get("/model", query_string={"kernel": "softmax", "from": "rows=256,cols=4096",
                                                  "to": "rows=512", "hardware": "h200", "predict": "1"})
    page = response.get_data(as_text=True)
    assert response.status_code == 200, page
    assert '<pre id="predict-table">softmax/softmax_rows on NVIDIA H200' in page
    assert "rows=512,cols=4096" in page
    # The roof the predict table uses is the one ingest stored figures against: one rule, one ridge.
    stored = client.get("/model?hardware=NVIDIA%20H200").get_data(as_text=True)
    ridge = stored.split('<span id="ridge">', 1)[1].split("<", 1)[0]
    assert f"ridge {ridge} FLOP/B" in page
    assert '<span id="ridge">' in page  # the chart picked the same chip: ?hardware=h200 names both


def test_the_charts_environment_stands_for_its_chip_in_the_form(client: FlaskClient) -> None:
    response = client.get("/model", query_string={"kernel": "softmax", "from": "rows=256,cols=4096",
                                                  "to": "rows=512", "hardware": "NVIDIA H200", "predict": "1"})
    assert response.status_code == 200
    assert '<option value="h200" selected>' in response.get_data(as_text=True)


@pytest.mark.parametrize("query", [
    {"kernel": "nope", "from": "rows=1", "to": "rows=2"},
    {"kernel": "softmax", "from": "rows", "to": "rows=2"},
    {"kernel": "softmax", "from": "rows=1", "to": "rows=2", "hardware": "tpu-v9"},
    {"kernel": "softmax", "from": "", "to": "rows=2"},
    {"kernel": "<script>alert(1)</script>", "from": "rows=1", "to": "rows=2"},
    {"kernel": "softmax", "from": "rows=256", "to": f"rows={10 ** 400}"},  # the cost function overflows
    {"kernel": "softmax", "from": "rows=256", "to": f"rows={10 ** 308}"},  # counts past a float's range
])
def test_bad_predict_input_is_a_400_with_the_reason(client: FlaskClient, query: dict[str, str]) -> None:
    response = client.get("/model", query_string={**query, "predict": "1"})
    page = response.get_data(as_text=True)
    assert response.status_code == 400
    assert 'id="predict-error"' in page and "<script>alert(1)" not in page
