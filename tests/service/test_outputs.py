"""OutputLog: the merged frontier over workers, retention, subscribers and their limits.

Most tests drive a log directly through its per-worker pushers, as ``capture_into`` does, so
every event and its order is under the test's control; the last ones run it behind a real
dataflow on 1 and 3 workers.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

from api.codec import encoded_size
from operators.capture import Messages, Progress
from operators.progress import Product
from service.app import DataflowManager, DataflowRecord
from service.app.outputs import OutputLog, sorted_times
from tests.service.support import Start, until

SLOW = "slow consumer: the subscriber fell too far behind"


def log_of(peers: int, retention: int = 1_000, minimum: Hashable = 0) -> OutputLog:
    return OutputLog("out", minimum, peers, retention)


def advance(frm: Hashable, to: Hashable | None) -> Progress:
    """One worker's progress from ``frm`` to ``to`` (``None``: done)."""
    return Progress([(frm, -1)] if to is None else [(frm, -1), (to, 1)])


def frontier(log: OutputLog) -> list[Hashable]:
    return sorted_times(log.frontier())


def as_tuples(events: list[Messages | Progress]) -> list[tuple[Any, ...]]:
    """Events as plain tuples: ``("m", time, records)`` or ``("p", sorted changes)``."""
    return [
        ("m", e.time, e.records) if isinstance(e, Messages) else ("p", sorted(e.changes))
        for e in events
    ]


# --------------------------------------------------------------------------- the merged frontier


def test_the_merged_frontier_passes_a_time_only_when_every_worker_has() -> None:
    log = log_of(3)
    workers = [log.pusher() for _ in range(3)]
    subscriber = log.subscribe()
    assert frontier(log) == [0]
    workers[0].push(advance(0, 2))
    workers[1].push(advance(0, 3))
    assert frontier(log) == [0]
    assert subscriber.take() == []  # no merged change yet: nothing is sent
    workers[2].push(advance(0, 5))
    assert frontier(log) == [2]
    workers[1].push(advance(3, 4))
    assert frontier(log) == [2]
    workers[0].push(advance(2, 6))
    assert frontier(log) == [4]
    workers[1].push(advance(4, None))
    assert frontier(log) == [5]
    workers[2].push(advance(5, None))
    assert frontier(log) == [6]
    workers[0].push(advance(6, None))
    assert frontier(log) == []
    assert log.frontier().is_empty()
    assert as_tuples(subscriber.take()) == [
        ("p", [(0, -1), (2, 1)]),
        ("p", [(2, -1), (4, 1)]),
        ("p", [(4, -1), (5, 1)]),
        ("p", [(5, -1), (6, 1)]),
        ("p", [(6, -1)]),
    ]


def test_a_worker_may_hold_several_times() -> None:
    log = log_of(2)
    w0, w1 = log.pusher(), log.pusher()
    w0.push(Progress([(0, -1), (3, 2)]))
    w1.push(advance(0, 1))
    assert frontier(log) == [1]
    w1.push(advance(1, None))
    assert frontier(log) == [3]
    w0.push(Progress([(3, -1)]))
    assert frontier(log) == [3]
    w0.push(Progress([(3, -1)]))
    assert frontier(log) == []


def test_product_frontier_and_complete_times() -> None:
    log = log_of(1, minimum=Product(0, 0))
    worker = log.pusher()
    for time in [Product(2, 1), Product(0, 3), Product(0, 0), Product(1, 0), Product(0, 1)]:
        worker.push(Messages(time, [str(time)]))
    worker.push(Progress([(Product(0, 0), -1), (Product(0, 2), 1), (Product(1, 0), 1)]))
    assert frontier(log) == [Product(0, 2), Product(1, 0)]
    assert log.complete_times(None, None) == [Product(0, 0), Product(0, 1)]
    assert log.complete_times(Product(0, 1), None) == [Product(0, 1)]
    assert log.complete_times(None, Product(0, 1)) == [Product(0, 0)]
    assert log.complete_times(Product(1, 0), None) == []
    worker.push(Progress([(Product(0, 2), -1), (Product(1, 0), -1), (Product(2, 0), 1)]))
    assert log.complete_times(None, None) == [
        Product(0, 0),
        Product(0, 1),
        Product(0, 3),
        Product(1, 0),
    ]
    # ``start <= t`` in the product order: (0, 3) is not after (1, 0).
    assert log.complete_times(Product(1, 0), None) == [Product(1, 0)]
    assert log.records_at(Product(0, 3)) == ["Product(outer=0, inner=3)"]


