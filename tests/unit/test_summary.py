"""Summaries of a result's samples: the vectorised form agrees with one list at a time, whatever the lengths."""

from __future__ import annotations

import numpy as np
import pytest

from service.detect.summary import Summary, summarize, summarize_many


def test_many_agrees_with_one_at_a_time() -> None:
    rng = np.random.default_rng(2)
    lists = [list(rng.lognormal(0, 0.1, n)) for n in (10, 3, 10, 1, 0, 7, 10, 2)]
    assert summarize_many(lists) == [summarize(samples) for samples in lists]


def test_edge_cases() -> None:
    assert summarize([]) == Summary(0, None, None, None, None, None)
    one = summarize([2.0])
    assert (one.median, one.stddev, one.minimum, one.maximum) == (2.0, 0.0, 2.0, 2.0)
    assert summarize([1.0, 2.0, 3.0, 10.0]).median == pytest.approx(2.5)
    assert summarize_many([]) == []
