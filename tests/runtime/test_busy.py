"""Busy seconds: the time each operator's ``schedule`` takes, accumulated per location."""

from __future__ import annotations

import time
from typing import Any

from operators import Worker, execute
from tests.runtime.harness import within

NAP = 0.02
"""Seconds the slow operator sleeps per record."""


async def quiet(worker: Worker) -> None:
    while worker.busy:
        await worker.step()


def slow(record: Any) -> Any:
    time.sleep(NAP)
    return record


async def test_an_operator_accumulates_the_time_its_logic_takes() -> None:
    answers: dict[str, Any] = {}

    async def work(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            slept = stream.map(slow)
            after = slept.inspect(lambda _r: None)
            _idle_handle, idle_stream = scope.new_input()
            idle = idle_stream.map(lambda x: x)
            inner = scope.iterative()
            nested = stream.enter(inner).map(slow)
            nested.leave()
            return handle, _idle_handle, slept, after, idle, inner, nested

        handle, idle_handle, slept, after, idle, inner, nested = worker.dataflow(build)
        root = worker._dataflows[0]
        answers["before"] = root.busy_seconds(slept.source.node)
        handle.send_batch([1, 2, 3])
        handle.advance_to(1)
        await quiet(worker)
        first = root.busy_seconds(slept.source.node)
        handle.send_batch([4, 5])
        handle.advance_to(2)
        await quiet(worker)
        answers["slept"] = (first, root.busy_seconds(slept.source.node))
        answers["after"] = root.busy_seconds(after.source.node)
        answers["idle"] = root.busy_seconds(idle.source.node)
        answers["scope"] = root.busy_seconds(inner.index_in_parent)
        answers["inside"] = inner.builder.subgraph.busy_seconds(nested.source.node)
        answers["nothing"] = [root.busy_seconds(0), root.busy_seconds(10_000)]
        handle.close()
        idle_handle.close()

    await within(execute(work, workers=1), seconds=10.0)
    assert answers["before"] == 0.0
    first, second = answers["slept"]
    # Three records, then two more: at least the time slept, and the counter only grows.
    assert first >= 3 * NAP
    assert second >= 5 * NAP
    assert second >= first
    # An operator that never saw a record (and a cheap one) spent less than the slow one.
    assert 0.0 <= answers["idle"] < first
    assert 0.0 <= answers["after"] < first
    # Inside a nested scope the inner operator slept; the scope, in its parent, counts
    # its children's time as its own.
    inside = answers["inside"]
    assert inside >= 5 * NAP
    assert answers["scope"] >= inside
    # Node 0 (the scope's boundary) and an unknown index are never busy.
    assert answers["nothing"] == [0.0, 0.0]
