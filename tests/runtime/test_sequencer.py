"""``Sequencer``: every worker reads every pushed item, all in one and the same order.

The order must be the sort by ``(time, sender, sequence)`` whatever the scheduling: random
``asyncio.sleep(0)`` and step interleavings between pushes, workers closing at different
moments, progress delivered late and interleaved by a :class:`ReorderingFabric`. Clocks are
injected: one shared by the workers that advances only every few readings, and one per
worker that stays at its phase until a barrier, so that every worker pushes at the same
clock reading and the sender decides the order.

The tests with several workers run on one process and across processes
(``tests/runtime/fabrics.py``: 2x2, and 3x1 for three workers) as module-level programs with
the same exact expected values; a clock passed to a program is shared by the workers of one
process (each process unpickles its own copy), and late, interleaved progress across
processes runs on ``ReorderingClusterFabric``. One test stays in one process, saying why.
"""

from __future__ import annotations

import asyncio
import random
from functools import partial
from typing import Any

import pytest

from operators import Barrier, InputClosed, Sequencer
from operators.runtime import Fabric, Worker, execute
from operators.sync import Clock, Sequenced
from tests.runtime.fabrics import Clusters, Layout, layouts
from tests.runtime.harness import (
    ReorderingClusterFabric,
    ReorderingFabric,
    check_cluster_delivery,
    within,
)

PUSHES = 25


