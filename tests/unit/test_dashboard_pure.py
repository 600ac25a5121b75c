"""The pure parts of the dashboard pages: which rows a comparison page lists, the ratio chart, the kernel count
diff, the inbox's URL filters, and the per-home session key."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from werkzeug.datastructures import MultiDict

from kernelwatch.errors import InvalidInput
from service.detect.compare import BenchmarkKey, Pair, Side, compare
from service.pipeline.compare import CompareOutcome
from service.pipeline.compare_page import compare_page, order_rows, parse_verdicts
from service.report.compare_table import SideLabel
from service.secret_key import home_secret_key
from service.store.commit_compare import KernelCounts, count_changes
from tests.builders import runs_of
from web.charts.compare import ratio_figure
from web.views import InboxFilters, _kept_filters, inbox_filters


def samples(level: float, n: int = 8) -> tuple[float, ...]:
    return tuple(level * (1 + 0.001 * i) for i in range(n))


def outcome() -> CompareOutcome:
    """a: +50 % (regression), b: -30 % (improvement), c: unchanged, d: +10 % (regression), e: failed in head."""
    levels = {"a": 1.5, "b": 0.7, "c": 1.0, "d": 1.1}
    pairs = [Pair(BenchmarkKey("s", name), runs_of(samples(1.0)), runs_of(samples(level)))
             for name, level in levels.items()]
    pairs.append(Pair(BenchmarkKey("s", "e"), runs_of(samples(1.0)), Side((), "failed", "oom")))
    label = SideLabel(ref="x", repository="r", commit="0" * 40)
    report = compare(pairs)
    return CompareOutcome(label, label, report, (), tuple(pairs))


def names(indices: list[int], out: CompareOutcome) -> list[str]:
    return [out.report.rows[i].key.name for i in indices]


def test_rows_in_each_order() -> None:
    out = outcome()
    assert names(order_rows(out.report, None, "name"), out) == ["a", "b", "c", "d", "e"]
    # The API's "change": regressions largest first, then improvements, then the rest, a row without a ratio (the
    # failed one) counting as the largest change.
    assert names(order_rows(out.report, None, "change"), out) == ["a", "d", "b", "e", "c"]
    assert names(order_rows(out.report, None, "ratio"), out) == ["b", "c", "d", "a", "e"]
    assert names(order_rows(out.report, None, "-ratio"), out) == ["a", "d", "c", "b", "e"]
    assert names(order_rows(out.report, None, "verdict"), out) == ["a", "d", "b", "e", "c"]
    assert names(order_rows(out.report, {"regression"}, "name"), out) == ["a", "d"]
    with pytest.raises(InvalidInput):
        order_rows(out.report, None, "size")


def test_verdict_filter_parsing() -> None:
    assert parse_verdicts("") is None and parse_verdicts(None) is None
    assert parse_verdicts("regression, improvement") == {"regression", "improvement"}
    with pytest.raises(InvalidInput, match="unknown: awful"):
        parse_verdicts("regression,awful")


def test_a_page_lists_its_rows() -> None:
    out = outcome()
    page = compare_page(out, None, "name", offset=1, limit=2)
    assert names(page.rows, out) == ["b", "c"] and page.total == 5 and page.next_offset == 3
    assert all(row.ratio_low is not None for row in page.listed)
    last = compare_page(out, None, "name", offset=4, limit=2)
    assert last.next_offset is None and [r.key.name for r in last.listed] == ["e"]


def test_ratio_figure_draws_geomeans_first_and_skips_rows_without_a_ratio() -> None:
    out = outcome()
    page = compare_page(out, None, "name", 0, 10)
    figure = ratio_figure(page.listed, page.report.geomeans)
    trace = figure["data"][0]
    assert trace["y"][0].startswith("geomean wall_time") and trace["marker"]["symbol"][0] == "diamond"
    assert trace["y"][1:] == ["s/a", "s/b", "s/c", "s/d"]  # e failed: no ratio to draw
    assert trace["x"][1] == pytest.approx(50, abs=0.5)
    assert all(v >= 0 for v in trace["error_x"]["array"] + trace["error_x"]["arrayminus"])
    low, high = figure["layout"]["xaxis"]["range"]
    assert low == -high and high > 50  # symmetric: a regression and an improvement of one size lie as far out
    assert trace["marker"]["color"][1] != trace["marker"]["color"][2]  # regression and improvement differ


def test_ratio_figure_stops_its_axis_past_minus_100_percent() -> None:
    """A 5x regression makes the axis reach +400 % and more; its mirror, -400 %, is where no time can fall."""
    pairs = [Pair(BenchmarkKey("s", "slow"), runs_of(samples(1.0)), runs_of(samples(5.0))),
             Pair(BenchmarkKey("s", "fast"), runs_of(samples(1.0)), runs_of(samples(0.8)))]
    low, high = ratio_figure(compare(pairs).rows)["layout"]["xaxis"]["range"]
    assert high > 400 and low == -105


def test_ratio_figure_numbers_duplicate_labels() -> None:
    pairs = [Pair(BenchmarkKey("s", "a", environment=env), runs_of(samples(1.0)), runs_of(samples(1.2)))
             for env in ("cpu", "gpu")]
    figure = ratio_figure(compare(pairs).rows)
    assert figure["data"][0]["y"] == ["s/a", "s/a (2)"]


def k(kernel: str, instructions: int | None, bundles: int | None = None, benchmark: str = "s/a") -> KernelCounts:
    return KernelCounts(benchmark=benchmark, kernel=kernel, isa="x86-64", instructions=instructions, bundles=bundles,
                        result_id=1)


def test_kernel_count_changes() -> None:
    base = [k("same", 10), k("small", 100), k("big", 100), k("gone", 5)]
    head = [k("same", 10), k("small", 101), k("big", 60), k("new", 7)]
    changes = count_changes(base, head)
    assert [c.kernel for c in changes] == ["big", "small", "gone", "new"]
    assert changes[0].instructions_delta == -40 and changes[2].head is None and changes[3].base is None
    assert (changes[2].instructions_delta, changes[3].instructions_delta) == (-5, 7)  # all of a gone or new kernel
    assert count_changes([k("x", None, 4)], [k("x", None, 6)])[0].bundles_delta == 2


def test_inbox_filters_from_the_url() -> None:
    filters = inbox_filters(MultiDict({"repository": "demo", "state": "fixed", "suite": " ", "junk": "1"}))
    assert filters == InboxFilters(repository="demo", state="fixed")
    assert filters.args() == {"repository": "demo", "state": "fixed"} and not filters.scanned
    assert inbox_filters(MultiDict({"branch": "main"})).scanned
    with pytest.raises(InvalidInput, match="unknown alert state"):
        inbox_filters(MultiDict({"state": "burning"}))
    with pytest.raises(InvalidInput):
        inbox_filters(MultiDict({"repository": "x" * 201}))


def test_a_triage_redirect_keeps_known_filters_only() -> None:
    assert _kept_filters("repository=demo&state=untriaged&next=https://evil.example&suite=") == {
        "repository": "demo", "state": "untriaged"}
    assert _kept_filters("") == {}


def test_the_session_key_is_made_once_per_home_and_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    key = home_secret_key(home)
    assert len(key) >= 40 and home_secret_key(home) == key
    assert stat.S_IMODE((home / "secret_key").stat().st_mode) == 0o600
    assert [p.name for p in home.iterdir()] == ["secret_key"]  # the temporary file is gone
    assert home_secret_key(tmp_path / "other") != key


def test_the_app_signs_with_the_configured_key_or_the_homes(tmp_path: Path) -> None:
    from service.app import create_app
    from service.settings import load_settings

    url = f"sqlite:///{tmp_path / 'kw.db'}"
    configured = create_app(load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": url,
                                           "KERNELWATCH_SECRET_KEY": "s3cret-from-env"}))
    assert configured.config["SECRET_KEY"] == "s3cret-from-env"
    generated = create_app(load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": url}))
    again = create_app(load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": url}))
    assert generated.config["SECRET_KEY"] == again.config["SECRET_KEY"] == home_secret_key(tmp_path)
