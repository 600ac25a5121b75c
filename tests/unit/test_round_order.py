"""The order a round starts its commits' benchmark processes in (runners/local.py round_order)."""

from __future__ import annotations

from runners.local import round_order


def test_two_commits_alternate_and_more_are_shuffled_each_round() -> None:
    assert [round_order(2, r, "s") for r in range(4)] == [[0, 1], [1, 0], [0, 1], [1, 0]]
    rounds = [round_order(8, r, "session-1") for r in range(64)]
    assert all(sorted(order) == list(range(8)) for order in rounds)
    assert rounds == [round_order(8, r, "session-1") for r in range(64)]  # a redelivered task repeats it
    assert rounds != [round_order(8, r, "session-2") for r in range(64)]
    # Reversing each round kept the first and last commit at an end of every round; shuffled, none is.
    at_an_end = [sum(order.index(c) in (0, 7) for order in rounds) for c in range(8)]
    assert max(at_an_end) < 40 and min(at_an_end) > 5, at_an_end
