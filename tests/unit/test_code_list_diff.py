"""Kernels and fusions of two results joined by name: the picker's order and its instruction deltas."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.report.code_list_diff import diff_fusion_lists, kernel_choices


@dataclass(frozen=True)
class K:
    name: str
    instructions: int | None
    isa: str = "x86-64"
    bundles: int | None = None
    mix: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class F:
    name: str
    instructions: int
    kind: str | None = "kLoop"


def test_kernel_choices_put_changes_first_largest_first() -> None:
    base = [K("a", 10), K("b", 20), K("c", 30, details={"code_sha256": "1"}), K("gone", 5)]
    head = [K("a", 10), K("b", 50), K("c", 30, details={"code_sha256": "2"}), K("new", 3),
            K("a", 7, isa="sass")]
    choices = kernel_choices(base, head)
    assert [(c.name, c.isa, c.status) for c in choices] == [
        ("b", "x86-64", "changed"), ("a", "sass", "added"), ("gone", "x86-64", "removed"),
        ("new", "x86-64", "added"), ("c", "x86-64", "changed"), ("a", "x86-64", "same")]
    assert [c.instructions_delta for c in choices] == [30, 7, -5, 3, 0, 0]


def test_a_changed_mix_with_the_same_count_is_a_change() -> None:
    [choice] = kernel_choices([K("k", 4, mix={"load": 4})], [K("k", 4, mix={"load": 3, "store": 1})])
    assert choice.status == "changed" and choice.instructions_delta == 0


def test_unknown_counts_have_no_delta() -> None:
    [choice] = kernel_choices([K("k", None, isa="tpu-llo", bundles=10)], [K("k", None, isa="tpu-llo", bundles=12)])
    assert choice.instructions_delta is None and choice.bundles_delta == 2 and choice.status == "changed"


def test_fusion_lists_join_per_module() -> None:
    rows = diff_fusion_lists({"jit_f": [F("add_fusion", 3), F("mul_fusion", 2)], "jit_g": [F("add_fusion", 1)]},
                             {"jit_f": [F("add_fusion", 19), F("mul_fusion", 2, "kOutput")]})
    assert [(r.module, r.name, r.status, r.instructions_delta) for r in rows] == [
        ("jit_f", "add_fusion", "changed", 16), ("jit_g", "add_fusion", "removed", -1),
        ("jit_f", "mul_fusion", "changed", 0)]
    assert diff_fusion_lists({}, {}) == []
