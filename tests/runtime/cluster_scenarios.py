"""Dataflows that run alike on one process and across processes (``tests/runtime/test_cluster``).

Each scenario is a module-level ``work(worker)`` coroutine, so that a child process can run
it by name. Inputs depend only on the worker's global index and the number of peers, so a
cluster of ``N`` processes of ``W`` workers and one process of ``N * W`` workers get the
same inputs on the same workers: their outputs must be identical, worker by worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker
from operators.progress import Product

TIMES = 4


def plain(time: Any) -> Any:
    """Product times as lists (JSON), integers as they are."""
    if isinstance(time, Product):
        return [plain(time.outer), plain(time.inner)]
    return time


async def exchange_count(worker: Worker) -> list[Any]:
    """Every worker's records, exchanged by key and counted per time; what reached here."""
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        counted = stream.map(lambda r: r % 7).count_by()
        counted = counted.inspect_batch(lambda t, rs: seen.append([t, sorted(rs)]))
        return handle, counted.probe()

    handle, probe = worker.dataflow(build)
    for time in range(TIMES):
        first = (worker.index * TIMES + time) * 50
        handle.send_batch(list(range(first, first + 50)))
        handle.advance_to(time + 1)
        await worker.step_while(lambda: probe.less_than(handle.time))
        seen.append(["passed", time, sorted(plain(t) for t in probe.frontier())])
    handle.close()
    return seen


async def loop_collatz(worker: Worker) -> list[Any]:
    """Collatz steps in an iterative scope, exchanged every round: product times cross."""
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        inner = scope.iterative()
        loop_handle, loop = inner.feedback(Product(0, 1))
        body = (
            stream.enter(inner)
            .concat(loop)
            .exchange(lambda r: r)
            .map(lambda r: r // 2 if r % 2 == 0 else 3 * r + 1)
            .inspect_batch(lambda t, rs: seen.append([plain(t), sorted(rs)]))
        )
        body.filter(lambda r: r != 1).connect_loop(loop_handle)
        done = body.filter(lambda r: r == 1).leave().count()
        done = done.inspect_batch(lambda t, rs: seen.append(["done", t, rs]))
        return handle, done.probe()

    handle, probe = worker.dataflow(build)
    handle.send_batch([worker.index * 10 + n for n in range(2, 9)])
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(handle.time))
    handle.close()
    return seen


SCENARIOS: dict[str, Callable[[Worker], Awaitable[list[Any]]]] = {
    "exchange_count": exchange_count,
    "loop_collatz": loop_collatz,
}


async def forever(worker: Worker) -> list[Any]:
    """Keeps its input open, so the dataflow never completes (until a peer is lost)."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.exchange(lambda r: r).probe()

    handle, _probe = worker.dataflow(build)
    time = 0
    while True:
        handle.send_batch([worker.index, time])
        time += 1
        handle.advance_to(time)
        for _ in range(20):
            await worker.step()
        await asyncio.sleep(0.01)


SCENARIOS["forever"] = forever
