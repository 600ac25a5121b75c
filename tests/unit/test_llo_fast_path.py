"""The LLO reader's fast paths (a piece of plain form A lines read in bulk; a plain line read by one match) give
exactly what the general grammar alone gives: the same records, bundles and errors. The reference is the same
parser with both plain-line patterns replaced by one that never matches."""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import llo_to_bundles
from runners.parsers.llo_to_bundles import LloParseError, parse_llo
from tests.unit.test_llo_to_bundles import FUZZ_ALPHABET, listings

NEVER = re.compile(r"(?!)")


def outcome(text: str) -> Any:
    """Everything a parse says: each program's fields with its bundles built, or the error."""
    try:
        programs = parse_llo(text, "listing-final_bundles.txt")
    except LloParseError as error:
        return ("error", error.line, error.reason)
    results = []
    for program in programs:
        fields = {f.name: getattr(program, f.name) for f in dataclasses.fields(program)}
        fields["bundles"] = [dataclasses.asdict(bundle) for bundle in program.bundles]
        results.append(fields)
    return results


def both_ways(text: str) -> tuple[Any, Any]:
    fast = outcome(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(llo_to_bundles, "_PLAIN_LINE", NEVER)
        patch.setattr(llo_to_bundles, "_PLAIN_ROWS", NEVER)
        general = outcome(text)
    return fast, general


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of a few lines, so that bulk pieces, line-at-a-time pieces and their boundaries all occur."""
    monkeypatch.setattr(llo_to_bundles, "PIECE_CHARS", 400)


OPS = [
    "s{r} = sadd.s32 s{a}, {i}", "p{p} = scmp.lt.s32 s{a}, {i}", "s{r} = sld [smem:$0x{m:x}]",
    "v{r} = vld.8x128 [vmem:s{a}+$0x{m:x}] sm:$0xff", "v{r} = vadd.8x128.f32 v{a}, v{b}",
    "vm{p} = vcmp.gt.f32 v{a}, v{b}", "(mxu{u}) = vmatpush.bf16 v{a}", "(mrf{u}) = vmatmul.8x128.bf16 v{a}",
    "v{r} = vpop.8x128 (mrf{u})", "%v{r} = vpop.f32.mrf.mxu{u}", "%{r} = vmatmul.bf16.msra.mxu{u} %v{a}",
    "[vmem:$0x{m:x}] = vst.8x128 v{a}", "v{r} = vpop (trf{u})", "v{r} = vpop (erf0)", "v{r} = vexp.f32 v{a}",
    "dma.hbm_to_vmem s{a}, 128, [vmem:$0x{m:x}]", "[vmem:$0x1f00] = vst.spill v{a}", "v{r} = vld.spill [vmem:$0x1f00]",
    "%{r} = vst [vmem:[#allocation1] sm:$0xff] %v{a}", "v{r} = vld [vmem:#allocation2]",
    "sst.SPILL [smem:$0x40], s{a}", "halt", "vsyncpa [#allocation0], 0",
]


def form_a_lines(rng: random.Random, bundles: int, hexadecimal: bool) -> Iterator[str]:
    """A bench-like form A program: up to 16 ops a bundle, loops closed by branches, spills, #allocations."""
    yield "$region0: #{fusion.fast}"
    yield "#allocation1 [shape = 'f32[8,128]{1,0}', space=vmem, size = 0x1000, scoped, tag = 'Spill slot']"
    address = rng.randrange(5)
    starts: list[int] = []
    for _ in range(bundles):
        ops = [rng.choice(OPS).format(r=rng.randrange(32), a=rng.randrange(32), b=rng.randrange(32), u=rng.randrange(4),
                                      p=rng.randrange(8), m=rng.randrange(0x1000), i=rng.randrange(99))
               for _ in range(rng.choice([0, 1, 3, 5, 8, 15, 16, 17]))]
        if starts and rng.random() < 0.2:
            target = rng.choice(starts)
            ops.append(rng.choice([f"(pc) = sbr.rel @p1 $-{address - target}", f"sbr.abs ${target}",
                                   f"%7 = sbr.rel (%p0) $+{rng.randrange(3)}"]))
        starts.append(address)
        head = f"{address:#x}" if hexadecimal else str(address)
        yield f"{head} : {{{rng.choice([';  ', ';', ' ; ']).join(ops)}}}"
        address += rng.randint(1, 3)
    yield "#allocation2 [shape = 'u8[4096]{0}', space=vmem, size = 0x1000, tag = 'spill slot']"  # after its use


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32), st.integers(1, 120), st.booleans(), st.booleans())
def test_bench_like_listings_agree(seed: int, bundles: int, hexadecimal: bool, final_newline: bool) -> None:
    text = "\n".join(form_a_lines(random.Random(seed), bundles, hexadecimal)) + ("\n" if final_newline else "")
    fast, general = both_ways(text)
    assert fast == general and not isinstance(fast, tuple)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32), st.integers(1, 60), st.data())
def test_damaged_bench_like_listings_agree(seed: int, bundles: int, data: st.DataObject) -> None:
    lines = list(form_a_lines(random.Random(seed), bundles, False))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(lines) - 1))
        position = data.draw(st.integers(0, len(lines[at])))
        insert = data.draw(st.sampled_from(["", ";", ";;", "=", "[", "]", "(", ")", "{", "}", "/", "/**/", "x", "0",
                                            " ", "\t", "\r", "é", "<a>", "$-3", "vpop", "SPILL", "#allocation1"]))
        lines[at] = lines[at][:position] + insert + lines[at][position:]
    fast, general = both_ways("\n".join(lines))
    assert fast == general


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(listings())
def test_generated_listings_agree(case: tuple[str, list[Any], bool]) -> None:
    fast, general = both_ways(case[0])
    assert fast == general


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(listings(), st.data())
def test_mutated_listings_agree(case: tuple[str, list[Any], bool], data: st.DataObject) -> None:
    lines = case[0].split("\n")
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(lines) - 1))
        how = data.draw(st.sampled_from(["drop", "dup", "cut", "insert", "swap"]))
        if how == "drop":
            del lines[at]
        elif how == "dup":
            lines.insert(at, lines[at])
        elif how == "cut":
            lines[at] = lines[at][: data.draw(st.integers(0, len(lines[at])))]
        elif how == "swap":
            other = data.draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
        else:
            lines[at] = lines[at] + data.draw(st.text(FUZZ_ALPHABET, max_size=5))
        if not lines:
            break
    fast, general = both_ways("\n".join(lines))
    assert fast == general


def test_bundles_are_a_sequence_built_on_demand() -> None:
    text = "\n".join(form_a_lines(random.Random(7), 50, False))
    (program,) = parse_llo(text)
    bundles = program.bundles
    built = tuple(bundles)
    assert len(bundles) == len(built) == program.bundle_count and bundles == built and built == bundles
    assert bundles[-1] == built[-1] and bundles[3:9:2] == built[3:9:2] and tuple(reversed(bundles)) == built[::-1]
    assert sum(len(bundle.ops) for bundle in bundles) == program.op_count
    assert bundles[0].text == text.split("\n")[2] and bundles[0].line == 3
    with pytest.raises(IndexError):
        bundles[len(built)]
