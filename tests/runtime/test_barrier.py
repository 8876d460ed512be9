"""``Barrier``: no worker passes a round before every worker has arrived at it.

Workers arrive after different, seeded random delays; a shared log of ``(event, worker,
round)`` records arrivals and passes in the order they happen on the one event loop. While
they wait, a second dataflow on the same workers (an exchange and a count per time, fed
before each arrival) must keep making progress: during the rounds the workers step only
inside ``wait()``.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Hashable
from itertools import pairwise
from typing import Any

import pytest

from operators import Barrier, InputClosed
from service.runtime import Fabric, Worker, execute
from tests.runtime.harness import ReorderingFabric, within

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


async def run_rounds(
    peers: int, seed: int, fabric: Fabric | None = None, rounds: int = ROUNDS
) -> tuple[Log, list[Any]]:
    log: Log = []

    async def work(worker: Worker) -> tuple[list[Any], list[Any], list[Any]]:
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
            log.append(("arrived", worker.index, round_))
            await barrier.wait()
            log.append(("passed", worker.index, round_))
            assert barrier.round == round_
            assert barrier.reached()
            frontiers.append(counter_probe.frontier())
        # Until here this worker stepped only inside ``wait()``.
        during_waits = list(counted)
        counter.close()
        await worker.step_while(lambda: not counter_probe.done())
        return counted, during_waits, frontiers

    results = await within(execute(work, workers=peers, fabric=fabric), 10)
    # The other dataflow completed every time, with every worker's records (each worker
    # counts the records exchanged to it) ...
    totals: Counter[Hashable] = Counter()
    for counted, _, _ in results:
        for time, n in counted:
            totals[time] += n
    assert sorted(totals.items()) == [(t, peers * (peers + 1) // 2) for t in range(rounds)]
    for counted, during_waits, frontiers in results:
        assert len({t for t, _ in counted}) == len(counted)
        # ... and it made progress while the workers were waiting at the barrier.
        assert len(during_waits) >= rounds // 2, (len(during_waits), rounds)
        assert all(a.dominates(b) for a, b in pairwise(frontiers))
    return log, results


@pytest.mark.parametrize("peers", [1, 2, 3])
async def test_no_worker_passes_a_round_before_all_arrived(peers: int) -> None:
    log, _ = await run_rounds(peers, seed=peers)
    check_log(log, peers, ROUNDS)


@pytest.mark.parametrize("peers", [2, 3])
async def test_barrier_with_progress_delivered_late_and_interleaved(peers: int) -> None:
    for seed in range(5):
        async with ReorderingFabric(peers, random.Random(seed)) as fabric:
            log, _ = await run_rounds(peers, seed, fabric, rounds=20)
        fabric.check()
        check_log(log, peers, 20)


@pytest.mark.parametrize("peers", [1, 3])
async def test_advance_does_not_block_and_reached_needs_steps(peers: int) -> None:
    async def work(worker: Worker) -> list[bool]:
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

    assert await within(execute(work, workers=peers)) == [[True, False, True, True]] * peers


async def test_a_finished_worker_no_longer_holds_the_others() -> None:
    # Worker 0 leaves after 3 rounds: its ``fn`` returns, ``on_finish`` closes its barrier,
    # and the others pass the later rounds without it.
    async def work(worker: Worker) -> int:
        barrier = Barrier(worker)
        for _ in range(3 if worker.index == 0 else 10):
            await barrier.wait()
        return barrier.round

    assert await within(execute(work, workers=3)) == [3, 10, 10]


async def test_closed_barrier_cannot_advance() -> None:
    async def work(worker: Worker) -> None:
        barrier = Barrier(worker)
        await barrier.wait()
        barrier.close()
        barrier.close()
        with pytest.raises(InputClosed):
            barrier.advance()
        assert barrier.reached()

    await within(execute(work, workers=2))
