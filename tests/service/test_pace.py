"""A dataflow's pace: throughput per sample, completion latency per time, the loop's lag.

The clock is the test's: latencies are exact.
"""

from __future__ import annotations

import pytest

from operators.progress import Product
from service.app import pace
from service.app.pace import Latency, LoopLag, Pace, Stall


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_time_s_latency_runs_from_its_first_record_to_its_completion() -> None:
    clock = Clock()
    p = Pace(clock)
    p.add_output("out")
    p.arrived([0])
    clock.now += 0.25
    p.arrived([0, 1])  # 0 again: still followed from its first record
    clock.now += 0.5
    p.output_moved("out", [1])  # 0 completes, 1 does not
    assert p.followed == 1
    clock.now += 2.0
    p.output_moved("out", [5])
    assert p.followed == 0
    sample = p.sample(1_000.0, 1.0, {"numbers": 7}, {"out": 3}, 0.002)
    assert sample.latency == {"out": Latency(2, (0.75 + 2.5) / 2, 2.5)}
    assert sample.records_in == {"numbers": 7}
    assert sample.records_out == {"out": 3}
    assert (sample.seq, sample.at, sample.seconds, sample.loop_lag) == (0, 1_000.0, 1.0, 0.002)


def test_samples_hold_what_the_counters_grew_by_and_are_kept() -> None:
    p = Pace(Clock())
    p.add_output("out")
    first = p.sample(1.0, 1.0, {"a": 10, "b": 0}, {"out": 4}, 0.0)
    second = p.sample(2.0, 1.0, {"a": 25, "b": 3}, {"out": 4}, 0.0)
    assert (first.records_in, first.records_out) == ({"a": 10, "b": 0}, {"out": 4})
    assert (second.records_in, second.records_out) == ({"a": 15, "b": 3}, {"out": 0})
    assert second.latency == {}
    assert [s.seq for s in p.samples_after(-1)] == [0, 1]
    assert [s.seq for s in p.samples_after(0)] == [1]
    assert p.samples_after(1) == []


def test_only_the_last_window_of_samples_is_kept() -> None:
    p = Pace(Clock())
    for second in range(pace.WINDOW + 5):
        p.sample(float(second), 1.0, {}, {}, 0.0)
    kept = p.samples_after(-1)
    assert len(kept) == pace.WINDOW
    assert (kept[0].seq, kept[-1].seq) == (5, pace.WINDOW + 4)


def test_each_output_completes_a_time_on_its_own() -> None:
    clock = Clock()
    p = Pace(clock)
    p.add_output("fast")
    p.add_output("slow")
    p.arrived([3])
    clock.now += 1.0
    p.output_moved("fast", [4])
    assert p.followed == 1  # the slow output still waits for it
    clock.now += 3.0
    p.output_moved("slow", [])  # an empty frontier: every time is complete
    assert p.followed == 0
    sample = p.sample(0.0, 1.0, {}, {}, 0.0)
    assert sample.latency == {"fast": Latency(1, 1.0, 1.0), "slow": Latency(1, 4.0, 4.0)}


def test_product_times_complete_out_of_order() -> None:
    """``(1, 0)`` completes while ``(0, 5)`` does not: each is looked at on its own."""
    clock = Clock()
    p = Pace(clock)
    p.add_output("out")
    p.arrived([Product(0, 5), Product(1, 0)])
    clock.now += 2.0
    # The frontier {(0, 5)}: (1, 0) is complete ((0, 5) <= (1, 0) fails on the inner
    # coordinate), (0, 5) is not, though it comes first in the lexicographic order.
    p.output_moved("out", [Product(0, 5)])
    assert p.followed == 1
    assert p.sample(0.0, 1.0, {}, {}, 0.0).latency == {"out": Latency(1, 2.0, 2.0)}
    clock.now += 1.0
    p.output_moved("out", [Product(0, 6)])
    assert p.sample(1.0, 1.0, {}, {}, 0.0).latency == {"out": Latency(1, 3.0, 3.0)}
    assert p.followed == 0


def test_a_time_already_complete_is_not_followed() -> None:
    p = Pace(Clock())
    p.add_output("out")
    p.output_moved("out", [10])
    p.arrived([4])  # the output is past it: nothing will complete it again
    assert p.followed == 0
    p.output_moved("out", [11])
    assert p.sample(0.0, 1.0, {}, {}, 0.0).latency == {}


def test_at_most_so_many_times_are_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pace, "FOLLOWED", 3)
    clock = Clock()
    p = Pace(clock)
    p.add_output("out")
    p.arrived(range(5))
    assert (p.followed, p.unfollowed) == (3, 2)
    clock.now += 1.0
    p.output_moved("out", [5])
    assert p.sample(0.0, 1.0, {}, {}, 0.0).latency == {"out": Latency(3, 1.0, 1.0)}
    p.arrived([6])  # room again
    assert (p.followed, p.unfollowed) == (1, 2)


def test_the_loop_watch_keeps_the_worst_lateness_and_the_stalls() -> None:
    lag = LoopLag()
    lag.observe(0.001, 10.0)
    lag.observe(0.004, 10.1)
    assert lag.take() == 0.004
    assert lag.last == 0.004
    assert lag.take() == 0.0
    lag.observe(pace.STALL - 0.01, 11.0)
    assert list(lag.stalls) == []
    lag.observe(2.5, 20.0)  # a timer 2.5 s late: the loop ran nothing from 17.5 on
    assert list(lag.stalls) == [Stall(17.5, 2.5)]
    assert (lag.take(), lag.total_stalls) == (2.5, 1)
    for n in range(pace.STALLS_KEPT + 3):
        lag.observe(1.0, 100.0 + n)
    assert len(lag.stalls) == pace.STALLS_KEPT
    assert lag.total_stalls == pace.STALLS_KEPT + 4
