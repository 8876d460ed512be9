"""The time-based part of the catalogue, with 1, 3 and 4 workers and exact outputs per time.

Covers ``count``, ``accumulate``, ``aggregate``, ``delay``, ``join``, the generic operators
(``unary`` with input capabilities, ``unary_frontier``, ``binary_frontier``,
``unary_notify`` with its notificator) and the probe handle.

Most tests drive rounds: at round ``t`` a worker sends its records at time ``t``, advances
its input to ``t + 1`` and steps until its probe has passed ``t + 1``, then logs
``("round", t)``. Because no worker advances further before its own round ends, what each
worker has emitted by then is exact: every time ``<= t`` that was due, and nothing later.

Every test runs in one process and across processes (3x1 and 2x2 over sockets,
:mod:`tests.runtime.fabrics`), with the same exact expected values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Any

import pytest

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Capability, CapabilityError, InputPort, OperatorCore, OutputPort
from operators.notificator import Notificator
from operators.progress import Antichain, less_equal
from operators.runtime import Worker, stable_hash
from tests.runtime.fabrics import Clusters, Layout, layouts

WORKERS = pytest.mark.parametrize("layout", layouts(1, 3, 4))

Plan = dict[int, list[list[Any]]]
"""Per time, the batches one worker sends at that time (one ``send_batch`` each)."""


async def drive(
    worker: Worker,
    handles: list[Any],
    probe: Any,
    events: list[Any],
    plans: list[Plan],
    rounds: int,
) -> None:
    """Run ``rounds`` rounds over ``handles`` (``plans[i]`` for ``handles[i]``), then close."""
    for t in range(rounds):
        for handle, plan in zip(handles, plans, strict=True):
            for batch in plan.get(t, []):
                handle.send_batch(batch)
        for handle in handles:
            handle.advance_to(t + 1)
        await worker.step_while(lambda: probe.less_than(handles[0].time))
        events.append(("round", t))
    for handle in handles:
        handle.close()


async def settle(worker: Worker, rounds: int = 20) -> None:
    """Let every worker run whatever is active, ``rounds`` times, without waiting."""
    for _ in range(rounds):
        worker.step_nowait()
        await asyncio.sleep(0)


async def until(worker: Worker, predicate: Callable[[], bool], rounds: int = 1000) -> None:
    """Step ``worker`` without waiting until ``predicate()`` holds (fail after ``rounds``)."""
    for _ in range(rounds):
        if predicate():
            return
        worker.step_nowait()
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


def outputs(events: list[Any]) -> list[Any]:
    """The emitted ``(time, records)`` events, without the round markers."""
    return [e for e in events if e[0] != "round"]


def merged(results: list[list[Any]]) -> dict[Hashable, list[Any]]:
    """Every worker's emitted records, per time, sorted."""
    by_time: dict[Hashable, list[Any]] = {}
    for events in results:
        for time, records in outputs(events):
            by_time.setdefault(time, []).extend(records)
    return {t: sorted(records) for t, records in sorted(by_time.items())}


def logger(events: list[Any]) -> Callable[[Hashable, list[Any]], None]:
    """An ``inspect_batch`` callback that logs ``(time, records)``."""
    return lambda time, records: events.append((time, list(records)))


# --------------------------------------------------------------------------- count


