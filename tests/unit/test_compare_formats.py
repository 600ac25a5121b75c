"""The comparison as markdown and CSV against golden files, the numerics section, what --filter, --only-changed,
--sort, --threshold and --fail-on do to a report, and the JSON form against its JSON Schema
(KERNELWATCH_UPDATE_GOLDEN=1 rewrites the golden files)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from service.detect.compare import CompareParams, Pair, Side, compare
from service.report.compare_formats import CSV_COLUMNS, format_csv, format_markdown
from service.report.compare_table import SIGNALS_HEADING, format_text, from_json, labels_from_json, to_json
from service.report.compare_view import fail_reason, listing, parse_threshold, restrict, should_fail
from tests.builders import runs_of
from tests.golden import assert_golden
from tests.unit.test_compare_table import BASE, HEAD, basic_pairs, edge_pairs, key, spread

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "service" / "contract" / "compare.schema.json"


def signal_pairs() -> list[Pair]:
    """Times plus two numerical signals: a relative error that doubled, a recall that held."""
    return [
        *basic_pairs()[:2],
        Pair(key("quantized", "int8_matmul", "rel_error", "1", m=512), runs_of(spread(2e-3, n=8)),
             runs_of(spread(4e-3, n=8, phase=2))),
        Pair(key("sampling", "top_k", "recall", "1", "higher_is_better", k=64), runs_of(spread(0.97, n=8)),
             runs_of(spread(0.97, n=8, phase=1))),
    ]


def test_markdown_of_the_basic_comparison() -> None:
    report = compare(basic_pairs())
    text = format_markdown(report, BASE, HEAD)
    assert_golden("compare_basic.md", text)
    assert "| benchmark | base | head | delta | verdict |" in text
    assert text.count("| **geomean** |") == 2  # one per metric table
    assert SIGNALS_HEADING not in text.lower()  # algbw is a speed


def test_markdown_of_the_edge_cases_escapes_and_lists_failures() -> None:
    pairs = edge_pairs()
    pairs.append(Pair(key("norms", "pipe|name"), runs_of(spread(1e-4)), Side((), "failed", "bad | input\nmore")))
    notes = ("base also ran on tpu 8x TPU v5 lite [5e5e5e5e5e], which the other side did not",)
    text = format_markdown(compare(pairs), BASE, HEAD, notes)
    assert_golden("compare_edge.md", text)
    assert "`norms/pipe\\|name`" in text and "bad \\| input" in text  # a pipe would end the cell
    assert "<details><summary>Failures</summary>" in text and "> note: base also ran" in text
    assert "on `gpu 1x NVIDIA H200 [77aa00bb11]`" in text  # two environments: each table names its own


def test_numerics_and_static_signals_have_their_own_section() -> None:
    report = compare(signal_pairs())
    text = format_text(report, BASE, HEAD)
    assert_golden("compare_signals.txt", text)
    markdown = format_markdown(report, BASE, HEAD)
    assert_golden("compare_signals.md", markdown)
    before, _, after = text.partition(f"== {SIGNALS_HEADING} ==")
    assert "wall_time (s)" in before and "rel_error" not in before
    assert "rel_error (1)" in after and "recall (1)" in after and "wall_time" not in after
    assert markdown.index("#### Numerics and static signals") > markdown.index("**wall_time**")


def test_csv_has_one_row_per_benchmark_under_stable_columns() -> None:
    report = compare(edge_pairs())
    text = format_csv(report)
    assert_golden("compare_edge.csv", text)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == len(report.rows)
    by_name = {(r["name"], r["params"]): r for r in rows}
    new = by_name[("flash", "seq=2048")]
    assert new["verdict"] == "new" and new["base_status"] == "absent" and new["base_median"] == ""
    failed = by_name[("layernorm", "fused=True")]
    assert failed["head_status"] == "failed" and failed["head_n"] == "0" and failed["ratio"] == ""
    once = by_name[("once", "")]
    assert once["verdict"] == "inconclusive" and once["base_runs"] == "1" and once["base_ci_low"] == ""
    assert once["reason"].startswith("one run a side") and once["p_value"] == "" and once["method"] == ""


def test_csv_of_the_basic_comparison() -> None:
    text = format_csv(compare(basic_pairs()))
    assert_golden("compare_basic.csv", text)
    regressed = next(r for r in csv.DictReader(io.StringIO(text))
                     if r["metric"] == "wall_time" and r["params"] == "cols=4096 rows=256")
    assert regressed["verdict"] == "regression" and float(regressed["delta_percent"]) == pytest.approx(24.9, abs=0.1)
    assert float(regressed["ratio_ci_low"]) < float(regressed["ratio"]) < float(regressed["ratio_ci_high"])


@pytest.mark.parametrize(("text", "value"), [("5%", 0.05), (" 2.5 % ", 0.025), ("0.05", 0.05), ("0", 0.0),
                                             ("150%", 1.5), ("0%", 0.0)])
def test_threshold_as_a_percentage_or_a_fraction(text: str, value: float) -> None:
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize(("text", "message"), [("5", "ambiguous"), ("1", "ambiguous"), ("-1%", "non-negative"),
                                               ("five", "percentage"), ("nan", "non-negative"), ("%", "percentage")])
def test_bad_thresholds_say_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_threshold(text)


def test_only_changed_keeps_changes_and_what_cannot_be_compared() -> None:
    report = compare(edge_pairs())
    listed = [report.rows[i] for i in listing(report, only_changed=True)]
    verdicts = {r.verdict for r in listed}
    assert "unchanged" not in verdicts and {"new", "missing", "failed"} <= verdicts
    text = format_text(report, BASE, HEAD, rows=listing(report, only_changed=True))
    assert f"showing {len(listed)} of {len(report.rows)} benchmark results" in text
    assert "norms/tiny_shift" not in text.split("\n\n", 1)[1].split("showing")[0]  # the unchanged row is hidden
    # Footnotes only for the marks of listed rows: the hidden small effect's and the inconclusive row's are not.
    every = format_text(report, BASE, HEAD)
    assert "significant, but smaller than the minimum effect" in every
    assert "significant, but smaller than the minimum effect" not in text
    inconclusive = next(r for r in report.rows if r.verdict == "inconclusive")
    assert (inconclusive.reason or "") in every and ((inconclusive.reason or "") in text) == (inconclusive in listed)


def test_sort_by_delta_puts_the_largest_change_first_either_way() -> None:
    report = compare(basic_pairs())
    order = [report.rows[i] for i in listing(report, sort="delta")]
    sizes = [abs(math.log(r.ratio)) for r in order if r.ratio is not None]
    assert sizes == sorted(sizes, reverse=True)  # a 20 % drop of a bandwidth is as large as a 25 % rise of a time
    assert {order[0].key.metric, order[1].key.metric} == {"wall_time", "algbw"}
    assert order[-1].key.params == (("cols", "4096"), ("rows", "1024"))  # the smallest change (+0.2 %) last
    with_failures = compare(edge_pairs())
    last = [with_failures.rows[i].verdict for i in listing(with_failures, sort="delta")][-3:]
    assert sorted(last) == ["failed", "missing", "new"]  # no ratio: after every change
    by_name = [report.rows[i].key.label for i in listing(report, sort="name")]
    assert by_name == sorted(by_name)


def test_filter_narrows_the_summary_and_recomputes_the_geomean() -> None:
    report = compare(basic_pairs())
    narrowed = restrict(report, re.compile(r"^matmul/"))
    assert {r.key.suite for r in narrowed.rows} == {"matmul"}
    assert [g.metric for g in narrowed.geomeans] == ["wall_time"]
    geomean = narrowed.geomeans[0]
    assert geomean.count == 2 and geomean.low is None  # bounds need the whole comparison's replicates
    expected = ((2.2e-4 / 2.5e-4) * (0.0311 / 0.0312)) ** 0.5
    assert geomean.ratio == pytest.approx(expected, rel=0.01)
    assert should_fail(report, "regression") and not should_fail(narrowed, "regression")
    assert should_fail(narrowed, "any")  # the matmul improvement
    # What fails it, in words a CI log can carry; nothing where it passes.
    assert fail_reason(report, "regression") is not None and "regressed (--fail-on regression)" in str(
        fail_reason(report, "regression"))
    assert fail_reason(narrowed, "regression") is None and fail_reason(report, "none") is None
    assert "1 improvement (--fail-on any)" == fail_reason(narrowed, "any")
    assert restrict(report, None) is report
    algbw = restrict(report, re.compile("rows=256"))
    kept = next(g for g in algbw.geomeans if g.metric == "algbw")
    assert kept == next(g for g in report.geomeans if g.metric == "algbw")  # every member kept: its bounds too
    # The key as run and ci print it, copied from their output, finds the same rows as the label does.
    bracketed = restrict(report, re.compile(re.escape("softmax/softmax_rows[cols=4096,rows=256]")))
    labelled = restrict(report, re.compile(re.escape("softmax/softmax_rows cols=4096 rows=256")))
    assert bracketed.rows and [r.key for r in bracketed.rows] == [r.key for r in labelled.rows]


def test_fail_on_rules() -> None:
    edge = compare(edge_pairs())
    assert should_fail(edge, "regression")  # rmsnorm... and layernorm broke in head
    broke_only = compare([edge_pairs()[2]])
    assert broke_only.rows[0].verdict == "failed"
    assert should_fail(broke_only, "regression") and should_fail(broke_only, "any")
    new_only = compare([edge_pairs()[0]])
    assert not should_fail(new_only, "regression") and should_fail(new_only, "any")
    assert not should_fail(edge, "none")
    quiet = compare([Pair(key("a", "b"), runs_of(spread(1e-3)), runs_of(spread(1e-3, phase=1)))])
    assert not should_fail(quiet, "any")


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def documents() -> list[dict[str, Any]]:
    basic, edge = compare(basic_pairs()), compare(edge_pairs(), CompareParams(alpha=0.1, min_effect=0.05))
    narrowed = restrict(basic, re.compile("softmax"))
    paged = to_json(edge, BASE, HEAD, ("a note",), rows=[2, 0])
    paged["page"] = {"offset": 0, "limit": 2, "total": 6, "next_offset": 2}  # as GET /api/v1/compare adds
    return [to_json(basic, BASE, HEAD), to_json(edge, BASE, HEAD), paged,
            to_json(narrowed, BASE, HEAD, rows=listing(narrowed, only_changed=True, sort="delta")),
            to_json(compare(signal_pairs()), BASE, HEAD)]


@pytest.mark.parametrize("index", range(5))
def test_json_documents_validate_against_the_schema(validator: jsonschema.Draft202012Validator, index: int) -> None:
    document = json.loads(json.dumps(documents()[index]))  # as a reader gets it: through JSON text
    validator.validate(document)


def test_the_schema_refuses_what_is_not_a_comparison(validator: jsonschema.Draft202012Validator) -> None:
    document = to_json(compare(basic_pairs()), BASE, HEAD)
    for broken in ({**document, "version": 1}, {**document, "extra": 1},
                   {**document, "benchmarks": [{**document["benchmarks"][0], "verdict": "worse"}]}):
        assert not validator.is_valid(json.loads(json.dumps(broken)))


def test_labels_survive_the_json_round_trip() -> None:
    original = compare(edge_pairs())
    document = to_json(original, BASE, HEAD)
    assert labels_from_json(document) == (BASE, HEAD)
    report, _ = from_json(document)  # what `compare --url` rebuilds: every format prints the same from it
    assert format_markdown(report, BASE, HEAD) == format_markdown(original, BASE, HEAD)
    assert format_csv(report) == format_csv(original) and format_text(report, BASE, HEAD) == format_text(
        original, BASE, HEAD)
    del document["base"]["subject"]  # a document stored before labels carried the subject
    assert labels_from_json(document)[0].subject == ""


def test_stored_text_cannot_drive_a_terminal_nor_open_html() -> None:
    """A commit subject is anyone's text (issue 18): its escape sequences (retitle the window, clear the screen)
    are shown, not sent, by the text and CSV forms, and its HTML is escaped in the markdown `ci` writes to the
    step summary."""
    from dataclasses import replace

    hostile = "fix\x1b]0;TITLE\x07\x1b[2J <img src=x onerror=alert(1)>"
    report = compare(basic_pairs())
    text = format_text(report, replace(BASE, subject=hostile), HEAD)
    assert "\x1b" not in text and "\x07" not in text and "\\x1b]0;TITLE\\x07\\x1b[2J" in text
    markdown = format_markdown(report, replace(BASE, subject=hostile), HEAD)
    assert "<img" not in markdown and "&lt;img src=x onerror=alert(1)&gt;" in markdown
    pairs = basic_pairs()
    pairs[0] = replace(pairs[0], key=replace(pairs[0].key, unit="s\x1b[2J"))
    assert "\x1b" not in format_csv(compare(pairs))


def test_notes_made_over_every_result_say_so_when_a_filter_lists_fewer() -> None:
    """A note counting benchmarks ("for 3 of 4 benchmarks ...") was printed under --filter as if of the rows shown."""
    import re

    from service.cli.report_options import Comparison, render

    found = Comparison(compare(basic_pairs()), BASE, HEAD, ("for 3 of 5 benchmarks some runs were made apart",))
    everything = render(found, "text", False, "name", None, "none").text
    assert "note: for 3 of 5 benchmarks" in everything
    narrowed = render(found, "text", False, "name", re.compile("^matmul/"), "none").text
    assert "note: (of all 5 results compared, before --filter) for 3 of 5 benchmarks" in narrowed
