"""``HeldTimes``: states held per time, released in time order once the frontier passes."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from operators.held import HeldTimes
from operators.progress import MutableAntichain, Product


class Held:
    """Stands in for the capability a real input hands out: its time, and ``retain``."""

    def __init__(self, time: Hashable) -> None:
        self.time = time
        self.retained = False
        self.dropped = False

    def retain(self) -> Held:
        self.retained = True
        return self

    def drop(self) -> None:
        self.dropped = True


class CountingFrontier(MutableAntichain[Hashable]):
    """A frontier that counts how many times were tested against it."""

    def __init__(self, time: Hashable) -> None:
        super().__init__([(time, 1)])
        self.tests = 0

    def less_equal(self, time: Hashable) -> bool:
        self.tests += 1
        return super().less_equal(time)

    def move(self, old: Hashable, new: Hashable) -> None:
        self.update_iter([(new, 1), (old, -1)])


def hold(held: HeldTimes[list[Any]], time: Hashable, record: Any) -> None:
    held.state(Held(time), list).append(record)  # type: ignore[arg-type]


def test_states_come_out_in_time_order_once_passed() -> None:
    held: HeldTimes[list[Any]] = HeldTimes()
    frontier = CountingFrontier(0)
    for time, record in [(5, "e"), (2, "b"), (5, "f"), (3, "c")]:
        hold(held, time, record)
    assert len(held) == 3
    assert held.ready(frontier) == []
    frontier.move(0, 4)
    assert [(c.time, s) for c, s in held.ready(frontier)] == [(2, ["b"]), (3, ["c"])]
    assert len(held) == 1
    frontier.update_iter([(4, -1)])  # the frontier is empty: everything is complete
    assert [(c.time, s) for c, s in held.ready(frontier)] == [(5, ["e", "f"])]
    assert len(held) == 0


def test_partially_ordered_times() -> None:
    held: HeldTimes[list[Any]] = HeldTimes()
    frontier = CountingFrontier(Product(0, 0))
    for time in [Product(1, 0), Product(0, 2), Product(2, 1)]:
        hold(held, time, str(time))
    # {(0, 3), (1, 1)}: (0, 2) and (1, 0) are passed; (2, 1) is not.
    frontier.update_iter([(Product(0, 3), 1), (Product(1, 1), 1), (Product(0, 0), -1)])
    ready = [c.time for c, _state in held.ready(frontier)]
    assert ready == [Product(0, 2), Product(1, 0)]
    assert len(held) == 1


def test_a_standing_frontier_only_tests_the_new_times() -> None:
    held: HeldTimes[list[Any]] = HeldTimes()
    frontier = CountingFrontier(0)
    for time in range(1000):  # a producer sends many times before it advances
        hold(held, time, time)
        assert held.ready(frontier) == []
    # Each time was tested once, when it was new: not once per call (500,500 tests).
    assert frontier.tests == 1000
    frontier.move(0, 500)
    assert len(held.ready(frontier)) == 500
    assert frontier.tests == 2000  # the frontier moved: every held time is tested again
    assert held.ready(frontier) == []
    assert frontier.tests == 2000


def test_replace_sets_a_value_state_and_capabilities_are_retained() -> None:
    held: HeldTimes[int] = HeldTimes()
    first = Held(7)
    assert held.state(first, int) == 0  # type: ignore[arg-type]
    held.replace(7, held.state(Held(7), int) + 3)  # type: ignore[arg-type]
    assert first.retained
    frontier = CountingFrontier(8)
    [(capability, state)] = held.ready(frontier)
    assert (id(capability), state) == (id(first), 3)


# --------------------------------------------------------------------------- the notificator


def test_the_notificator_tests_only_new_requests_while_frontiers_stand() -> None:
    from operators.notificator import Notificator

    frontier = CountingFrontier(0)
    notificator = Notificator([frontier])
    for time in range(1, 501):
        notificator.notify_at(Held(time))  # type: ignore[arg-type]
        assert list(notificator) == []
    assert frontier.tests == 500  # each request tested once, not every pending one each time
    frontier.move(0, 4)
    assert [(c.time, n) for c, n in notificator] == [(1, 1), (2, 1), (3, 1)]
    assert frontier.tests == 1000


def test_ready_times_a_caller_left_behind_are_delivered_later() -> None:
    from operators.notificator import Notificator

    frontier = CountingFrontier(0)
    notificator = Notificator([frontier])
    for time in (3, 1, 2):
        notificator.notify_at(Held(time))  # type: ignore[arg-type]
    notificator.notify_at(Held(2))  # type: ignore[arg-type]  # merged: a count of 2
    frontier.move(0, 10)
    for capability, count in notificator:
        assert (capability.time, count) == (1, 1)
        break  # stop early: 2 and 3 are ready but not taken
    assert [(c.time, n) for c, n in notificator] == [(2, 2), (3, 1)]
    assert list(notificator) == []
