"""The drill-down pages over a real captured run stored through the real pipeline (both databases): the result
page, its HLO, and the code of an x86 kernel, a TPU LLO program and a SASS kernel; dump text escaped."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
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
from tests.private_servers import free_port
from tests.processes import ServiceProcess
from tests.scratch_database import at_head

SASS_KERNEL = "_ZN4cute14wgmma_mainloopILi128EEEvPK13__nv_bfloat16Pf"


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    workdir = tmp_path_factory.mktemp("captured")
    manifest, store = captured_run(workdir)
    return manifest, store.root


@pytest.fixture
def app_and_result(captured: tuple[dict[str, Any], Path], sessions: sessionmaker[Session], database_url: str,
                   tmp_path: Path) -> tuple[Any, int]:
    return stored_app(captured, database_url, tmp_path)


@pytest.fixture
def sqlite_app_and_result(captured: tuple[dict[str, Any], Path], sqlite_database: str,
                          tmp_path: Path) -> tuple[Any, int]:
    """As ``app_and_result``, on SQLite alone: for what reads the store as every CLI read does (the pages run on
    both databases)."""
    at_head(sqlite_database)
    return stored_app(captured, sqlite_database, tmp_path)


def stored_app(captured: tuple[dict[str, Any], Path], database_url: str, tmp_path: Path) -> tuple[Any, int]:
    """The captured run stored in a database at head, and the app over it; (app, the wall-time result's id)."""
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
    assert "norms/rmsnorm" in text and "median wall_time" in text
    # One CPU device, named once: not "cpu · cpu ×1" (a count of 1 read as one core).
    assert re.search(r'card-label">hardware</div><div class="card-value small">cpu</div>', html), html[:2000]
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


# --- the trace: timeline, downloads, `kernelwatch trace` ---------------------------------------------------------

def test_the_result_links_a_timeline_of_the_ops_the_table_counts(app_and_result: tuple[Any, int]) -> None:
    app, rid = app_and_result
    client = app.test_client()
    page = client.get(f"/results/{rid}").get_data(as_text=True)
    assert f'href="/results/{rid}/trace"' in page and f'href="/results/{rid}/trace.xplane.pb"' in page
    assert f'href="/results/{rid}/trace.json.gz"' in page
    assert f"/results/{rid}/trace?op=broadcast_multiply_fusion" in page  # from the op's row

    html = client.get(f"/results/{rid}/trace?op=broadcast_multiply_fusion").get_data(as_text=True)
    figure = json.loads(re.search(r'<script id="figures" type="application/json">(.*?)</script>', html, re.S)[1])
    bars = {trace["name"]: trace for trace in figure["timeline"]["data"]}
    assert set(bars) == {"ops", "broadcast_multiply_fusion"}
    assert {row[0] for row in bars["broadcast_multiply_fusion"]["customdata"]} == {"broadcast_multiply_fusion"}
    assert "broadcast_multiply_fusion" not in {row[0] for row in bars["ops"]["customdata"]}
    # The timeline holds the executions the op table counts: as many bars per op as occurrences.
    with app.extensions["kernelwatch"].sessions() as s:
        occurrences = {o.op: o.occurrences for o in drilldown.op_table(s, rid)}
    drawn: dict[str, int] = {}
    for trace in figure["timeline"]["data"]:
        for row in trace["customdata"]:
            drawn[row[0]] = drawn.get(row[0], 0) + 1
    assert drawn == occurrences
    assert "kernelwatch trace" in html and 'id="download-perfetto"' in html

    missing = client.get(f"/results/{rid}/trace?op=no_such_op").get_data(as_text=True)
    assert 'id="op-missing"' in missing
    assert client.get(f"/results/{rid}/trace?artifact=zz").status_code == 404  # no such trace: a page, not a 500
    assert client.get("/results/424242/trace").status_code == 404


def test_the_trace_downloads_are_the_raw_xspace_and_trace_event_json(app_and_result: tuple[Any, int]) -> None:
    app, rid = app_and_result
    client = app.test_client()
    ctx = app.extensions["kernelwatch"]
    with ctx.sessions() as s:
        header = drilldown.result_header(s, rid)
    assert header is not None
    [xplane] = [a for a in header.artifacts if a.kind == "xplane"]
    raw = client.get(f"/results/{rid}/trace.xplane.pb")
    assert raw.status_code == 200 and raw.data == ctx.artifacts.get(xplane.sha256)
    filename = f"kernelwatch-result-{rid}-{xplane.sha256[:12]}.xplane.pb"
    assert raw.headers["Content-Disposition"] == f"attachment; filename={filename}"

    perfetto = client.get(f"/results/{rid}/trace.json.gz")
    assert perfetto.status_code == 200 and perfetto.mimetype == "application/gzip"
    document = json.loads(gzip.decompress(perfetto.data))
    assert_trace_event_json(document)
    ops = [e for e in document["traceEvents"] if e["ph"] == "X" and "hlo_op" in e.get("args", {})]
    with ctx.sessions() as s:
        assert len(ops) == sum(o.occurrences for o in drilldown.op_table(s, rid))


def test_xprofs_roofline_of_the_trace_stands_beside_ours_and_says_when_it_has_none(
        app_and_result: tuple[Any, int]) -> None:
    """xprof's roofline_model tool run on the stored trace: a CPU trace has no device plane, so the page says
    xprof has no rows (rather than a table of zeros) and links back to the result."""
    app, rid = app_and_result
    client = app.test_client()
    page = client.get(f"/results/{rid}/xprof-roofline")
    html = page.get_data(as_text=True)
    assert page.status_code == 200, html
    assert 'id="xprof-empty"' in html and "reads device planes" in text_of(html)
    assert 'id="ours"' in html and f'href="/results/{rid}"' in html
    trace_page = client.get(f"/results/{rid}/trace").get_data(as_text=True)
    assert f'href="/results/{rid}/xprof-roofline?artifact=' in trace_page


def test_a_trace_whose_bytes_are_gone_is_said_so(app_and_result: tuple[Any, int]) -> None:
    app, rid = app_and_result
    ctx = app.extensions["kernelwatch"]
    with ctx.sessions() as s:
        header = drilldown.result_header(s, rid)
    assert header is not None
    [xplane] = [a for a in header.artifacts if a.kind == "xplane"]
    ctx.artifacts.path_for(xplane.sha256).unlink()
    client = app.test_client()
    for path in ("trace", "trace.xplane.pb", "trace.json.gz", "xprof-roofline"):
        page = client.get(f"/results/{rid}/{path}")
        assert page.status_code == 404 and "cannot be read back" in text_of(page.get_data(as_text=True)), path


def assert_trace_event_json(document: dict[str, Any]) -> None:
    """What Perfetto's JSON importer needs (the Trace Event Format): a traceEvents list whose complete events
    have a name, a pid and tid, and numeric ts and dur; metadata events name each process and thread used; flow
    events (XLA's producer/consumer links) have an id, a finish bound to its enclosing slice and a start."""
    events = document["traceEvents"]
    assert isinstance(events, list) and events and document["displayTimeUnit"] in ("ms", "ns")
    named = {(e["pid"], e.get("tid")) for e in events
             if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    complete = [e for e in events if e["ph"] == "X"]
    assert complete and all(e["ph"] in ("M", "X", "s", "f") for e in events)
    for e in complete:
        assert isinstance(e["name"], str) and isinstance(e["ts"], int | float) and isinstance(e["dur"], int | float)
        assert e["ts"] >= 0 and e["dur"] >= 0 and (e["pid"], None) in named and (e["pid"], e["tid"]) in named
    flows = [e for e in events if e["ph"] in ("s", "f")]
    for e in flows:
        assert isinstance(e["id"], str) and isinstance(e["ts"], int | float) and (e["pid"], e["tid"]) in named
    assert all(e.get("bp") == "e" for e in flows if e["ph"] == "f")
    assert {e["id"] for e in flows if e["ph"] == "f"} <= {e["id"] for e in flows if e["ph"] == "s"}


def test_kernelwatch_trace_lays_the_traces_out_for_xprof_and_serves_them(
        sqlite_app_and_result: tuple[Any, int], sqlite_database: str, tmp_path: Path) -> None:
    _, rid = sqlite_app_and_result
    env = {**os.environ, "KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": sqlite_database}
    out = tmp_path / "perfetto.json.gz"
    done = subprocess.run([sys.executable, "-m", "service.cli", "trace", str(rid), "--no-serve", "--perfetto",
                           str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    logdir = Path(done.stdout.strip())
    [xplane] = logdir.glob("plugins/profile/*/*.xplane.pb")
    assert logdir == tmp_path / "traces" / f"result-{rid}" and xplane.name == f"result-{rid}.xplane.pb"
    assert xplane.parent.name.startswith("norms_rmsnorm")
    assert_trace_event_json(json.loads(gzip.decompress(out.read_bytes())))
    missing = subprocess.run([sys.executable, "-m", "service.cli", "trace", "424242", "--no-serve"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no result 424242" in missing.stderr
    # By the run's id, as `kernelwatch run` and `ci` print it (they print no result ids): every traced benchmark of
    # the run; a commit's sha, what a user tries next, is said to be no run.
    with sqlite3.connect(sqlite_database.removeprefix("sqlite:///")) as db:
        [(run_uid,)] = db.execute("select run.run_uid from result join run on run.id = result.run_id "
                                  "where result.id = ?", (rid,)).fetchall()
    by_run = subprocess.run([sys.executable, "-m", "service.cli", "trace", run_uid, "--no-serve"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert by_run.returncode == 0, by_run.stderr
    assert Path(by_run.stdout.strip()) == tmp_path / "traces" / f"run-{run_uid}"
    assert xplane.parent.name in {p.parent.name for p in Path(by_run.stdout.strip()).glob("plugins/profile/*/*.pb")}
    for wrong, said in (("68cbebe", "no run '68cbebe'"), ("HEAD~1", "is no result id (a whole number")):
        refused = subprocess.run([sys.executable, "-m", "service.cli", "trace", wrong, "--no-serve"], env=env,
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    nowhere = tmp_path / "no-such-dir" / "x.json.gz"
    unwritable = subprocess.run([sys.executable, "-m", "service.cli", "trace", str(rid), "--no-serve", "--perfetto",
                                 str(nowhere)], env=env, capture_output=True, text=True, timeout=120)
    assert unwritable.returncode == 2 and f"cannot write the Perfetto trace {nowhere}" in unwritable.stderr

    # Served: the local xprof lists the trace's session as a run it can open.
    port = free_port()
    with ServiceProcess("xprof", [sys.executable, "-m", "service.cli", "trace", str(rid), "--port", str(port)], env,
                        tmp_path / "logs") as xprof:
        runs: list[Any] = []

        def listed() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/profile/runs", timeout=5) as r:
                    body = r.read()
            except OSError:
                return False
            runs[:] = json.loads(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)  # xprof gzips
            return bool(runs)

        xprof.wait_until(listed, 90, "xprof to list the result's trace")
        assert [str(run) for run in runs] == [xplane.parent.name], runs
        # The profiles are served to this host alone: xprof's own default bound every interface.
        assert listening_addresses(port) == {"127.0.0.1"}, listening_addresses(port)
        # Another `trace` on these ports is one line, not xprof's traceback after saying where it serves.
        taken = subprocess.run([sys.executable, "-m", "service.cli", "trace", str(rid), "--port", str(port)], env=env,
                               capture_output=True, text=True, timeout=120)
        assert taken.returncode == 2 and f"port {port} is not free" in taken.stderr, taken.stderr
        assert "Traceback" not in taken.stderr and "serving" not in taken.stderr
        # A SIGTERM to `trace` alone (a supervisor's, a CI timeout's; not Ctrl-C's whole group) stops xprof too: it
        # was left serving, owned by nobody, its worker port open on every interface.
        os.kill(xprof.proc.pid, signal.SIGTERM)
        xprof.proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while (listening_addresses(port) or listening_addresses(port + 1)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not listening_addresses(port) and not listening_addresses(port + 1)


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on ``port`` (/proc/net/tcp and tcp6: state 0A)."""
    import ipaddress

    found: set[str] = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port and len(address) == width:
                # Each 32-bit word of the address is in host (little-endian) order.
                raw = b"".join(bytes.fromhex(address[i:i + 8])[::-1] for i in range(0, width, 8))
                found.add(str(ipaddress.ip_address(raw)))
    return found


def test_a_later_round_shows_the_records_its_session_captured(captured: tuple[dict[str, Any], Path],
                                                              sqlite_database: str, tmp_path: Path) -> None:
    """Only a session's first round captures; the rest time only. A later round's result (the one the series
    chart's point opens: the newest) shows the records its commit's first round captured, and says whose, rather
    than "no trace is kept"; `kernelwatch trace` on it lays that trace out."""
    import copy
    import uuid

    from service.store.traces import trace_files

    manifest, artifacts = captured
    at_head(sqlite_database)
    settings = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": sqlite_database})
    ctx = Context.create(settings)
    shutil.copytree(artifacts, ctx.artifacts.root, dirs_exist_ok=True)
    first = copy.deepcopy(manifest)
    first["round"] = {"session": "roundsession0001", "index": 0}
    later = copy.deepcopy(first)
    later["run_id"], later["round"] = uuid.uuid4().hex, {"session": "roundsession0001", "index": 1}
    for result in later["results"]:
        result.pop("artifacts", None)
    ctx.submit(first)
    ctx.submit(later)
    with ctx.sessions() as s:
        captured_id, timed_id = s.scalars(select(Result.id).join(Series).where(Series.metric == "wall_time")
                                          .order_by(Result.id)).all()
        header = drilldown.result_header(s, timed_id)
        assert header is not None and header.records_result_id == captured_id
        assert header.records_run_uid == first["run_id"]  # another run (it read "of the same run")
        assert trace_files(header) and {a.kind for a in header.artifacts} >= {"hlo", "xplane"}
    client = create_app(settings, context=ctx).test_client()
    page = client.get(f"/results/{timed_id}").get_data(as_text=True)
    assert f"result {captured_id}</a> of run" in page and first["run_id"] in page and "of the same run" not in page
    # The run named as every other face names it (its id, whose prefix `compare` takes), not by a database row
    # number ("run 7" here, "8b7f860e..." on the next line).
    for path in (f"/results/{timed_id}", f"/results/{timed_id}/trace"):
        shown = client.get(path).get_data(as_text=True)
        assert f'run <span class="sha run-id" title="{later["run_id"]}">{later["run_id"][:12]}</span>' in shown, path
    # Its download is named after the result that captured it (it was named after this one, holding that one's).
    download = client.get(f"/results/{timed_id}/trace.xplane.pb")
    assert f"filename=kernelwatch-result-{captured_id}-" in download.headers["Content-Disposition"]
    from tests.cli_inprocess import run_cli

    laid = run_cli(["trace", str(timed_id), "--no-serve", "--logdir", str(tmp_path / "logs")],
                   {"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": sqlite_database,
                    "PATH": os.environ.get("PATH", "")})
    assert laid.returncode == 0, laid.stderr
    assert [p.name for p in (tmp_path / "logs").rglob("*.xplane.pb")] == [f"result-{captured_id}.xplane.pb"]
    assert f"captured by result {captured_id} of run {first['run_id']}" in laid.stderr, laid.stderr