class SteppedClock:
    """A clock shared by every worker that advances only every ``every`` readings."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls // self.every


async def sequencing(
    worker: Worker, seed: int, clock: Clock | None, pushes: int = PUSHES
) -> tuple[list[Any], list[Sequenced[Any]]]:
    """Push ``(worker, i)`` for ``i < pushes`` at random moments, then close.

    Returns the items this worker read in order, and the entries (with their keys) of those
    it read through ``next_entry()`` (every item, on even workers).
    """
    rng = random.Random(f"{seed}/{worker.index}")
    sequencer: Sequencer[Any] = Sequencer(worker, clock)
    entries: list[Sequenced[Any]] = []
    assert sequencer.next() is None

    def take() -> None:
        while (entry := sequencer.next_entry()) is not None:
            entries.append(entry)

    for i in range(pushes):
        sequencer.push((worker.index, i))
        # Several pushes in a row often go out in one run of the source, at one time.
        # (``worker.step()`` would park an idle worker: run a round only if there is one.)
        for _ in range(rng.choice([0, 0, 0, 1, 2, 3])):
            if rng.random() < 0.5:
                worker.step_nowait()
            await asyncio.sleep(0)
        take()
    sequencer.close()
    with pytest.raises(InputClosed, match="sequencer is closed"):
        sequencer.push("late")
    if worker.index % 2 == 0:
        while not sequencer.done():
            take()
            await worker.step()
        take()
        return [entry.item for entry in entries], entries
    rest = [item async for item in sequencer]
    return [entry.item for entry in entries] + rest, []


async def run_sequencing(
    peers: int, seed: int, clock: Clock | None, fabric: Fabric | None = None
) -> list[tuple[list[Any], list[Sequenced[Any]]]]:
    """:func:`sequencing` on ``peers`` workers of one process (on ``fabric``)."""

    async def work(worker: Worker) -> tuple[list[Any], list[Sequenced[Any]]]:
        return await sequencing(worker, seed, clock)

    return await within(execute(work, workers=peers, fabric=fabric), 5)


def check_order(results: list[tuple[list[Any], list[Sequenced[Any]]]], peers: int) -> None:
    """All workers read the same complete sequence, sorted by ``(time, sender, sequence)``."""
    first = results[0][0]
    assert sorted(first) == [(w, i) for w in range(peers) for i in range(PUSHES)]
    for items, _ in results:
        assert items == first
    entries = results[0][1]
    assert [entry.item for entry in entries] == first
    keys = [(e.time, e.sender, e.sequence) for e in entries]
    assert keys == sorted(keys)
    assert all(e.item == (e.sender, e.sequence) for e in entries)


@pytest.mark.parametrize("layout", layouts(1, 2, 4))
async def test_same_order_everywhere(layout: Layout, clusters: Clusters) -> None:
    """One clock for the workers of a process (across processes, one per process)."""
    for seed in range(8):
        results = await clusters.run(layout, sequencing, seed, SteppedClock(every=4))
        check_order(results, layout.peers)


@pytest.mark.parametrize("peers", [2, 4])
async def test_same_order_with_progress_late_and_interleaved(peers: int) -> None:
    for seed in range(8):
        async with ReorderingFabric(peers, random.Random(seed)) as fabric:
            results = await run_sequencing(peers, seed, SteppedClock(every=4), fabric)
        fabric.check()
        check_order(results, peers)


@pytest.mark.parametrize("layout", [Layout(3, 1), Layout(2, 2)], ids=str)
async def test_same_order_across_processes_with_progress_late_and_interleaved(
    layout: Layout, clusters: Clusters
) -> None:
    """Each process delivers progress late and interleaved (``ReorderingClusterFabric``)."""
    for seed in range(4):
        fabric = partial(ReorderingClusterFabric, seed=seed)
        results, summaries = await clusters.run_on_fabric(
            layout, fabric, sequencing, seed, SteppedClock(every=4)
        )
        check_cluster_delivery(summaries, layout.peers)
        check_order(results, layout.peers)


PHASES = 5


async def phases_program(worker: Worker, seed: int) -> list[Sequenced[Any]]:
    """Push ``PUSHES // PHASES`` items per phase, at one clock reading.

    Each worker's clock reads its current phase, and moves on only after a barrier that
    every worker reaches once its pushes of the phase are sent: every phase's items share
    one time, from every sender, and are held until the phase ends everywhere.
    """
    per_phase = PUSHES // PHASES
    rng = random.Random(f"phases/{seed}/{worker.index}")
    phase = [0]
    sequencer: Sequencer[Any] = Sequencer(worker, lambda: phase[0])
    barrier = Barrier(worker)
    entries: list[Sequenced[Any]] = []
    for phase[0] in range(PHASES):
        for i in range(phase[0] * per_phase, (phase[0] + 1) * per_phase):
            sequencer.push((worker.index, i))
            for _ in range(rng.choice([0, 1, 2])):
                if rng.random() < 0.5:
                    worker.step_nowait()
                await asyncio.sleep(0)
        await barrier.wait()
        while (entry := sequencer.next_entry()) is not None:
            entries.append(entry)
    phase[0] = PHASES
    sequencer.close()
    while not sequencer.done():
        await worker.step()
        while (entry := sequencer.next_entry()) is not None:
            entries.append(entry)
    return entries


def phases_expected(peers: int) -> list[Sequenced[Any]]:
    per_phase = PUSHES // PHASES
    return [
        Sequenced(i // per_phase, w, i, (w, i))
        for phase in range(PHASES)
        for w in range(peers)
        for i in range(phase * per_phase, (phase + 1) * per_phase)
    ]


@pytest.mark.parametrize("layout", layouts(2, 4))
async def test_pushes_at_one_clock_reading_are_ordered_by_sender(
    layout: Layout, clusters: Clusters
) -> None:
    expected = phases_expected(layout.peers)
    for seed in range(4):
        assert await clusters.run(layout, phases_program, seed) == [expected] * layout.peers


@pytest.mark.parametrize("peers", [2, 4])
async def test_pushes_at_one_clock_reading_with_progress_late_and_interleaved(
    peers: int,
) -> None:
    # The sources spin while their clocks are stuck (catch-up): fewer, costlier runs here.
    for seed in range(2):
        async with ReorderingFabric(peers, random.Random(seed)) as fabric:

            async def work(worker: Worker, seed: int = seed) -> list[Sequenced[Any]]:
                return await phases_program(worker, seed)

            results = await within(execute(work, workers=peers, fabric=fabric), 5)
        fabric.check()
        assert results == [phases_expected(peers)] * peers


@pytest.mark.parametrize("layout", layouts(4))
async def test_default_clock(layout: Layout, clusters: Clusters) -> None:
    for seed in range(3):
        check_order(await clusters.run(layout, sequencing, seed, None), layout.peers)


async def read_until_complete(worker: Worker, clock: SteppedClock) -> list[Any]:
    peers = worker.peers
    sequencer: Sequencer[str] = Sequencer(worker, clock)
    assert sequencer.next() is None
    sequencer.push(f"w{worker.index}")
    assert sequencer.next() is None  # nothing moves before the worker steps
    seen: list[Any] = []
    while len(seen) < peers:
        item = sequencer.next()
        if item is None:
            await worker.step()
        else:
            seen.append(item)
    assert sequencer.next() is None
    assert not sequencer.done()  # open: someone may still push
    sequencer.close()
    assert [item async for item in sequencer] == []
    assert sequencer.done()
    return seen


@pytest.mark.parametrize("layout", layouts(1, 2, 4))
async def test_next_is_none_until_the_time_is_complete(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, read_until_complete, SteppedClock(every=1))
    assert all(seen == results[0] for seen in results)
    assert sorted(results[0]) == [f"w{w}" for w in range(layout.peers)]


async def idle_clock_calls(worker: Worker) -> int:
    """Clock readings once the worker went idle (a clock of its own).

    A barrier holds every worker until all have measured: a worker that finished first would
    otherwise tear its dataflows down, and the progress that sends is work for the others
    (across processes it can arrive in the middle of their measurement). The barrier's own
    progress may be work for a worker while it measures, so what is measured is the
    sequencer's clock: a source that spins reads it every step.
    """
    barrier = Barrier(worker)
    clock = SteppedClock(every=3)
    sequencer: Sequencer[int] = Sequencer(worker, clock)
    sequencer.push(worker.index)
    seen = 0
    while seen < worker.peers:
        if sequencer.next() is None:
            await worker.step()
        else:
            seen += 1
    # Idle means nothing to do for 10 steps 5 ms apart: across processes, the other side's
    # last progress may still be on the socket a few loop turns after this worker's work.
    idle = 0
    for _ in range(400):
        idle = 0 if worker.step_nowait() else idle + 1
        if idle == 10:
            break
        await asyncio.sleep(0.005)
    assert idle == 10, "the worker never went idle"
    calls = clock.calls
    for _ in range(10):
        worker.step_nowait()
        await asyncio.sleep(0.005)
    calls = clock.calls - calls
    await barrier.wait()
    return calls


@pytest.mark.parametrize("layout", layouts(1, 2, 4))
async def test_idle_sequencer_does_not_spin(layout: Layout, clusters: Clusters) -> None:
    # Once the pushed items are out, nothing is held: the source must stop re-activating
    # itself, so the workers go idle (``step_nowait`` has nothing to do) and stop reading
    # the clock.
    assert await clusters.run(layout, idle_clock_calls) == [0] * layout.peers


async def test_items_are_not_copied_and_may_be_any_object() -> None:
    """One process only: its point is that items reach the other workers as the very same
    objects, which only workers sharing one process's memory can. Across processes an item
    is pickled (and this one, a local class, cannot be)."""

    class Opaque:
        """Not serialisable, not hashable, not orderable."""

        __hash__ = None  # type: ignore[assignment]

    shared = Opaque()

    async def work(worker: Worker) -> list[Any]:
        sequencer: Sequencer[Any] = Sequencer(worker)
        if worker.index == 0:
            sequencer.push(shared)
            sequencer.push(shared)
            sequencer.push(None)
        sequencer.close()
        return [item async for item in sequencer]

    for items in await within(execute(work, workers=3)):
        assert len(items) == 3
        assert items[0] is shared and items[1] is shared and items[2] is None


async def closed_reader(worker: Worker, clock: SteppedClock) -> list[Any]:
    sequencer: Sequencer[Any] = Sequencer(worker, clock)
    if worker.index == 0:
        sequencer.close()
    else:
        for i in range(5):
            sequencer.push((worker.index, i))
            await worker.step()
        sequencer.close()
    return [item async for item in sequencer]


@pytest.mark.parametrize("layout", layouts(3))
async def test_a_worker_that_closed_still_reads_what_others_push(
    layout: Layout, clusters: Clusters
) -> None:
    results = await clusters.run(layout, closed_reader, SteppedClock(every=2))
    assert sorted(results[0]) == [(w, i) for w in (1, 2) for i in range(5)]
    assert results[1] == results[0] == results[2]


async def push_without_closing(worker: Worker) -> bool:
    sequencer: Sequencer[int] = Sequencer(worker)
    sequencer.push(worker.index)
    return sequencer.closed


@pytest.mark.parametrize("layout", layouts(2, 4))
async def test_on_finish_closes_the_sequencer(layout: Layout, clusters: Clusters) -> None:
    # ``fn`` returns without closing: the worker closes it and still finishes.
    assert await clusters.run(layout, push_without_closing) == [False] * layout.peers


async def push_from_another_task(worker: Worker) -> list[Any]:
    # The reader parks in ``async for`` (nothing to do); a push from another task must wake it.
    sequencer: Sequencer[int] = Sequencer(worker)
    seen: list[Any] = []

    async def produce() -> None:
        for i in range(5):
            for _ in range(worker.index + 2):
                await asyncio.sleep(0)
            sequencer.push(worker.index * 10 + i)
        sequencer.close()

    async def consume() -> None:
        seen.extend([item async for item in sequencer])

    async with asyncio.TaskGroup() as group:
        group.create_task(consume())
        group.create_task(produce())
    return seen


@pytest.mark.parametrize("layout", layouts(3))
async def test_push_from_another_task_wakes_a_parked_reader(
    layout: Layout, clusters: Clusters
) -> None:
    results = await clusters.run(layout, push_from_another_task)
    assert sorted(results[0]) == [w * 10 + i for w in range(3) for i in range(5)]
    assert results[1] == results[0] == results[2]
