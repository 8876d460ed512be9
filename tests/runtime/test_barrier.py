"""``Barrier``: no worker passes a round before every worker has arrived at it.

Workers arrive after different, seeded random delays; each logs ``(event, worker, round)``
for its arrivals and passes, stamped with the system-wide monotonic clock, and the logs
merged in stamp order give the order they happened in, within one process or across
processes of one machine (a pass is caused by every arrival, through the dataflow, so it is
stamped later). While they wait, a second dataflow on the same workers (an exchange and a
count per time, fed before each arrival) must keep making progress: during the rounds the
workers step only inside ``wait()``.

Every test runs on one process and across processes (``tests/runtime/fabrics.py``: 3x1,
and 2x2 for the tests of two or four workers), as module-level programs with the same exact
expected values; progress delivered late and interleaved runs on ``ReorderingFabric`` in
one process and on ``ReorderingClusterFabric`` across processes.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import Counter
from collections.abc import Hashable
from functools import partial
from itertools import pairwise
from typing import Any

import pytest

from operators import Barrier, InputClosed
from operators.runtime import Worker, execute
from tests.runtime.fabrics import Clusters, Layout, layouts
from tests.runtime.harness import (
    ReorderingClusterFabric,
    ReorderingFabric,
    check_cluster_delivery,
    within,
)

ROUNDS = 100

Log = list[tuple[str, int, int]]


def check_log(log: Log, peers: int, rounds: int) -> None:
    """Every "passed r" comes after every worker's "arrived r"; everyone passed every round."""
    arrived: dict[int, list[int]] = {}
    passed: dict[int, list[int]] = {}
    for position, (event, _worker, round_) in enumerate(log):
        (arrived if event == "arrived" else passed).setdefault(round_, []).append(position)
    assert sorted(arrived) == sorted(passed) == list(range(1, rounds + 1))
    for round_ in range(1, rounds + 1):
        assert len(arrived[round_]) == len(passed[round_]) == peers
        assert max(arrived[round_]) < min(passed[round_]), f"round {round_} passed early"
    for worker in range(peers):
        mine = [(e, r) for e, w, r in log if w == worker]
        assert mine == [(e, r) for r in range(1, rounds + 1) for e in ("arrived", "passed")]


_ORDER = itertools.count()
"""Ties of the clock within one process: the order of events there."""


def stamp() -> tuple[int, int]:
    """When an event happens: the system-wide monotonic clock (every process of one machine
    reads the same one; a pass is caused by every arrival, through the dataflow, so it is
    later), then the order within this process."""
    return time.monotonic_ns(), next(_ORDER)


async def rounds_program(worker: Worker, seed: int, rounds: int) -> tuple[Any, ...]:
    """Arrive at ``rounds`` rounds after random delays, feeding another dataflow meanwhile."""
    log: list[tuple[tuple[int, int], str, int, int]] = []
    rng = random.Random(f"{seed}/{worker.index}")
    counted: list[tuple[Hashable, int]] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input("Counter")
        counts = stream.exchange(lambda r: r).count()
        return handle, counts.inspect_batch(lambda t, r: counted.append((t, sum(r)))).probe()

    counter, counter_probe = worker.dataflow(build)
    barrier = Barrier(worker)
    assert barrier.reached()
    frontiers: list[Any] = []
    for round_ in range(1, rounds + 1):
        delay = rng.choice([0.0, 0.0, 0.0, 1e-4, 3e-4 * worker.index])
        await asyncio.sleep(delay)
        counter.send_batch(range(worker.index + 1))
        counter.advance_to(round_)
        log.append((stamp(), "arrived", worker.index, round_))
        await barrier.wait()
        log.append((stamp(), "passed", worker.index, round_))
        assert barrier.round == round_
        assert barrier.reached()
        frontiers.append(counter_probe.frontier())
    # Until here this worker stepped only inside ``wait()``.
    during_waits = list(counted)
    counter.close()
    await worker.step_while(lambda: not counter_probe.done())
    return log, counted, during_waits, frontiers


