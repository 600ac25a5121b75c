"""Op tables joined by (module, op): per-call times where both sides know their calls, own shares, added/removed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from service.report.op_table_diff import diff_op_tables


@dataclass(frozen=True)
class Op:
    module: str
    op: str
    self_ns: float
    occurrences: int = 10
    category: str = "fusion"


def test_common_added_and_removed_ops_with_per_call_deltas() -> None:
    base = [Op("jit_f", "add_fusion", 1000.0), Op("jit_f", "reduce", 3000.0), Op("jit_f", "copy", 500.0, 5)]
    # Twice the calls on the head side: add_fusion's time per call is unchanged.
    head = [Op("jit_f", "add_fusion", 2000.0, 20), Op("jit_f", "reduce", 12000.0, 20),
            Op("jit_f", "tanh_fusion", 4000.0, 20)]
    diff = diff_op_tables(base, head, base_calls=10, head_calls=20)
    assert diff.per_call and diff.base_total_ns == 450.0 and diff.head_total_ns == 900.0
    by_op = {r.op: r for r in diff.rows}
    assert [r.op for r in diff.rows] == ["reduce", "tanh_fusion", "copy", "add_fusion"]  # largest |Δ| first
    reduce = by_op["reduce"]
    assert reduce.status == "common" and reduce.self_ns_delta == 300.0 and reduce.relative == pytest.approx(1.0)
    assert reduce.occurrences_delta == 0.0
    assert reduce.share_delta == pytest.approx(600 / 900 - 300 / 450)
    assert by_op["tanh_fusion"].status == "added" and by_op["tanh_fusion"].base is None
    assert by_op["tanh_fusion"].self_ns_delta == 200.0 and by_op["tanh_fusion"].relative is None
    assert by_op["copy"].status == "removed" and by_op["copy"].occurrences_delta == -0.5
    assert by_op["add_fusion"].self_ns_delta == 0.0
    assert (diff.added, diff.removed) == (1, 1)
    assert sum(r.head.share for r in diff.rows if r.head) == pytest.approx(1.0)


def test_unknown_calls_compare_raw_totals() -> None:
    diff = diff_op_tables([Op("m", "a", 100.0)], [Op("m", "a", 300.0)], base_calls=None, head_calls=7)
    assert not diff.per_call and diff.rows[0].self_ns_delta == 200.0


def test_same_op_name_in_two_modules_is_two_rows() -> None:
    diff = diff_op_tables([Op("m1", "fusion", 1.0), Op("m2", "fusion", 2.0)], [Op("m1", "fusion", 1.0)])
    assert [(r.module, r.status) for r in diff.rows] == [("m2", "removed"), ("m1", "common")]


def test_empty_sides() -> None:
    assert diff_op_tables([], []).rows == ()
    only_head = diff_op_tables([], [Op("m", "a", 0.0)])
    assert only_head.rows[0].status == "added" and only_head.rows[0].head is not None
    assert only_head.rows[0].head.share == 0.0  # a table whose times are all zero divides by nothing
