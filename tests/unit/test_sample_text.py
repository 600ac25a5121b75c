"""Samples read back from their stored JSON text: the fast path agrees with json, and odd text takes json's."""

from __future__ import annotations

import json
import math

from service.pipeline.compare import _parse_samples


def test_agrees_with_json_on_what_ingest_stores() -> None:
    lists = [[0.006396902814211209, 1e-3, 2.5e-07], [], [3.0], [1.5, 2.25]]
    texts = [json.dumps(v) for v in lists] + [None]
    assert _parse_samples(texts) == [*lists, []]


def test_odd_text_falls_back_to_json() -> None:
    # numpy stops at the NaN numbers json accepts; the count check sends every row to json instead.
    parsed = _parse_samples(["[1.0, NaN]", "[2.0]"])
    assert parsed[1] == [2.0] and parsed[0][0] == 1.0 and math.isnan(parsed[0][1])
    assert _parse_samples([" [ 1.0 ,2.0 ] "]) == [[1.0, 2.0]]
    assert _parse_samples([]) == []
