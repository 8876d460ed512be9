"""Explaining a time that is not complete, across nested scopes and workers (runtime level)."""

from __future__ import annotations

import asyncio
from typing import Any

from operators import Worker, execute
from operators.progress import Product, Source, Target
from operators.runtime.explain import Blocker, explain, is_complete
from tests.runtime.harness import within

P = Product


def hold(stream: Any, release: list[bool]) -> Any:
    """Keep every batch with its capability until ``release`` holds a value."""

    def constructor(capability: Any, _core: Any) -> Any:
        capability.drop()
        stash: list[tuple[Any, list[Any]]] = []

        def logic(input: Any, output: Any) -> None:
            for held, records in input:
                stash.append((held.retain(), records))
            if release:
                for held, records in stash:
                    output.give_batch(held, records)
                    held.drop()
                stash.clear()

        return logic

    return stream.unary_frontier(constructor, name="Hold")


async def quiet(worker: Worker) -> None:
    while worker.busy:
        await worker.step()


def shape(blockers: list[Blocker]) -> list[Any]:
    """(location, time, count, summary, inner ...) of each blocker, recursively."""
    return [
        (b.holder.location, b.holder.time, b.holder.count, b.holder.summary, shape(list(b.inner)))
        for b in blockers
    ]


async def test_a_loop_inside_an_iterative_scope() -> None:
    release: list[bool] = []
    answers: dict[str, Any] = {}

    async def work(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            inner = scope.iterative()
            loop_handle, loop = inner.feedback(P(0, 1))
            held = hold(stream.enter(inner).concat(loop), release)
            held.filter(lambda x: x < 2).map(lambda x: x + 1).connect_loop(loop_handle)
            after = held.leave().inspect(lambda _r: None)
            return handle, inner, held, after

        handle, inner, held, after = worker.dataflow(build)
        handle.send_batch([0])
        handle.advance_to(1)
        await quiet(worker)
        root = worker._dataflows[0]
        nested = inner.builder.subgraph
        scope_node = inner.index_in_parent
        at_inspect = Target(after.source.node, 0)
        hold_input = Target(held.source.node, 0)
        answers["complete"] = [is_complete(root, at_inspect, t) for t in (0, 1)]
        answers["at 0"] = shape(explain([root], at_inspect, 0))
        answers["at 1"] = shape(explain([root], at_inspect, 1))
        answers["inside (0, 5)"] = shape(explain([root, nested], hold_input, P(0, 5)))
        answers["inside (1, 0)"] = shape(explain([root, nested], hold_input, P(1, 0)))
        blockers = explain([root], at_inspect, 0)
        answers["paths"] = [blockers[0].holder.path, blockers[0].inner[0].holder.path]
        answers["nodes"] = (scope_node, held.source, Source(1, 0))  # the input is operator 1
        release.append(True)
        handle.close()

    await within(execute(work, workers=1))
    scope_node, hold_source, input_source = answers["nodes"]
    outside = Source(scope_node, 0)
    assert answers["complete"] == [False, False]
    # The scope holds 0 at its output because the hold operator inside keeps (0, 0).
    assert answers["at 0"] == [(outside, 0, 1, 0, [(hold_source, P(0, 0), 1, P(0, 0), [])])]
    # At 1 the input (at 1) holds too, through the scope's summary of itself.
    assert answers["at 1"] == [
        (input_source, 1, 1, 0, []),
        (outside, 0, 1, 0, [(hold_source, P(0, 0), 1, P(0, 0), [])]),
    ]
    # Inside, around the loop: the held (0, 0) comes back as (0, 1) through the feedback.
    assert answers["inside (0, 5)"] == [(hold_source, P(0, 0), 1, P(0, 1), [])]
    # (1, 0) is held by the outer frontier entering at (1, 0) (the input at 1, outside),
    # not by the hold's (0, 0), which the loop carries only to (0, i): incomparable.
    assert answers["inside (1, 0)"] == [
        (Source(0, 0), P(1, 0), 1, P(0, 0), [(input_source, 1, 1, 0, [])])
    ]
    outer_path, inner_path = answers["paths"]
    assert outer_path[0] == outside and outer_path[-1] == Target(outer_path[-1].node, 0)
    assert inner_path[0] == hold_source and inner_path[-1] == Target(0, 0)


async def test_records_in_flight_on_an_exchange_are_counted_by_every_worker() -> None:
    go_on = asyncio.Event()
    answers: dict[int, Any] = {}

    async def work(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            moved = stream.exchange(lambda x: 1).inspect(lambda _r: None)  # all to worker 1
            return handle, moved

        handle, moved = worker.dataflow(build)
        if worker.index == 0:
            handle.send_batch([1, 2, 3])
            handle.advance_to(1)
            await quiet(worker)
            # Worker 1 has not stepped: the three records wait in its mailbox.
            root = worker._dataflows[0]
            answers[0] = shape(explain([root], Target(moved.source.node, 0), 0))
            go_on.set()
        else:
            handle.advance_to(1)
            await go_on.wait()
        handle.close()

    await within(execute(work, workers=2))
    # Worker 1 never ran: its input and its exchange operator still hold their initial
    # capabilities at 0 (one each; worker 0's moved on), and the three records worker 0 sent
    # wait on the exchange into operator 2, counted by worker 0's tracker all the same.
    assert answers[0] == [
        (Source(1, 0), 0, 1, 0, []),
        (Target(2, 0), 0, 3, 0, []),
        (Source(2, 0), 0, 1, 0, []),
    ]
