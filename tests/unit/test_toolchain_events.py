"""Where a series and a same-hardware sibling meet end to start (issue 17: a toolchain change is an event between
two series): only then, and the nearest boundary first."""

from __future__ import annotations

from service.store.series_companions import SiblingSeries, toolchain_events


def sibling(sid: int, first: int, last: int, same_hardware: bool = True) -> SiblingSeries:
    return SiblingSeries(id=sid, environment="cpu", differences=[f"jax a → b{sid}"],
                         differences_back=[f"jax b{sid} → a"], same_hardware=same_hardware, points=last - first + 1,
                         first_position=first, last_position=last)


def test_end_to_start_is_an_event_in_the_right_direction() -> None:
    after, before = sibling(1, 8, 9), sibling(2, 0, 2)
    [nearest, other] = toolchain_events([3, 4, 5, 6, 7], [before, after])
    assert (nearest.sibling_id, nearest.continues, nearest.position, nearest.sibling_position) == (1, True, 7, 8)
    assert nearest.changes == ["jax a → b1"]
    assert (other.sibling_id, other.continues, other.position, other.sibling_position) == (2, False, 3, 2)
    assert other.changes == ["jax b2 → a"]  # earlier → later: the sibling's toolchain came first


def test_overlapping_or_other_hardware_siblings_are_no_event() -> None:
    assert toolchain_events([3, 4, 5], [sibling(1, 4, 9), sibling(2, 6, 9, same_hardware=False)]) == []
    assert toolchain_events([], [sibling(1, 8, 9)]) == []
