"""The first-cut detector on synthetic series where the right answer is known."""

import numpy as np
import pytest

from service.detect.steps import StepDetector, StepParams, find_steps, robust_noise
from service.detect.types import SeriesPoint


def points(levels: list[float], noise: float = 0.01, seed: int = 0, samples: int = 10) -> list[SeriesPoint]:
    rng = np.random.default_rng(seed)
    return [SeriesPoint(position=i, commit_id=100 + i,
                        samples=list(level * (1 + noise * rng.standard_normal(samples))))
            for i, level in enumerate(levels)]


def test_stable_series_has_no_change() -> None:
    for seed in range(20):
        levels = list(np.exp(0.03 * np.random.default_rng(seed).standard_normal(12)))
        assert StepDetector().detect(points(levels, seed=seed), "lower_is_better") == []


def test_a_step_up_is_a_regression_at_the_first_slow_commit() -> None:
    changes = StepDetector().detect(points([1.0] * 5 + [1.5] * 5), "lower_is_better")
    assert len(changes) == 1
    c = changes[0]
    assert (c.index, c.commit_id, c.previous_commit_id, c.kind) == (5, 105, 104, "regression")
    assert c.magnitude == pytest.approx(0.5, abs=0.02)
    assert c.before == pytest.approx(1.0, abs=0.02) and c.after == pytest.approx(1.5, abs=0.03)


def test_direction_decides_regression_or_improvement() -> None:
    faster = points([2.0] * 5 + [1.0] * 5)
    assert StepDetector().detect(faster, "lower_is_better")[0].kind == "improvement"
    assert StepDetector().detect(faster, "higher_is_better")[0].kind == "regression"


def test_one_slow_commit_is_not_a_step() -> None:
    levels = [1.0] * 10
    levels[4] = 3.0
    assert StepDetector().detect(points(levels), "lower_is_better") == []


def test_small_change_below_min_effect_is_ignored_even_on_a_quiet_series() -> None:
    assert StepDetector().detect(points([1.0] * 6 + [1.03] * 6, noise=0.0005), "lower_is_better") == []
    found = StepDetector(StepParams(min_effect=0.01)).detect(points([1.0] * 6 + [1.03] * 6, noise=0.0005),
                                                            "lower_is_better")
    assert [c.index for c in found] == [6]


def test_a_step_within_the_series_noise_is_ignored() -> None:
    rng = np.random.default_rng(3)
    levels = list(np.exp(0.2 * rng.standard_normal(10)) * np.array([1.0] * 5 + [1.2] * 5))
    assert StepDetector().detect(points(levels), "lower_is_better") == []


def test_too_few_commits_after_a_step_waits() -> None:
    assert StepDetector().detect(points([1.0] * 6 + [2.0]), "lower_is_better") == []
    assert [c.index for c in StepDetector().detect(points([1.0] * 6 + [2.0] * 2), "lower_is_better")] == [6]


def test_two_steps_are_both_found() -> None:
    found = find_steps(np.log([1.0] * 5 + [2.0] * 5 + [1.0] * 5), StepParams())
    assert [k for k, _ in found] == [5, 10]


def test_points_are_ordered_by_position_not_by_arrival() -> None:
    pts = points([1.0] * 5 + [2.0] * 5)
    changes = StepDetector().detect(list(reversed(pts)), "lower_is_better")
    assert [c.commit_id for c in changes] == [105]


def test_noise_estimate_ignores_a_single_step() -> None:
    quiet = np.log([1.0, 1.01, 0.99, 1.0, 2.0, 2.02, 1.98, 2.0])
    assert robust_noise(quiet, floor=0.0) < 0.02


def test_zero_times_are_refused_rather_than_logged() -> None:
    assert StepDetector().detect([SeriesPoint(i, i, [0.0]) for i in range(6)], "lower_is_better") == []


def test_a_noisy_stretch_is_judged_by_its_own_noise() -> None:
    # Seen in a demo run: a noisy first half, a very quiet second half after a real 4x step. The quiet half
    # must not make a wobble of the noisy half look like a second step.
    medians = [1.769, 0.894, 0.896, 1.430, 1.056, 4.745, 4.679, 4.758, 4.786, 4.810]
    pts = [SeriesPoint(i, i, [m]) for i, m in enumerate(medians)]
    assert [c.index for c in StepDetector().detect(pts, "lower_is_better")] == [5]
