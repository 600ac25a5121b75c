"""Which runs a two-point comparison keeps: those made in sessions both sides were measured in, where each side has
enough of them in every environment both share (service/detect/run_stats.co_measured)."""

from __future__ import annotations

from service.detect.run_stats import CoMeasured, RunOrigin, co_measured, session_units, sessions_add_spread


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


def test_session_units_where_the_sides_were_measured_apart() -> None:
    together = {0: RunOrigin(1, "s"), 1: RunOrigin(1, "s")}
    assert session_units(together, {2: RunOrigin(1, "s")}) is None  # every run shares the session: runs
    base = {0: RunOrigin(1, "a"), 1: RunOrigin(1, "a"), 2: RunOrigin(1, None)}
    head = {3: RunOrigin(1, "b"), 4: RunOrigin(1, "b")}
    assert session_units(base, head) == {0: "a", 1: "a", 2: "run 2", 3: "b", 4: "b"}


def test_sessions_add_spread_is_the_nested_f_test() -> None:
    """Sessions far apart whose runs agree add spread; sessions whose means agree as their runs do add none; a
    history too short to tell is read as adding (the cautious side)."""
    apart = [[[0.0, 0.01], [0.2, 0.21], [-0.1, -0.09]] for _ in range(3)]
    alike = [[[0.0, 0.1], [0.1, 0.0], [0.02, 0.08]] for _ in range(3)]
    assert sessions_add_spread(apart) is True
    assert sessions_add_spread(alike) is False
    assert sessions_add_spread(alike[:1]) is True  # 2 degrees of freedom between sessions: cannot tell
    assert sessions_add_spread([[[0.0, 0.0], [0.0, 0.0]]] * 5) is False  # exact figures: nothing anywhere
