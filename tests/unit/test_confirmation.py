"""Confirmation and bisection decisions on samples where the answer is known."""

import numpy as np

from service.detect.confirmation import ConfirmParams, decide, next_to_measure


def samples(level: float, n: int = 15, noise: float = 0.02, seed: int = 0) -> list[float]:
    return list(level * np.exp(noise * np.random.default_rng(seed).standard_normal(n)))


def test_a_clear_slowdown_in_the_expected_direction_is_confirmed() -> None:
    d = decide(samples(1.0), samples(1.2, seed=1), expect_increase=True, rounds=1)
    assert d.verdict == "confirmed" and d.p_value < 0.001 and abs(d.ratio - 1.2) < 0.05
    assert d.describe().startswith("confirmed: head/base +")


def test_a_difference_the_other_way_refutes_at_once() -> None:
    assert decide(samples(1.0), samples(0.8, seed=1), expect_increase=True, rounds=1).verdict == "refuted"


def test_no_difference_asks_for_more_rounds_then_refutes_at_the_cap() -> None:
    base, head = samples(1.0), samples(1.0, seed=1)
    assert decide(base, head, True, rounds=1).verdict == "undecided"
    assert decide(base, head, True, rounds=3).verdict == "refuted"
    many = decide(samples(1.0, n=40), samples(1.0, n=40, seed=2), True, rounds=1)
    assert many.verdict in ("refuted", "undecided") and (many.verdict == "refuted") == (many.p_value > 0.5)


def test_a_significant_but_tiny_change_is_not_confirmed() -> None:
    base, head = samples(1.0, n=200, noise=0.001), samples(1.003, n=200, noise=0.001, seed=1)
    d = decide(base, head, True, rounds=1, params=ConfirmParams(min_effect=0.01))
    assert d.p_value < 0.01 and d.verdict == "undecided"


def test_too_few_samples_wait_for_their_round() -> None:
    assert decide([1.0], [2.0], True, rounds=1).verdict == "undecided"


def test_bisection_measures_the_middle_and_stops_when_nothing_is_left() -> None:
    assert next_to_measure(["a", "b", "c", "d"]) == "b"
    assert next_to_measure(["a", "b", "c"]) == "b"
    assert next_to_measure(["a"]) == "a"
    assert next_to_measure([]) is None