async def work_count_exchanged_to_one_worker(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        counted = stream.exchange(lambda _r: 0).count().inspect_batch(logger(events))
        return handle, counted.probe()

    handle, probe = worker.dataflow(build)
    plan = {t: [[(worker.index, t, i) for i in range(t + 1)]] for t in (0, 1, 3)}
    await drive(worker, [handle], probe, events, [plan], 4)
    return events


@WORKERS
async def test_count_exchanged_to_one_worker(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    # Every worker sends t + 1 records at times 0, 1 and 3 (none at 2). Exchanged to one
    # worker, the counts are global: one result per time that had records.
    results = await clusters.run(layout, work_count_exchanged_to_one_worker)
    assert results[0] == [
        (0, [workers]),
        ("round", 0),
        (1, [2 * workers]),
        ("round", 1),
        ("round", 2),
        (3, [4 * workers]),
        ("round", 3),
    ]
    for events in results[1:]:
        assert outputs(events) == []


async def work_count_is_per_worker(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.count().inspect_batch(logger(events)).probe()

    handle, probe = worker.dataflow(build)
    plan = {0: [list(range(worker.index + 1)), [99]], 1: [list(range(10))]}
    await drive(worker, [handle], probe, events, [plan], 2)
    return events


@WORKERS
async def test_count_is_per_worker(layout: Layout, clusters: Clusters) -> None:
    # Without an exchange each worker counts its own records.
    results = await clusters.run(layout, work_count_is_per_worker)
    for index, events in enumerate(results):
        assert events == [(0, [index + 2]), ("round", 0), (1, [10]), ("round", 1)]


# --------------------------------------------------------------------------- accumulate


async def work_accumulate_sums_per_time(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        summed = (
            stream.exchange(lambda _r: 0)
            .accumulate(lambda: (0, 0), lambda acc, rs: (acc[0] + sum(rs), acc[1] + 1))
            .map(lambda acc: acc[0])
            .inspect_batch(logger(events))
        )
        return handle, summed.probe()

    handle, probe = worker.dataflow(build)
    w = worker.index
    plan = {0: [[1, 2, 3], [w]], 2: [[10 * w + 5]]}
    await drive(worker, [handle], probe, events, [plan], 3)
    return events


@WORKERS
async def test_accumulate_sums_per_time(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    results = await clusters.run(layout, work_accumulate_sums_per_time)
    indexes = range(workers)
    assert results[0] == [
        (0, [6 * workers + sum(indexes)]),
        ("round", 0),
        ("round", 1),
        (2, [sum(10 * w + 5 for w in indexes)]),
        ("round", 2),
    ]
    for events in results[1:]:
        assert outputs(events) == []


# --------------------------------------------------------------------------- aggregate


WORDS = {0: ["a", "b", "a", "c", "a"], 1: ["b", "b", "d"], 2: []}


async def work_aggregate_per_key_per_time(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        counted = stream.aggregate(
            lambda word: word, lambda acc, _w: acc + 1, lambda k, n: (k, n), int
        ).inspect_batch(logger(events))
        return handle, counted.probe()

    handle, probe = worker.dataflow(build)
    # Every worker sends the same words: each count is ``workers`` times the local one.
    plan = {t: [list(ws)] for t, ws in WORDS.items() if ws}
    await drive(worker, [handle], probe, events, [plan], 3)
    return events


@WORKERS
async def test_aggregate_per_key_per_time(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    results = await clusters.run(layout, work_aggregate_per_key_per_time)
    n = workers
    assert merged(results) == {
        0: [("a", 3 * n), ("b", n), ("c", n)],
        1: [("b", 2 * n), ("d", n)],
    }
    # Each key was folded on exactly the worker it hashes to, once per time.
    for index, events in enumerate(results):
        for _time, pairs in outputs(events):
            assert all(stable_hash(k) % workers == index for k, _ in pairs)
    if workers == 3:
        assert sum(1 for events in results if outputs(events)) > 1  # keys really spread
    # Results for time t come out in round t, not later.
    for events in results:
        for position, event in enumerate(events):
            if event[0] != "round":
                assert ("round", event[0]) in events[position:]
                assert ("round", event[0] - 1) not in events[position:]


# --------------------------------------------------------------------------- delay


def _delay_by(record: Any, time: Hashable) -> Hashable:
    assert isinstance(time, int)
    return time + record[1] % 3


async def work_delay_releases_records_at_new_times_once_complete(worker: Worker) -> list[Any]:
    events: list[Any] = []
    violations: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        seen = stream.probe()  # the input frontier, as the delay sees it

        def check(time: Hashable, records: list[Any]) -> None:
            frontier = seen.frontier()
            if any(less_equal(f, time) for f in frontier):
                violations.append((time, list(frontier)))
            events.append((time, list(records)))

        delayed = stream.delay(_delay_by).inspect_batch(check)
        return handle, seen, delayed.probe()

    handle, seen, probe = worker.dataflow(build)
    w = worker.index
    plan = {
        0: [[(w, 0), (w, 1), (w, 2)], [(w, 3), (w, 4)]],
        1: [[(w, 5), (w, 6), (w, 7)]],
        3: [[(w, 9)]],
    }
    for t in range(5):
        for batch in plan.get(t, []):
            handle.send_batch(batch)
        handle.advance_to(t + 1)
        # Step one round at a time: a time may only have come out once the input
        # frontier is past it.
        while probe.less_than(t + 1):
            await worker.step()
            for time, _records in outputs(events):
                assert not seen.less_equal(time)
        events.append(("round", t))
    handle.close()
    await worker.step_while(lambda: not probe.done())
    assert violations == []
    return events


@WORKERS
async def test_delay_releases_records_at_new_times_once_complete(
    layout: Layout, clusters: Clusters
) -> None:
    results = await clusters.run(layout, work_delay_releases_records_at_new_times_once_complete)
    for w, events in enumerate(results):
        # r -> time + r % 3: 0->0, 1->1, 2->2, 3->0, 4->1 (sent at 0); 5->3, 6->1, 7->2
        # (sent at 1); 9->3 (sent at 3, held until 3 is complete).
        assert events == [
            (0, [(w, 0), (w, 3)]),
            ("round", 0),
            (1, [(w, 1), (w, 4), (w, 6)]),
            ("round", 1),
            (2, [(w, 2), (w, 7)]),
            ("round", 2),
            (3, [(w, 5), (w, 9)]),
            ("round", 3),
            ("round", 4),
        ]


async def work_delay_far_ahead_waits_for_its_time(worker: Worker) -> list[Any]:
    log: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        delayed = stream.delay(lambda r, t: t + r).inspect_batch(logger(log))
        return handle, delayed.probe()

    handle, probe = worker.dataflow(build)
    handle.send(7)
    for t in (1, 7, 20):
        handle.advance_to(t)
        await worker.step_while(lambda: probe.less_than(handle.time))
        log.append(list(probe.frontier()))
    handle.close()
    await worker.step_while(lambda: not probe.done())
    log.append(list(probe.frontier()))
    return log


@WORKERS
async def test_delay_far_ahead_waits_for_its_time(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    # A record moved far ahead comes out only once the input has passed its new time.
    results = await clusters.run(layout, work_delay_far_ahead_waits_for_its_time)
    assert results == [[[1], [7], (7, [7]), [20], []]] * workers


async def work_delay_to_an_earlier_time_is_an_error(worker: Worker) -> None:
    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.delay(lambda _r, _t: 1).probe()

    handle, probe = worker.dataflow(build)
    handle.advance_to(2)
    if worker.index == 0:
        handle.send("late")
    handle.advance_to(3)
    await worker.step_while(lambda: probe.less_than(3))


@WORKERS
async def test_delay_to_an_earlier_time_is_an_error(layout: Layout, clusters: Clusters) -> None:
    with pytest.raises(ValueError, match=r"time 2 to 1"):
        await clusters.run(layout, work_delay_to_an_earlier_time_is_an_error)


# --------------------------------------------------------------------------- join


JOIN_LEFT: Plan = {
    0: [[(1, "a"), (1, "b")], [(2, "c"), (4, "x")]],
    1: [[(1, "d")]],
    2: [[(5, "p")], [(5, "r"), (6, "s")]],
}
JOIN_RIGHT: Plan = {
    0: [[(1, "A"), (2, "B")], [(2, "C"), (3, "D")]],
    1: [[(1, "E"), (2, "F")]],
    2: [[(5, "Q")], [(6, "S"), (6, "T")]],
    3: [[(1, "G")]],
}


async def work_join_exact_pairs_per_time(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def build(scope: Any) -> Any:
        left, lstream = scope.new_input()
        right, rstream = scope.new_input()
        joined = lstream.join(rstream, lambda r: r[0], lambda r: r[0])
        return left, right, joined.inspect_batch(logger(events)).probe()

    left, right, probe = worker.dataflow(build)
    # The left side comes from worker 0, the right from the last worker: the join
    # exchanges both by key.
    plans: list[Plan] = [
        JOIN_LEFT if worker.index == 0 else {},
        JOIN_RIGHT if worker.index == worker.peers - 1 else {},
    ]
    await drive(worker, [left, right], probe, events, plans, 4)
    return events


@WORKERS
async def test_join_exact_pairs_per_time(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    results = await clusters.run(layout, work_join_exact_pairs_per_time)
    assert merged(results) == {
        # key 1: 2 x 1, key 2: 1 x 2 (cross products); 3 and 4 are on one side only.
        0: [
            ((1, "a"), (1, "A")),
            ((1, "b"), (1, "A")),
            ((2, "c"), (2, "B")),
            ((2, "c"), (2, "C")),
        ],
        # The left (2, "c") and right (1, "A") of time 0 do not meet time 1's records.
        1: [((1, "d"), (1, "E"))],
        2: [((5, "p"), (5, "Q")), ((5, "r"), (5, "Q")), ((6, "s"), (6, "S")), ((6, "s"), (6, "T"))],
        # (1, "G") at time 3 has no left partner at time 3.
    }
    # Each pair was produced on the worker its key hashes to, by the end of its round (it
    # may come earlier: pairs go out when both records are there, not when time completes).
    for index, events in enumerate(results):
        for _time, pairs in outputs(events):
            assert all(stable_hash(left[0]) % workers == index for left, _right in pairs)
        for position, event in enumerate(events):
            if event[0] != "round":
                assert ("round", event[0]) in events[position:]


async def work_join_emits_before_the_time_completes(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def build(scope: Any) -> Any:
        left, lstream = scope.new_input()
        right, rstream = scope.new_input()
        # Every key is 0, joined on worker 0 (0 hashes to itself), which logs the pairs
        # and waits for them: on every layout, no worker's output is another's to see.
        joined = lstream.join(rstream, lambda r: r % 10 - 1, lambda r: r % 10 - 1)
        return left, right, joined.inspect_batch(logger(events)).probe()

    left, right, probe = worker.dataflow(build)
    if worker.index != 0:
        left.close()
        right.close()
        return []
    left.send_batch([11, 21])
    await settle(worker)
    assert events == []
    right.send_batch([101])
    await until(worker, lambda: len(events) == 1)
    left.send_batch([31])
    await until(worker, lambda: len(events) == 2)
    right.send_batch([201, 301])
    await until(worker, lambda: len(events) == 3)
    log = [*events, ("open", probe.less_equal(0))]
    left.close()
    right.close()
    return log


@WORKERS
async def test_join_emits_before_the_time_completes(layout: Layout, clusters: Clusters) -> None:
    # Pairs go out as soon as both records are there, in either arrival order, while
    # time 0 is still open. All records have one key; worker 0 sends them all.

    results = await clusters.run(layout, work_join_emits_before_the_time_completes)
    assert results[0] == [
        (0, [(11, 101), (21, 101)]),
        (0, [(31, 101)]),
        (0, [(11, 201), (21, 201), (31, 201), (11, 301), (21, 301), (31, 301)]),
        ("open", True),
    ]


# --------------------------------------------------------------------------- unary


def constructor_unary_with_input_capabilities(capability: Capability, _core: OperatorCore) -> Any:
    capability.drop()

    def logic(input: InputPort, output: OutputPort) -> None:
        for cap, records in input:
            output.give_batch(cap.retain(), [2 * r for r in records])
            later = cap.delayed(cap.time + 1)
            output.give_batch(later, [("later", r) for r in records])
            later.drop()

    return logic


async def work_unary_with_input_capabilities(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        out = stream.unary(constructor_unary_with_input_capabilities, "Double").inspect_batch(
            logger(events)
        )
        return handle, out.probe()

    handle, probe = worker.dataflow(build)
    w = worker.index
    plan = {0: [[w, 10 + w]], 2: [[20 + w]]}
    await drive(worker, [handle], probe, events, [plan], 3)
    return events


@WORKERS
async def test_unary_with_input_capabilities(layout: Layout, clusters: Clusters) -> None:
    # Doubles records at their own time (retain) and sends a copy one time later (delayed).
    results = await clusters.run(layout, work_unary_with_input_capabilities)
    for w, events in enumerate(results):
        assert events == [
            (0, [2 * w, 20 + 2 * w]),
            (1, [("later", w), ("later", 10 + w)]),
            ("round", 0),
            ("round", 1),
            (2, [40 + 2 * w]),
            (3, [("later", 20 + w)]),
            ("round", 2),
        ]


async def work_input_capability_cannot_go_back_in_time(worker: Worker) -> list[str]:
    errors: list[str] = []

    def constructor(capability: Capability, _core: OperatorCore) -> Any:
        capability.drop()

        def logic(input: InputPort, output: OutputPort) -> None:
            for cap, records in input:
                try:
                    cap.delayed(cap.time - 1)
                except CapabilityError as error:
                    errors.append(str(error))
                output.give_batch(cap.retain(), records)

        return logic

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.unary(constructor).probe()

    handle, probe = worker.dataflow(build)
    handle.advance_to(4)
    if worker.index == 0:
        handle.send(1)
    handle.advance_to(5)
    await worker.step_while(lambda: probe.less_than(5))
    return errors


@WORKERS
async def test_input_capability_cannot_go_back_in_time(layout: Layout, clusters: Clusters) -> None:
    errors = [
        error
        for found in await clusters.run(layout, work_input_capability_cannot_go_back_in_time)
        for error in found
    ]
    assert len(errors) == 1
    assert "at 4" in errors[0]
    assert "at 3" in errors[0]


# --------------------------------------------------------------------------- unary_frontier


def _sum_per_time(capability: Capability, _core: OperatorCore) -> Any:
    capability.drop()
    stash: dict[Hashable, tuple[Capability, int]] = {}

    def logic(input: InputPort, output: OutputPort) -> None:
        for cap, records in input:
            held = stash.get(cap.time)
            if held is None:
                stash[cap.time] = (cap.retain(), sum(records))
            else:
                stash[cap.time] = (held[0], held[1] + sum(records))
        for time in sorted(t for t in stash if not input.frontier.less_equal(t)):  # type: ignore[type-var]
            held_capability, total = stash.pop(time)
            output.give_batch(held_capability, [total])
            held_capability.drop()

    return logic


async def work_unary_frontier_sums_when_complete(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        summed = stream.unary_frontier(_sum_per_time, exchange=lambda _r: 0)
        return handle, summed.inspect_batch(logger(events)).probe()

    handle, probe = worker.dataflow(build)
    w = worker.index
    plan = {0: [[1, 2], [w]], 1: [[100]], 3: [[w, w]]}
    await drive(worker, [handle], probe, events, [plan], 4)
    return events


@WORKERS
async def test_unary_frontier_sums_when_complete(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    results = await clusters.run(layout, work_unary_frontier_sums_when_complete)
    n = workers
    indexes = range(n)
    assert results[0] == [
        (0, [3 * n + sum(indexes)]),
        ("round", 0),
        (1, [100 * n]),
        ("round", 1),
        ("round", 2),
        (3, [2 * sum(indexes)]),
        ("round", 3),
    ]
    for events in results[1:]:
        assert outputs(events) == []


# --------------------------------------------------------------------------- binary_frontier


def _union_count(capability: Capability, _core: OperatorCore) -> Any:
    capability.drop()
    stash: dict[Hashable, tuple[Capability, int]] = {}

    def logic(first: InputPort, second: InputPort, output: OutputPort) -> None:
        for port in (first, second):
            for cap, records in port:
                held = stash.get(cap.time)
                if held is None:
                    stash[cap.time] = (cap.retain(), len(records))
                else:
                    stash[cap.time] = (held[0], held[1] + len(records))
        ready = [
            t
            for t in stash
            if not first.frontier.less_equal(t) and not second.frontier.less_equal(t)
        ]
        for time in sorted(ready):  # type: ignore[type-var]
            held_capability, total = stash.pop(time)
            output.give_batch(held_capability, [(time, total)])
            held_capability.drop()

    return logic


async def work_binary_frontier_union_count(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def build(scope: Any) -> Any:
        left, lstream = scope.new_input()
        right, rstream = scope.new_input()
        counted = lstream.binary_frontier(
            rstream,
            _union_count,
            exchange_left=lambda _r: 0,
            exchange_right=lambda _r: 0,
        )
        return left, right, counted.inspect_batch(logger(events)).probe()

    left, right, probe = worker.dataflow(build)
    left_plan: Plan = {0: [["a", "b"]], 2: [["c"]]}
    right_plan: Plan = {0: [["x"]], 1: [["y", "z"], ["w"]]}
    await drive(worker, [left, right], probe, events, [left_plan, right_plan], 3)
    return events


@WORKERS
async def test_binary_frontier_union_count(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    results = await clusters.run(layout, work_binary_frontier_union_count)
    n = workers
    assert results[0] == [
        (0, [(0, 3 * n)]),
        ("round", 0),
        (1, [(1, 3 * n)]),
        ("round", 1),
        (2, [(2, n)]),
        ("round", 2),
    ]
    for events in results[1:]:
        assert outputs(events) == []


async def work_binary_frontier_waits_for_both_inputs(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def build(scope: Any) -> Any:
        left, lstream = scope.new_input()
        right, rstream = scope.new_input()
        counted = lstream.binary_frontier(rstream, _union_count)
        return left, right, counted.inspect_batch(logger(events)).probe()

    left, right, probe = worker.dataflow(build)
    left.send_batch([1, 2])
    left.advance_to(5)
    await settle(worker)
    events.append(("frontier", list(probe.frontier())))
    right.send_batch([3])
    right.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))
    events.append(("frontier", list(probe.frontier())))
    left.close()
    right.close()
    return events


@WORKERS
async def test_binary_frontier_waits_for_both_inputs(layout: Layout, clusters: Clusters) -> None:
    # The right input stays at 0 while the left advances: nothing is complete.
    results = await clusters.run(layout, work_binary_frontier_waits_for_both_inputs)
    for events in results:
        assert events == [("frontier", [0]), (0, [(0, 3)]), ("frontier", [1])]


# --------------------------------------------------------------------------- unary_notify


async def work_unary_notify_in_time_order_with_counts(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def logic(input: InputPort, output: OutputPort, notificator: Notificator) -> None:
        for cap, _records in input:
            notificator.notify_at(cap.retain())
        for cap, count in notificator:
            # Only once no input frontier element is <= the time.
            assert not input.frontier.less_equal(cap.time)
            output.give_batch(cap, [(cap.time, count)])
            cap.drop()

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        notified = stream.unary_notify(logic, notify=[5, 2])
        return handle, notified.inspect_batch(logger(events)).probe()

    handle, probe = worker.dataflow(build)
    # One request per batch: two at 0, one at 1, three at 3, one at 5 (plus the
    # initial ones at 2 and 5).
    plan = {0: [[1], [2, 3]], 1: [[4]], 3: [[5], [6], [7]], 5: [[8, 9]]}
    await drive(worker, [handle], probe, events, [plan], 7)
    return events


@WORKERS
async def test_unary_notify_in_time_order_with_counts(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, work_unary_notify_in_time_order_with_counts)
    for events in results:
        assert events == [
            (0, [(0, 2)]),
            ("round", 0),
            (1, [(1, 1)]),
            ("round", 1),
            (2, [(2, 1)]),
            ("round", 2),
            (3, [(3, 3)]),
            ("round", 3),
            ("round", 4),
            (5, [(5, 2)]),
            ("round", 5),
            ("round", 6),
        ]


async def work_unary_notify_initial_time_released_on_close(worker: Worker) -> list[Any]:
    events: list[Any] = []

    def logic(input: InputPort, output: OutputPort, notificator: Notificator) -> None:
        for cap, _records in input:
            notificator.notify_at(cap.retain())
        for cap, count in notificator:
            output.give_batch(cap, [(cap.time, count)])
            cap.drop()

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        notified = stream.unary_notify(logic, notify=[9, 4, 7])
        return handle, notified.inspect_batch(logger(events)).probe()

    handle, probe = worker.dataflow(build)
    handle.advance_to(3)
    await worker.step_while(lambda: probe.less_than(3))
    events.append(("frontier", list(probe.frontier())))
    handle.close()
    await worker.step_while(lambda: not probe.done())
    return events


@WORKERS
async def test_unary_notify_initial_time_released_on_close(
    layout: Layout, clusters: Clusters
) -> None:
    # With no data at all, the initial notification comes once the input closes, and
    # several ready times come out in one schedule in time order.
    results = await clusters.run(layout, work_unary_notify_initial_time_released_on_close)
    for events in results:
        assert events == [("frontier", [3]), (4, [(4, 1)]), (7, [(7, 1)]), (9, [(9, 1)])]


# --------------------------------------------------------------------------- probe


async def work_probe_queries_across_advances_and_close(worker: Worker) -> list[Any]:
    log: list[Any] = []

    def snapshot(probe: Any, time: int) -> tuple[Any, ...]:
        return (
            probe.frontier(),
            probe.less_than(time),
            probe.less_equal(time),
            probe.less_than(time + 1),
            probe.less_equal(time - 1) if time > 0 else None,
            probe.done(),
        )

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.probe()

    handle, probe = worker.dataflow(build)
    log.append(snapshot(probe, 0))  # before any step: conservatively at the minimum
    for t in (3, 4, 10):
        handle.advance_to(t)
        await worker.step_while(lambda: probe.less_than(handle.time))
        log.append(snapshot(probe, t))
    handle.close()
    await worker.step_while(lambda: not probe.done())
    log.append(snapshot(probe, 10))
    return log


@WORKERS
async def test_probe_queries_across_advances_and_close(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, work_probe_queries_across_advances_and_close)
    for log in results:
        assert log == [
            (Antichain([0]), False, True, True, None, False),
            (Antichain([3]), False, True, True, False, False),
            (Antichain([4]), False, True, True, False, False),
            (Antichain([10]), False, True, True, False, False),
            (Antichain(), False, False, False, False, True),
        ]


async def work_probe_changes_sequence(worker: Worker) -> list[list[Hashable]]:
    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.probe()

    # Every worker advances only once it has seen the frontier reach its own input's time,
    # so no frontier can pass before every worker saw it: the sequence is exact everywhere,
    # whichever worker's progress arrives first (across processes, a worker that only
    # watched could see [0] and then [2], both updates having arrived in one step).
    handle, probe = worker.dataflow(build)
    seen: list[list[Hashable]] = []
    async for frontier in probe.changes():
        seen.append(list(frontier))
        if frontier == Antichain([0]):
            handle.advance_to(1)
        elif frontier == Antichain([1]):
            handle.advance_to(2)
        elif frontier == Antichain([2]):
            handle.close()
    return seen


@WORKERS
async def test_probe_changes_sequence(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    results = await clusters.run(layout, work_probe_changes_sequence)
    assert results == [[[0], [1], [2], []]] * workers