# --------------------------------------------------------------------------- completed times


def test_complete_times_and_records_at() -> None:
    log = log_of(2)
    w0, w1 = log.pusher(), log.pusher()
    w0.push(Messages(3, ["c"]))
    w1.push(Messages(1, ["a", "b"]))
    w0.push(Messages(1, ["d"]))
    w1.push(Messages(5, ["e"]))
    w0.push(Messages(0, []))
    assert log.complete_times(None, None) == []
    w0.push(advance(0, 4))
    w1.push(advance(0, 5))
    assert frontier(log) == [4]
    assert log.complete_times(None, None) == [0, 1, 3]
    assert log.complete_times(1, None) == [1, 3]
    assert log.complete_times(None, 3) == [0, 1]
    assert log.complete_times(1, 3) == [1]
    assert log.complete_times(2, 3) == []
    assert log.complete_times(4, None) == []
    assert log.records_at(1) == ["a", "b", "d"]
    assert log.records_at(0) == []
    assert log.records_at(2) == []
    assert log.records_at(5) == ["e"]  # retained, though not complete yet
    log.records_at(1).append("not kept")  # a copy
    assert log.records_at(1) == ["a", "b", "d"]
    w0.push(advance(4, None))
    w1.push(advance(5, None))
    assert log.complete_times(None, None) == [0, 1, 3, 5]
    assert log.records_out == 5


# --------------------------------------------------------------------------- subscribers


def test_subscribe_gets_the_backlog_then_the_frontier_then_live_events() -> None:
    log = log_of(2)
    w0, w1 = log.pusher(), log.pusher()
    w1.push(Messages(2, ["c"]))
    w0.push(Messages(0, ["a"]))
    w0.push(Messages(0, ["b"]))
    w0.push(advance(0, 1))
    w1.push(advance(0, 2))
    subscriber = log.subscribe()
    assert as_tuples(subscriber.take()) == [
        ("m", 0, ["a", "b"]),
        ("m", 2, ["c"]),
        ("p", [(0, -1), (1, 1)]),
    ]
    late = Messages(1, ["d"])
    w0.push(late)
    w1.push(Messages(3, ["e"]))
    w0.push(advance(1, 4))
    w1.push(advance(2, None))
    events = subscriber.take()
    assert events[0] is late  # the worker's event itself, not a copy
    assert as_tuples(events) == [
        ("m", 1, ["d"]),
        ("m", 3, ["e"]),
        ("p", [(1, -1), (2, 1)]),
        ("p", [(2, -1), (4, 1)]),
    ]
    assert subscriber.resume == [4]
    assert subscriber.closed is None


def test_subscribe_at_the_start_sends_no_progress() -> None:
    log = log_of(1)
    log.pusher().push(Messages(0, ["a"]))
    subscriber = log.subscribe()
    assert as_tuples(subscriber.take()) == [("m", 0, ["a"])]


def test_subscribe_from_a_time_resumes_there() -> None:
    log = log_of(1)
    worker = log.pusher()
    for time, record in [(0, "a"), (1, "b"), (2, "c"), (4, "d")]:
        worker.push(Messages(time, [record]))
    worker.push(advance(0, 3))
    assert as_tuples(log.subscribe(start=2).take()) == [
        ("m", 2, ["c"]),
        ("m", 4, ["d"]),
        ("p", [(0, -1), (3, 1)]),
    ]
    assert as_tuples(log.subscribe(start=5).take()) == [("p", [(0, -1), (3, 1)])]
    assert as_tuples(log.subscribe(start=0).take())[:2] == [("m", 0, ["a"]), ("m", 1, ["b"])]