def check_rounds(results: list[Any], peers: int, rounds: int) -> Log:
    """The other dataflow's counts and progress; every worker's events in the order they
    happened (by :func:`stamp`)."""
    # The other dataflow completed every time, with every worker's records (each worker
    # counts the records exchanged to it) ...
    totals: Counter[Hashable] = Counter()
    for _, counted, _, _ in results:
        for t, n in counted:
            totals[t] += n
    assert sorted(totals.items()) == [(t, peers * (peers + 1) // 2) for t in range(rounds)]
    for _, counted, during_waits, frontiers in results:
        assert len({t for t, _ in counted}) == len(counted)
        # ... and it made progress while the workers were waiting at the barrier.
        assert len(during_waits) >= rounds // 2, (len(during_waits), rounds)
        assert all(a.dominates(b) for a, b in pairwise(frontiers))
    events = sorted(event for log, _, _, _ in results for event in log)
    return [(event, worker, round_) for _, event, worker, round_ in events]


@pytest.mark.parametrize("layout", layouts(1, 2, 3, 4))
async def test_no_worker_passes_a_round_before_all_arrived(
    layout: Layout, clusters: Clusters
) -> None:
    peers = layout.peers
    results = await clusters.run(layout, rounds_program, peers, ROUNDS)
    check_log(check_rounds(results, peers, ROUNDS), peers, ROUNDS)


@pytest.mark.parametrize("peers", [2, 3])
async def test_barrier_with_progress_delivered_late_and_interleaved(peers: int) -> None:
    for seed in range(5):
        async with ReorderingFabric(peers, random.Random(seed)) as fabric:

            async def work(worker: Worker, seed: int = seed) -> Any:
                return await rounds_program(worker, seed, 20)

            results = await within(execute(work, workers=peers, fabric=fabric), 10)
        fabric.check()
        check_log(check_rounds(results, peers, 20), peers, 20)


@pytest.mark.parametrize("layout", [Layout(3, 1), Layout(2, 2)], ids=str)
async def test_barrier_across_processes_with_progress_late_and_interleaved(
    layout: Layout, clusters: Clusters
) -> None:
    """Each process delivers progress (its own workers' and the others') late and
    interleaved, FIFO per sender (``ReorderingClusterFabric``)."""
    for seed in range(3):
        fabric = partial(ReorderingClusterFabric, seed=seed)
        results, summaries = await clusters.run_on_fabric(layout, fabric, rounds_program, seed, 20)
        check_cluster_delivery(summaries, layout.peers)
        check_log(check_rounds(results, layout.peers, 20), layout.peers, 20)


async def advance_then_reached(worker: Worker) -> list[bool]:
    barrier = Barrier(worker)
    seen = [barrier.reached()]
    barrier.advance()
    # The arrival is heard only through the dataflow, once the worker steps.
    seen.append(barrier.reached())
    await worker.step_while(lambda: not barrier.reached())
    seen.append(barrier.reached())
    await barrier.wait()
    seen.append(barrier.round == 2)
    return seen


@pytest.mark.parametrize("layout", layouts(1, 3))
async def test_advance_does_not_block_and_reached_needs_steps(
    layout: Layout, clusters: Clusters
) -> None:
    results = await clusters.run(layout, advance_then_reached)
    assert results == [[True, False, True, True]] * layout.peers


async def leave_early(worker: Worker) -> int:
    barrier = Barrier(worker)
    for _ in range(3 if worker.index == 0 else 10):
        await barrier.wait()
    return barrier.round


@pytest.mark.parametrize("layout", layouts(3))
async def test_a_finished_worker_no_longer_holds_the_others(
    layout: Layout, clusters: Clusters
) -> None:
    # Worker 0 leaves after 3 rounds: its ``fn`` returns, ``on_finish`` closes its barrier,
    # and the others pass the later rounds without it.
    assert await clusters.run(layout, leave_early) == [3, 10, 10]


async def close_twice(worker: Worker) -> bool:
    barrier = Barrier(worker)
    await barrier.wait()
    barrier.close()
    barrier.close()
    with pytest.raises(InputClosed):
        barrier.advance()
    return barrier.reached()


@pytest.mark.parametrize("layout", layouts(2, 4))
async def test_closed_barrier_cannot_advance(layout: Layout, clusters: Clusters) -> None:
    assert await clusters.run(layout, close_twice) == [True] * layout.peers
