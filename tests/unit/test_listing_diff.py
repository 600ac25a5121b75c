"""The side-by-side listing diff: alignment on normalised keys, real text shown, changed tokens marked."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.report.listing_diff import (
    Fold,
    ListingDiff,
    align_key,
    count_deltas,
    diff_listings,
    fold,
    format_count_deltas,
    hlo_align_key,
    hlo_coarse_key,
    mnemonic,
    mnemonic_counts,
    op_mnemonic,
)
from service.report.myers_diff import myers_opcodes


def x86(lines: list[str], start: int = 0) -> list[str]:
    """Capstone-style lines with addresses, 4 bytes apart: an insertion shifts every later address."""
    return [f"{start + 4 * i:#06x}  {line}" for i, line in enumerate(lines)]


def kinds(diff: ListingDiff) -> str:
    return "".join({"same": "=", "insert": "+", "delete": "-", "replace": "~"}[r.kind] for r in diff.rows)


def assert_covers(diff: ListingDiff, base: list[str], head: list[str]) -> None:
    """Every line of each side appears once, in order, with its own number and its real text."""
    assert [r.base for r in diff.rows if r.base is not None] == base
    assert [r.head for r in diff.rows if r.head is not None] == head
    assert [r.base_number for r in diff.rows if r.base_number is not None] == list(range(1, len(base) + 1))
    assert [r.head_number for r in diff.rows if r.head_number is not None] == list(range(1, len(head) + 1))
    for r in diff.rows:
        if r.base is not None:
            assert "".join(s.text for s in r.base_segments) == r.base
        if r.head is not None:
            assert "".join(s.text for s in r.head_segments) == r.head


BODY = ["vmovups ymm0, ymmword ptr [rdi]", "vmulps ymm1, ymm0, ymm2", "vaddps ymm1, ymm1, ymm3",
        "vmovups ymmword ptr [rsi], ymm1", "add rdi, 0x20", "cmp rdi, rdx", "jne 0x0", "ret"]


def test_identical_listings_are_all_same() -> None:
    diff = diff_listings(x86(BODY), x86(BODY))
    assert kinds(diff) == "=" * len(BODY) and not diff.changed and diff.inexact == 0
    assert_covers(diff, x86(BODY), x86(BODY))


def test_empty_sides() -> None:
    assert diff_listings([], []).rows == ()
    added = diff_listings([], x86(BODY))
    assert kinds(added) == "+" * len(BODY) and added.counts == {"insert": len(BODY)}
    removed = diff_listings(x86(BODY), [])
    assert kinds(removed) == "-" * len(BODY)
    assert_covers(added, [], x86(BODY))
    assert_covers(removed, x86(BODY), [])


def test_an_insertion_shifting_every_address_is_only_an_insertion() -> None:
    base = x86(BODY)
    head_body = BODY[:2] + ["vmulps ymm1, ymm1, ymm4", "vmulps ymm1, ymm1, ymm5"] + BODY[2:]
    head_body[head_body.index("jne 0x0")] = "jne 0x8"  # the loop's branch target moved too
    head = x86(head_body)
    diff = diff_listings(base, head)
    assert kinds(diff) == "==++======"
    assert_covers(diff, base, head)
    inserted = [r for r in diff.rows if r.kind == "insert"]
    assert [r.head_number for r in inserted] == [3, 4] and all(r.head_segments[0].changed for r in inserted)
    # The branch aligned with its old self; what differs is marked, the address never is.
    jne = next(r for r in diff.rows if r.base is not None and "jne" in r.base)
    assert jne.kind == "same" and not jne.exact
    assert [s.text for s in jne.head_segments if s.changed] == ["0x8"]
    assert not any(s.changed for r in diff.rows if r.kind == "same" for s in r.base_segments if "0x0" in s.text
                   and s.text.strip().startswith("0x00"))


def test_renamed_registers_align_and_are_marked() -> None:
    base = ["vmulps ymm1, ymm0, ymm2", "vaddps ymm1, ymm1, ymm3"]
    head = ["vmulps ymm4, ymm0, ymm2", "vaddps ymm4, ymm4, ymm3"]
    diff = diff_listings(base, head)
    assert kinds(diff) == "==" and diff.inexact == 2
    assert [s.text for s in diff.rows[0].head_segments if s.changed] == ["ymm4"]
    assert [s.text for s in diff.rows[0].base_segments if s.changed] == ["ymm1"]


def test_dtype_suffix_and_mnemonic_are_never_masked() -> None:
    assert align_key("v3 = vadd.8x128.f32 v1, v2") != align_key("v3 = vadd.8x128.bf16 v1, v2")
    assert align_key("0x0010  vfmadd231ps ymm0, ymm1, ymm2") == "vfmadd231ps ymm#, ymm#, ymm#"
    assert mnemonic("0x0010  vfmadd231ps ymm0, ymm1, ymm2") == "vfmadd231ps"


def test_sass_location_encoding_and_predicates() -> None:
    a = "        /*0040*/               @P0 EXIT ;                   /* 0x000000000000094d */"
    b = "        /*0090*/               @P1 EXIT ;                   /* 0x000fea0003800000 */"
    assert align_key(a) == align_key(b) == "@P# EXIT"
    assert mnemonic(a) == "EXIT"
    diff = diff_listings([a], [b])
    assert kinds(diff) == "=" and not diff.rows[0].exact  # P0 → P1 is shown, the encodings are not compared
    assert [s.text for s in diff.rows[0].head_segments if s.changed] == ["P1"]


def test_labels_and_bundle_indices_are_masked() -> None:
    assert align_key(".L_x_3:") == align_key(".L_x_12:")
    assert align_key("17 : {s4 = sadd.s32 s4, 1}") == align_key("21 : {s9 = sadd.s32 s9, 1}")
    assert align_key("deadbeef: nop") == "deadbeef: nop"  # a name made of hex letters is not an address


def test_all_different_pairs_lines_in_order() -> None:
    base = ["xor eax, eax", "ret"]
    head = ["vzeroupper", "vmovaps xmm0, xmm1", "call 0x0"]
    diff = diff_listings(base, head)
    assert kinds(diff) == "~~+"
    assert_covers(diff, base, head)


def test_a_replaced_block_pairs_on_the_mnemonic() -> None:
    base = ["mov rax, rdi", "vmulps ymm1, ymm0, [rdi]", "vaddps ymm1, ymm1, ymm2", "ret"]
    head = ["mov rax, rdi", "vbroadcastss ymm3, [rsi]", "vmulps ymm1, ymm0, [rdx]", "vsubps ymm1, ymm1, ymm2",
            "ret"]
    diff = diff_listings(base, head)
    assert_covers(diff, base, head)
    vmul = next(r for r in diff.rows if r.head is not None and "vmulps" in r.head)
    assert vmul.kind == "replace" and vmul.base is not None and "vmulps" in vmul.base
    assert [s.text for s in vmul.head_segments if s.changed] == ["rdx"]
    assert kinds(diff).count("+") == 1


def test_a_moved_block_is_one_deletion_and_one_insertion() -> None:
    block = ["vmovups ymm5, [r8]", "vfmadd231ps ymm5, ymm6, ymm7", "vmovups [r9], ymm5"]
    rest = ["mov rax, rdi", "shl rax, 2", "add rax, rsi", "lea rcx, [rax + rdx]", "test rcx, rcx", "sete al",
            "movzx eax, al", "ret"]
    base, head = block + rest, rest + block
    diff = diff_listings(base, head)
    assert_covers(diff, base, head)
    assert kinds(diff) == "---" + "=" * len(rest) + "+++"


def test_an_unrolled_loop_of_few_distinct_lines_still_aligns_exactly() -> None:
    # Four keys repeated: difflib's autojunk would drop every one of them as an anchor.
    pattern = ["vmovups ymm0, [rdi + 0x{:x}]", "vmulps ymm0, ymm0, ymm1", "vaddps ymm2, ymm2, ymm0", "add rdi, 0x20"]
    lines = [pattern[i % 4].format(i * 8) for i in range(4000)]
    lines.insert(3000, "vzeroupper")
    head = lines[:2001] + ["vmaxps ymm2, ymm2, ymm3"] * 3 + lines[2001:3000] + lines[3001:]
    diff = diff_listings(x86(lines), x86(head))
    assert diff.counts == {"same": 4000, "insert": 3, "delete": 1}
    assert [r.head_number for r in diff.rows if r.kind == "insert"] == [2002, 2003, 2004]
    assert [r.base for r in diff.rows if r.kind == "delete"] == [x86(lines)[3000]]
    assert_covers(diff, x86(lines), x86(head))


def test_past_the_edit_budget_the_fallback_still_covers_both_sides() -> None:
    base = [f"op{i % 7} r{i % 5}" for i in range(300)]
    head = [f"op{(i * 3) % 7} r{i % 3}" for i in range(280)]
    diff = diff_listings(base, head, max_edits=5, max_marked=10)
    assert_covers(diff, base, head)
    marked = [r for r in diff.rows if r.kind == "replace"]
    assert marked and all(any(s.changed for s in r.head_segments) for r in marked)


def test_sides_longer_than_the_cap_are_cut_and_say_so() -> None:
    diff = diff_listings(["nop"] * 30, ["nop"] * 25, max_lines=20)
    assert diff.truncated and diff.base_lines == diff.head_lines == 20 and not diff.changed


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["mov r1, r2", "add r1, 0x4", "mul r3, r1", "jmp 0x10", "nop"]), max_size=40),
       st.lists(st.sampled_from(["mov r1, r2", "add r9, 0x8", "mul r3, r1", "jmp 0x20", "ret"]), max_size=40),
       st.integers(min_value=0, max_value=30))
def test_any_two_listings_are_covered_in_order(base: list[str], head: list[str], budget: int) -> None:
    diff = diff_listings(x86(base), x86(head, start=0x40), max_edits=budget)
    assert_covers(diff, x86(base), x86(head, start=0x40))
    for r in diff.rows:
        if r.kind == "same":
            assert align_key(r.base or "") == align_key(r.head or "")


def test_hlo_keys_ignore_renumbering_and_metadata() -> None:
    a = '  %add.12 = f32[8]{0} add(f32[8]{0} %p0.1, f32[8]{0} %c.3), metadata={op_name="jit(f)/add" source_line=3}'
    b = '  %add.14 = f32[8]{0} add(f32[8]{0} %p0.2, f32[8]{0} %c.5), metadata={op_name="jit(f)/add" source_line=9}'
    assert hlo_align_key(a) == hlo_align_key(b)
    assert hlo_coarse_key(a) == "add"
    assert hlo_coarse_key("  ROOT %t = (f32[8]{0}, f32[]) tuple(%a, %b)") == "tuple"
    tanh = "  %tanh.1 = f32[8]{0} tanh(f32[8]{0} %add.14)"
    diff = diff_listings([a], [b, tanh], key=hlo_align_key, coarse=hlo_coarse_key)
    assert kinds(diff) == "=+"


def test_fold_keeps_context_around_changes() -> None:
    base = [f"op{i} r1, r2" for i in range(40)]
    head = base[:20] + ["vmulps ymm0, ymm1, ymm2"] + base[20:]
    rows = fold(diff_listings(base, head).rows, context=3)
    folds = [r for r in rows if isinstance(r, Fold)]
    assert [f.count for f in folds] == [17, 17]
    assert folds[0].base_number == 1 and folds[1].base_number == 24
    assert len(rows) == 3 + 1 + 3 + 2  # 3 before and after the insertion, the insertion, the two folds
    assert fold(diff_listings(base[:5], base[:5]).rows, context=3) == [Fold(5, 1, 1)]


def test_count_deltas_and_their_text() -> None:
    base = mnemonic_counts(x86(["vmovups ymm0, [rdi]"] * 5 + ["vaddps ymm0, ymm0, ymm1"] * 2))
    head = mnemonic_counts(x86(["vmovups ymm0, [rdi]"] * 2 + ["vmulps ymm0, ymm0, ymm1"] * 12
                               + ["vaddps ymm0, ymm0, ymm1"] * 2))
    deltas = count_deltas(base, head)
    assert [(d.name, d.delta) for d in deltas] == [("vmulps", 12), ("vmovups", -3)]
    assert format_count_deltas(deltas) == "+12 vmulps, -3 vmovups"
    assert format_count_deltas([]) == "no change"
    many = count_deltas({}, {f"op{i}": i + 1 for i in range(10)})
    assert format_count_deltas(many, limit=2) == "+10 op9, +9 op8, … 8 more"


def test_llo_op_mnemonics() -> None:
    assert op_mnemonic("v12 = vld.8x128 [vmem:$0x1200]") == "vld.8x128"
    assert op_mnemonic("[vmem:$0x1600] = vst.8x128 v14") == "vst.8x128"
    assert op_mnemonic("dma.hbm_to_vmem s5, 128, [vmem:$0x1200]") == "dma.hbm_to_vmem"
    assert op_mnemonic("") is None


def _lcs(a: list[int], b: list[int]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, start=1):
            prev, row[j] = row[j], prev + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=25), st.lists(st.integers(0, 3), max_size=25))
def test_myers_finds_a_shortest_edit_script(a: list[int], b: list[int]) -> None:
    ops = myers_opcodes(a, b, max_d=100)
    assert ops is not None
    rebuilt: list[int] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
        rebuilt.extend(b[j1:j2])
    assert rebuilt == b and [x for _, i1, i2, _, _ in ops for x in a[i1:i2]] == a
    edits = sum(i2 - i1 + j2 - j1 for tag, i1, i2, j1, j2 in ops if tag != "equal")
    assert edits == len(a) + len(b) - 2 * _lcs(a, b)
    if edits:
        assert myers_opcodes(a, b, max_d=edits - 1) is None