def test_subscribe_from_a_product_time() -> None:
    log = log_of(1, minimum=Product(0, 0))
    worker = log.pusher()
    for time in [Product(0, 4), Product(1, 1), Product(2, 0)]:
        worker.push(Messages(time, [list(time)]))
    assert as_tuples(log.subscribe(start=Product(1, 0)).take()) == [
        ("m", Product(1, 1), [[1, 1]]),
        ("m", Product(2, 0), [[2, 0]]),
    ]


def test_subscribe_from_a_frontier_replays_what_any_element_is_at_or_before() -> None:
    log = log_of(1, minimum=Product(0, 0))
    worker = log.pusher()
    for time in [Product(0, 4), Product(0, 6), Product(1, 1), Product(1, 2), Product(2, 0)]:
        worker.push(Messages(time, [list(time)]))
    frontier = [Product(0, 5), Product(1, 2)]
    assert as_tuples(log.subscribe(frontier=frontier).take()) == [
        ("m", Product(0, 6), [[0, 6]]),
        ("m", Product(1, 2), [[1, 2]]),
    ]
    assert as_tuples(log.subscribe(frontier=[]).take()) == []  # everything was delivered


def test_unsubscribe_stops_delivery() -> None:
    log = log_of(1)
    worker = log.pusher()
    subscriber = log.subscribe()
    other = log.subscribe()
    log.unsubscribe(subscriber)
    log.unsubscribe(subscriber)  # twice is fine
    worker.push(Messages(0, ["a"]))
    assert subscriber.take() == []
    assert as_tuples(other.take()) == [("m", 0, ["a"])]
    assert log.subscribers == [other]


def test_close_closes_every_subscriber_with_the_reason() -> None:
    log = log_of(1)
    first, second = log.subscribe(), log.subscribe()
    log.close("the dataflow was dropped")
    assert (first.closed, second.closed) == ("the dataflow was dropped", "the dataflow was dropped")
    assert first.wake.is_set()
    assert log.subscribers == []
    assert log.closed_reason == "the dataflow was dropped"
    log.pusher().push(Messages(0, ["late"]))
    assert first.take() == []


def test_wake_is_set_by_events_and_cleared_by_take() -> None:
    log = log_of(1)
    subscriber = log.subscribe()
    assert not subscriber.wake.is_set()
    log.pusher().push(Messages(0, ["a"]))
    assert subscriber.wake.is_set()
    subscriber.take()
    assert not subscriber.wake.is_set()


def test_a_slow_subscriber_is_closed_with_a_resume_point() -> None:
    log = log_of(1)
    worker = log.pusher()
    worker.push(Messages(0, ["a"]))
    worker.push(advance(0, 2))
    subscriber = log.subscribe(limit=2)
    fast = log.subscribe(limit=10)
    assert as_tuples(subscriber.take()) == [("m", 0, ["a"]), ("p", [(0, -1), (2, 1)])]
    assert subscriber.resume == [2]
    worker.push(Messages(2, ["b"]))
    worker.push(advance(2, 3))
    assert subscriber.closed is None
    worker.push(Messages(3, ["c"]))  # the third queued event: over the limit of 2
    assert subscriber.closed == SLOW
    assert subscriber.wake.is_set()
    worker.push(advance(3, 4))  # nothing more is queued
    assert as_tuples(subscriber.take()) == [("m", 2, ["b"]), ("p", [(2, -1), (3, 1)])]
    assert subscriber.resume == [3]
    assert fast.closed is None
    assert len(fast.take()) == 6
    # Resuming from the resume point gives what was missed.
    again = log.subscribe(start=subscriber.resume[0])
    assert as_tuples(again.take()) == [("m", 3, ["c"]), ("p", [(0, -1), (4, 1)])]


def test_a_backlog_longer_than_the_limit_is_delivered() -> None:
    log = log_of(1)
    worker = log.pusher()
    for time in range(5):
        worker.push(Messages(time, [time]))
    subscriber = log.subscribe(limit=2)
    assert subscriber.closed is None
    assert len(subscriber.queue) == 5
    assert subscriber.limit == 2
    worker.push(Messages(5, [5]))  # the backlog was not taken yet: now it is too slow
    assert subscriber.closed == SLOW


