"""Which runs a two-point comparison keeps: those made in sessions both sides were measured in, where each side has
enough of them in every environment both share (service/detect/run_stats.co_measured)."""

from __future__ import annotations

from service.detect.run_stats import CoMeasured, RunOrigin, co_measured


def origins(*sessions: str | None, environment: int = 1, first: int = 0) -> dict[int, RunOrigin]:
    return {first + i: RunOrigin(environment, s) for i, s in enumerate(sessions)}


def test_a_confirmations_extra_rounds_are_left_out_against_a_commit_it_did_not_measure() -> None:
    base = origins("demo", "demo", "demo")
    head = origins("demo", "demo", "demo", "confirm0", "confirm1", "confirm2", first=10)
    assert co_measured(base, head) == CoMeasured((0, 1, 2), (10, 11, 12), (0, 3))


def test_sides_that_share_every_session_keep_every_run() -> None:
    base = origins("demo", "demo", "confirm0", "confirm1")
    head = origins("demo", "demo", "confirm0", "confirm1", first=10)
    assert co_measured(base, head) == CoMeasured((0, 1, 2, 3), (10, 11, 12, 13), (0, 0))


def test_too_few_shared_runs_on_a_side_keeps_everything() -> None:
    """One shared run a side says nothing about the spread: every run, as before, rather than a side of one."""
    base = origins("s", None, None)
    head = origins("s", "t", "t", first=10)
    assert co_measured(base, head) == CoMeasured((0, 1, 2), (10, 11, 12), (0, 0))


def test_runs_of_no_session_share_nothing() -> None:
    base, head = origins(None, None, None), origins(None, None, first=10)
    assert co_measured(base, head).left_out == (0, 0)


def test_every_common_environment_needs_enough_shared_runs() -> None:
    """A second environment with a single shared run a side would be left to one run: keep everything."""
    base = {**origins("s", "s"), **origins("s", "x", environment=2, first=5)}
    head = {**origins("s", "s", "y", first=10), **origins("s", "y", environment=2, first=15)}
    assert co_measured(base, head).left_out == (0, 0)
    # With two shared runs a side there too, each side keeps its shared runs in both.
    base[6] = RunOrigin(2, "s")
    head[16] = RunOrigin(2, "s")
    kept = co_measured(base, head)
    assert kept.base == (0, 1, 5, 6) and kept.head == (10, 11, 15, 16) and kept.left_out == (0, 1)
