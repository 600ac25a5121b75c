"""GET /api/v1/compare on both databases: a page of rows with their intervals, the summary and geomeans over all
of them, the verdict filter and the change order, and refusals of bad paging."""

from __future__ import annotations

import numpy as np

from tests import builders
from tests.api_client import Api, error_of

# Benchmark i's head is this much slower; the rest are unchanged.
SLOWER = {3: 1.3, 7: 1.1, 11: 1.5}
IMPROVED = {5: 0.8}
BENCHMARKS = 14


def two_commits(api: Api) -> tuple[str, str]:
    rng = np.random.default_rng(4)
    shas = []
    for position in (0, 1):
        results = []
        for i in range(BENCHMARKS):
            factor = 1.0 if position == 0 else SLOWER.get(i, IMPROVED.get(i, 1.0))
            level = 1e-3 * (1 + i) * factor
            samples = [float(level * (1 + 0.005 * rng.standard_normal())) for _ in range(10)]
            results.append(builders.result(name=f"bench_{i:02d}", samples=samples))
        doc = builders.manifest(position, results)
        for run in builders.replicated(doc):  # three runs a commit: the replicates a verdict counts
            assert api.client.post("/api/v1/runs", json=run, headers=api.auth("submit")).status_code == 201
        shas.append(doc["commit"]["sha"])
    return shas[0], shas[1]


def test_pages_cover_every_row_once_with_intervals_and_whole_summary(api: Api) -> None:
    base, head = two_commits(api)
    url = f"/api/v1/compare?base={base}&head={head}"
    whole = api.client.get(url + f"&limit={BENCHMARKS}").json
    assert whole["summary"]["regression"] == len(SLOWER) and whole["summary"]["improvement"] == len(IMPROVED)
    assert whole["page"] == {"offset": 0, "limit": BENCHMARKS, "total": BENCHMARKS, "next_offset": None}

    listed, offset = [], 0
    while offset is not None:
        body = api.client.get(url + f"&limit=4&offset={offset}").json
        assert body["summary"] == whole["summary"] and body["geomeans"] == whole["geomeans"]
        listed += body["benchmarks"]
        offset = body["page"]["next_offset"]
    # The same rows in the same order, each with the interval it has in the whole comparison.
    assert listed == whole["benchmarks"]
    assert all(row["ratio_ci_low"] <= row["ratio"] <= row["ratio_ci_high"] for row in listed)


def test_verdict_filter_and_change_order(api: Api) -> None:
    base, head = two_commits(api)
    url = f"/api/v1/compare?base={base}&head={head}"
    regressions = api.client.get(url + "&verdict=regression&sort=change").json
    names = [row["name"] for row in regressions["benchmarks"]]
    assert names == ["bench_11", "bench_03", "bench_07"]  # largest slowdown first
    assert regressions["page"]["total"] == len(SLOWER)
    changed = api.client.get(url + "&verdict=regression,improvement&sort=change&limit=2").json
    assert [row["name"] for row in changed["benchmarks"]] == ["bench_11", "bench_03"]
    assert changed["page"]["next_offset"] == 2
    rest = api.client.get(url + "&verdict=regression,improvement&sort=change&limit=2&offset=2").json
    assert [row["verdict"] for row in rest["benchmarks"]] == ["regression", "improvement"]


def test_bad_paging_and_filters_are_refused(api: Api) -> None:
    base, head = two_commits(api)
    url = f"/api/v1/compare?base={base}&head={head}"
    for query in ("&verdict=worse", "&sort=fastest", "&limit=0", "&limit=5001", "&offset=-1", "&limit=ten"):
        assert error_of(api.client.get(url + query))["code"] == "invalid_input", query


def test_sides_that_share_no_environment_are_not_comparable(api: Api) -> None:
    """Its own code, so that `ci --url` can tell "nothing to compare" (another machine) from a wrong request. Another
    JAX on the same machine is compared (tests/integration/test_co_measured_compare.py)."""
    base = builders.manifest(0)
    head = builders.manifest(1, environment=builders.environment(cpu_model="Other CPU"))
    for doc in (base, head):
        assert api.client.post("/api/v1/runs", json=doc, headers=api.auth("submit")).status_code == 201
    answer = api.client.get(f"/api/v1/compare?base={base['commit']['sha']}&head={head['commit']['sha']}")
    assert answer.status_code == 400 and error_of(answer)["code"] == "not_comparable", answer.json
    assert "CPU Test CPU → Other CPU" in error_of(answer)["message"]