def test_a_slow_subscriber_before_any_progress_resumes_at_the_minimum() -> None:
    log = log_of(1)
    worker = log.pusher()
    subscriber = log.subscribe(limit=1)
    worker.push(Messages(0, ["a"]))
    worker.push(Messages(0, ["b"]))
    assert subscriber.closed == SLOW
    assert as_tuples(subscriber.take()) == [("m", 0, ["a"])]
    assert subscriber.resume == [0]


# --------------------------------------------------------------------------- retention


def test_retention_forgets_the_oldest_completed_times_first() -> None:
    log = log_of(1, retention=4)
    worker = log.pusher()
    worker.push(Messages(0, ["a", "b"]))
    worker.push(Messages(1, ["c", "d"]))
    worker.push(advance(0, 2))
    assert log.complete_times(None, None) == [0, 1]
    assert (log.is_forgotten(0), log.evicted) == (False, [])
    worker.push(Messages(2, ["e"]))  # 5 retained: time 0 goes
    assert log.complete_times(None, None) == [1]
    assert (log.records_at(0), log.evicted) == ([], [0])
    assert [log.is_forgotten(t) for t in range(3)] == [True, False, False]
    worker.push(Messages(2, ["f", "g"]))  # 5 again: time 1 goes
    assert log.complete_times(None, None) == []
    assert [log.is_forgotten(t) for t in range(3)] == [True, True, False]
    assert log.evicted == [1]
    worker.push(Messages(2, ["h", "i"]))  # 5, but time 2 is not complete: it stays
    assert log.records_at(2) == ["e", "f", "g", "h", "i"]
    worker.push(Messages(3, ["j"]))
    worker.push(advance(2, 4))  # 2 and 3 complete; 2 is the oldest and goes
    assert log.complete_times(None, None) == [3]
    assert log.records_at(3) == ["j"]
    assert [log.is_forgotten(t) for t in range(5)] == [True, True, True, False, False]
    assert log.records_out == 10
    # A new subscriber gets only what is retained.
    assert as_tuples(log.subscribe().take()) == [("m", 3, ["j"]), ("p", [(0, -1), (4, 1)])]


def test_retention_in_bytes_forgets_the_oldest_completed_times_first() -> None:
    # Each batch is one record of 8 characters: ["xxxxxxxx"] is 12 bytes as the API sends it.
    log = OutputLog("out", 0, 1, retention=1_000, retention_bytes=40, sizer=encoded_size)
    worker = log.pusher()
    for time in range(4):
        worker.push(Messages(time, ["x" * 8]))
    assert (log.retained_bytes, log.evicted) == (48, [])  # over, but nothing is complete
    worker.push(advance(0, 4))
    assert log.complete_times(None, None) == [1, 2, 3]
    assert (log.retained_bytes, log.evicted) == (36, [0])
    worker.push(Messages(4, ["y" * 100]))  # 104 bytes, not complete: it stays, the rest go
    assert (log.complete_times(None, None), log.retained_bytes) == ([], 104)
    assert log.evicted == [3]
    assert log.records_out == 5


def test_a_subscriber_over_its_queued_bytes_is_closed_as_slow() -> None:
    log = OutputLog("out", 0, 1, retention=1_000, retention_bytes=None, sizer=encoded_size)
    worker = log.pusher()
    subscriber = log.subscribe(limit=100, limit_bytes=30)
    worker.push(Messages(0, ["x" * 8]))
    worker.push(Messages(0, ["x" * 8]))
    assert (subscriber.closed, subscriber.queued_bytes) == (None, 24)
    worker.push(Messages(0, ["x" * 8]))  # 36 bytes queued would be over 30
    assert subscriber.closed == SLOW
    assert as_tuples(subscriber.take()) == [("m", 0, ["x" * 8])] * 2
    # One event larger than the limit is taken into an empty queue (else it could never be).
    reader = log.subscribe(limit=100, limit_bytes=30)
    reader.take()
    worker.push(Messages(1, ["y" * 100]))
    assert (reader.closed, reader.queued_bytes) == (None, 104)
    assert as_tuples(reader.take()) == [("m", 1, ["y" * 100])]


