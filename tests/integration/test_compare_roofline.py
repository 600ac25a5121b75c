"""A comparison carries each side's achieved fraction of the roofline (both databases): two H200 runs stored through
the real ingest, read back as the JSON (stored and computed alike), the compare and commit pages and the pull
request's comment; the efficiency series ingest derives from wall time stays stored but is no row of its own in
the comparison, where it would only repeat the time's verdict. A calibrated CPU host, which has no such series,
gets the fractions too."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.hardware import H200_SXM
from service.contract.manifest import Manifest
from service.detect.compare import CompareParams
from service.pipeline.compare import compare_resolved, resolve
from service.pipeline.ingest import ingest_manifest
from service.report.compare_formats import format_markdown
from service.report.compare_table import format_text, from_json, to_json
from service.store.db import unit_of_work
from service.store.models import PullRequest, Series
from tests import builders
from tests.api_client import Api, make_api
from tests.fake_github import PLAIN_TOKEN, FakeGitHub, serve_fake_github
from tests.integration.test_compare_outputs import SCHEMA
from tests.pr_hook import REPO, SECRET

BYTES = builders.result()["bytes_accessed"]  # memory-bound: its roof is the bytes at HBM bandwidth
ROOF_S = BYTES / H200_SXM.memory_bytes_per_s  # 1.75 µs
LEVELS = {"softmax_rows": 1e-5, "layernorm": 2e-5}  # 17 % and 9 % of the roofline
SLOWER = 1.25  # softmax_rows in head: 17 % -> 14 %


def results(position: int, slower: bool) -> list[dict[str, Any]]:
    rng = np.random.default_rng(position)
    out = []
    for name, level in LEVELS.items():
        factor = SLOWER if slower and name == "softmax_rows" else 1.0
        samples = [float(level * factor * (1 + 0.005 * v)) for v in rng.standard_normal(10)]
        out.append(builders.result(name=name, samples=samples, params={"rows": 256, "dtype": "bfloat16"}))
    return out


def h200_manifest(position: int, slower: bool = False) -> dict[str, Any]:
    return builders.manifest(position, results(position, slower), environment=builders.environment(**builders.H200))


def fraction(manifest: dict[str, Any], name: str, roof_s: float = ROOF_S) -> float:
    [r] = [r for r in manifest["results"] if r["name"] == name]
    return float(roof_s / np.median(r["samples"]))


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with serve_fake_github(FakeGitHub()) as server:
        yield server


@pytest.fixture
def hooked(sessions: sessionmaker[Session], database_url: str, tmp_path: Path, fake: FakeGitHub) -> Iterator[Api]:
    """The app with the pull-request hook on, posting to a fake GitHub; work runs in-process."""
    api = make_api(database_url, tmp_path, KERNELWATCH_GITHUB_WEBHOOK_SECRET=SECRET,
                   KERNELWATCH_GITHUB_API_URL=fake.url, KERNELWATCH_GITHUB_TOKEN=PLAIN_TOKEN,
                   KERNELWATCH_FOLLOW_UP="none", KERNELWATCH_PUBLIC_URL="http://kw.test", KERNELWATCH_PR_ROUNDS="3")
    try:
        yield api
    finally:
        api.ctx.close()


def track_pull_request(api: Api, merge_base: str, head: str) -> int:
    """A pull request the hook follows, as ``_track`` leaves it once both sides are asked to run."""
    now = datetime.now(UTC)
    with unit_of_work(api.ctx.sessions) as session:
        pr = PullRequest(repository=REPO, number=7, clone_url="file:///tmp/demo", installation_id=None,
                         base_ref="main", base_sha=merge_base, head_repository=REPO, head_sha=head,
                         merge_base_sha=merge_base, state="running", created_at=now, updated_at=now)
        session.add(pr)
        session.flush()
        return pr.id


def test_the_fraction_before_and_after_reaches_the_json_the_pages_and_the_comment(hooked: Api,
                                                                                  fake: FakeGitHub) -> None:
    base_doc, head_doc = h200_manifest(0), h200_manifest(1, slower=True)
    # Three runs a side: what the pull-request report waits for (KERNELWATCH_PR_ROUNDS in the fixture); their
    # median fraction is the first run's own (the others sit either side of it).
    for doc in [*builders.replicated(base_doc), *builders.replicated(head_doc)]:
        hooked.ctx.submit(doc)  # the head is compared with the base on write, and stored
    base_sha, head_sha = base_doc["commit"]["sha"], head_doc["commit"]["sha"]

    with hooked.ctx.sessions() as session:
        # The derived series is still stored (and detection reads it: test_roofline_ingest.py).
        assert set(session.scalars(select(Series.metric))) == {"wall_time", "roofline_fraction"}
        base, head = resolve(session, base_sha), resolve(session, head_sha)
        stored = compare_resolved(session, base, head, CompareParams())
        computed = compare_resolved(session, base, head, CompareParams(), stored=False)
    assert stored.pairs == () and computed.pairs != ()  # the first was read from what was stored on write
    document = to_json(stored.report, stored.base, stored.head, stored.notes)
    assert document == to_json(computed.report, computed.base, computed.head, computed.notes)
    jsonschema.validate(document, SCHEMA)
    rows = {row["name"]: row for row in document["benchmarks"]}
    assert [row["metric"] for row in document["benchmarks"]] == ["wall_time", "wall_time"]
    assert document["summary"]["regression"] == 1  # once, not again as an efficiency drop
    assert rows["softmax_rows"]["verdict"] == "regression"
    for name in LEVELS:
        assert rows[name]["base_fraction"] == pytest.approx(fraction(base_doc, name), rel=1e-9)
        assert rows[name]["head_fraction"] == pytest.approx(fraction(head_doc, name), rel=1e-9)
    assert rows["softmax_rows"]["head_fraction"] < rows["softmax_rows"]["base_fraction"] * 0.85
    assert to_json(*from_json(document)[:1], stored.base, stored.head, stored.notes) == document

    served = hooked.client.get(f"/api/v1/compare?base={base_sha}&head={head_sha}&sort=change").json
    assert served is not None
    assert served["benchmarks"][0]["name"] == "softmax_rows"
    assert served["benchmarks"][0]["base_fraction"] == rows["softmax_rows"]["base_fraction"]
    assert served["page"]["total"] == 2

    # The CLI's text and markdown forms: a column of their own on the wall-time table, no signals section.
    text = format_text(stored.report, stored.base, stored.head)
    markdown = format_markdown(stored.report, stored.base, stored.head)
    for form in (text, markdown):
        assert "of roofline" in form and "17% → 14%" in form and "9% → 9%" in form
        assert "roofline_fraction" not in form and "signals" not in form

    for url in (f"/compare?base={base_sha}&head={head_sha}", f"/commits/{head_sha}"):
        response = hooked.client.get(url)
        assert response.status_code == 200, url
        page = response.get_data(as_text=True)
        assert ">of roofline</th>" in page and '<td class="num roofline-fraction">17% → 14%</td>' in page, url
        assert "roofline_fraction" not in page, url

    hooks = hooked.ctx.pull_requests
    assert hooks is not None
    pr_id = track_pull_request(hooked, base_sha, head_sha)
    assert hooks.report(pr_id) == "failure"
    [comment] = fake.comments.values()
    body = comment["body"]
    changed, _, rest = body.partition("<details>")
    assert "| benchmark | metric | base | head | delta | verdict | of roofline |" in changed
    [line] = [line for line in changed.splitlines() if "softmax/softmax_rows" in line]
    assert line.startswith("| [softmax/softmax_rows") and line.endswith("| 🔴 regression | 17% → 14% |")
    assert "layernorm" in rest and "of roofline" not in rest  # the unchanged rows keep their table
    assert "roofline_fraction" not in body


def test_a_calibrated_host_has_fractions_without_an_efficiency_series(sessions: sessionmaker[Session]) -> None:
    env = builders.environment(calibration=builders.calibration())
    docs = [builders.manifest(p, [builders.result(samples=[1e-3 * (1 + 0.1 * p), 1.01e-3, 0.99e-3])],
                              environment=env) for p in (0, 1)]
    with sessions.begin() as session:
        for doc in docs:
            ingest_manifest(session, Manifest.model_validate(doc))
    with sessions() as session:
        assert set(session.scalars(select(Series.metric))) == {"wall_time"}
        base = resolve(session, docs[0]["commit"]["sha"])
        head = resolve(session, docs[1]["commit"]["sha"])
        [row] = compare_resolved(session, base, head, CompareParams(), stored=False).report.rows
    roof_s = BYTES / builders.calibration()["bytes_per_s"]  # 0.84 ms at the host's 10 GB/s
    assert row.base_fraction == pytest.approx(fraction(docs[0], "softmax_rows", roof_s))
    assert row.head_fraction == pytest.approx(fraction(docs[1], "softmax_rows", roof_s))


def test_a_fraction_series_the_runner_reported_without_time_figures_stays_a_row(
        sessions: sessionmaker[Session]) -> None:
    """Only the series that repeat a time row's fractions are folded: a runner's own efficiency metric on a host
    with no roof (so no figures on its time) is a signal like any other."""
    def doc(position: int) -> dict[str, Any]:
        own = builders.result(metric="roofline_fraction", unit="1", direction="higher_is_better",
                              samples=[0.5, 0.51, 0.49], flops=None, bytes_accessed=None)
        return builders.manifest(position, [builders.result(), own])

    docs = [doc(0), doc(1)]
    with sessions.begin() as session:
        for d in docs:
            ingest_manifest(session, Manifest.model_validate(d))
    with sessions() as session:
        base = resolve(session, docs[0]["commit"]["sha"])
        head = resolve(session, docs[1]["commit"]["sha"])
        report = compare_resolved(session, base, head, CompareParams(), stored=False).report
    assert sorted(row.key.metric for row in report.rows) == ["roofline_fraction", "wall_time"]
    assert all(row.base_fraction is None and row.head_fraction is None for row in report.rows)
