"""Each side's achieved fraction of the roofline through the pure comparison and its cells: carried from the sides
to the rows as given, written ``12% → 9%``, and a column only where a row has one."""

from __future__ import annotations

from dataclasses import replace

from service.detect.compare import BenchmarkKey, CompareParams, Pair, Side, compare
from service.report.compare_table import SideLabel, fraction_cell, fraction_text, from_json, has_fractions, to_json
from service.report.pr_comment import CommentContext, format_comment
from tests.builders import runs_of

LABEL = SideLabel(ref="a", repository="demo", commit="a" * 40)


def side(level: float, fraction: float | None = None) -> Side:
    return replace(runs_of(tuple(level * (1 + 0.001 * i) for i in range(8))), fraction=fraction)


def pairs() -> list[Pair]:
    return [Pair(BenchmarkKey("s", "slow"), side(1.0, 0.12), side(1.3, 0.09)),
            Pair(BenchmarkKey("s", "plain"), side(1.0), side(1.0)),
            Pair(BenchmarkKey("s", "new"), None, side(1.0, 0.5))]


def test_the_fractions_are_carried_to_the_rows() -> None:
    report = compare(pairs(), CompareParams())
    slow, plain, new = report.rows
    assert (slow.base_fraction, slow.head_fraction) == (0.12, 0.09) and slow.verdict == "regression"
    assert (plain.base_fraction, plain.head_fraction) == (None, None)
    assert (new.base_fraction, new.head_fraction, new.verdict) == (None, 0.5, "new")
    document = to_json(report, LABEL, LABEL)
    assert [(r["base_fraction"], r["head_fraction"]) for r in document["benchmarks"]] == [
        (0.12, 0.09), (None, None), (None, 0.5)]
    assert to_json(from_json(document)[0], LABEL, LABEL) == document


def test_a_document_stored_before_the_fractions_reads_as_none() -> None:
    document = to_json(compare(pairs(), CompareParams()), LABEL, LABEL)
    for row in document["benchmarks"]:
        del row["base_fraction"], row["head_fraction"]
    assert not has_fractions(from_json(document)[0].rows)


def test_cells() -> None:
    assert fraction_text(0.12) == "12%" and fraction_text(0.0042) == "0.42%" and fraction_text(0.99996) == "100%"
    assert fraction_text(None) == "–"
    [slow, plain, new] = compare(pairs(), CompareParams()).rows
    assert fraction_cell(slow) == "12% → 9%" and fraction_cell(plain) == "" and fraction_cell(new) == "– → 50%"
    assert has_fractions([plain, new]) and not has_fractions([plain])


def test_the_comment_adds_the_column_only_where_a_changed_row_has_a_fraction() -> None:
    report = compare(pairs(), CompareParams())
    ctx = CommentContext(LABEL, LABEL)
    assert "| 12% → 9% |" in format_comment(report, ctx)
    bare = replace(report, rows=tuple(replace(r, base_fraction=None, head_fraction=None) for r in report.rows))
    assert "of roofline" not in format_comment(bare, ctx)


def test_the_csv_carries_both_fractions_and_leaves_a_missing_one_empty() -> None:
    import csv
    import io

    from service.report.compare_formats import format_csv

    rows = list(csv.DictReader(io.StringIO(format_csv(compare(pairs(), CompareParams())))))
    assert [(r["name"], r["base_roofline_fraction"], r["head_roofline_fraction"]) for r in rows] == [
        ("slow", "0.12", "0.09"), ("plain", "", ""), ("new", "", "0.5")]