def test_retention_with_several_workers_waits_for_the_merged_frontier() -> None:
    log = log_of(2, retention=1)
    w0, w1 = log.pusher(), log.pusher()
    w0.push(Messages(0, ["a"]))
    w1.push(Messages(1, ["b"]))
    w0.push(advance(0, 5))
    assert (log.records_at(0), log.records_at(1)) == (["a"], ["b"])  # nothing complete yet
    w1.push(advance(0, 5))
    assert (log.records_at(0), log.records_at(1)) == ([], ["b"])
    assert log.complete_times(None, None) == [1]
    assert (log.is_forgotten(0), log.is_forgotten(1), log.evicted) == (True, False, [0])


# --------------------------------------------------------------------------- behind a dataflow


# "x" is owned by worker 0 with 1 and with 3 workers; the exchange spreads records by value.
SPREAD = {
    "nodes": {
        "x": {"op": "input"},
        "spread": {"op": "exchange", "key": "r"},
        "out": {"op": "output"},
    },
    "edges": [["x", "spread"], ["spread", "out"]],
}


def replay(events: list[Messages | Progress]) -> tuple[dict[Hashable, list[Any]], list[list[Any]]]:
    """Records per time (sorted), and the frontier after each progress event."""
    records: dict[Hashable, list[Any]] = {}
    counts: dict[Hashable, int] = {0: 1}
    frontiers: list[list[Any]] = []
    for event in events:
        if isinstance(event, Messages):
            records.setdefault(event.time, []).extend(event.records)
        else:
            for time, diff in event.changes:
                counts[time] = counts.get(time, 0) + diff
            frontiers.append(sorted(t for t, c in counts.items() if c > 0))
    return {t: sorted(r) for t, r in sorted(records.items())}, frontiers


async def spread(start: Start, workers: int) -> tuple[DataflowManager, DataflowRecord]:
    manager = await start(workers)
    return manager, await manager.create("t", SPREAD)


@pytest.mark.parametrize("workers", [1, 3])
async def test_a_dataflow_output_streams_to_subscribers(start: Start, workers: int) -> None:
    manager, record = await spread(start, workers)
    log = manager.output("t", record.id, "out")
    assert log.minimum == 0
    subscriber = log.subscribe()
    x = manager.input("t", record.id, "x")
    session = x.open_session()
    x.push(session.id, 1, [(0, 1), (0, 2), (0, 3), (1, 4), (1, 5)])
    x.advance(session.id, 1)
    await until(lambda: frontier(log) == [1], "the output passes 0")
    assert log.complete_times(None, None) == [0]
    assert sorted(log.records_at(0)) == [1, 2, 3]
    x.push(session.id, 2, [(2, 6)])
    x.advance(session.id, 3)
    await until(lambda: frontier(log) == [3], "the output passes 2")
    events = subscriber.take()
    assert replay(events) == ({0: [1, 2, 3], 1: [4, 5], 2: [6]}, [[1], [3]])
    # A subscriber resuming at 1 gets the retained times from there, then the frontier.
    resumed = log.subscribe(start=1)
    assert replay(resumed.take()) == ({1: [4, 5], 2: [6]}, [[3]])
    x.close()
    await until(lambda: frontier(log) == [], "the output completes")
    assert as_tuples(subscriber.take()) == [("p", [(3, -1)])]
    assert as_tuples(resumed.take()) == [("p", [(3, -1)])]
    assert log.records_out == 6


@pytest.mark.parametrize("workers", [1, 3])
async def test_the_output_frontier_never_passes_a_worker(start: Start, workers: int) -> None:
    manager, record = await spread(start, workers)
    log = manager.output("t", record.id, "out")
    x = manager.input("t", record.id, "x")
    session = x.open_session()
    observed: list[list[Any]] = []
    for time in range(1, 6):
        x.push(session.id, time, [(time - 1, v) for v in range(3 * time)])
        x.advance(session.id, time)
        await until(lambda: frontier(log) == [time], f"the output passes {time - 1}")  # noqa: B023
        observed.append(frontier(log))
        # Everything before the frontier is there, from every worker.
        assert sorted(log.records_at(time - 1)) == list(range(3 * time))
    assert observed == [[1], [2], [3], [4], [5]]
    assert log.complete_times(None, None) == [0, 1, 2, 3, 4]
