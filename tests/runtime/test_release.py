"""A dataflow that completes, or is dropped on every worker, releases its channels."""

from __future__ import annotations

from typing import Any

import pytest

import operators  # noqa: F401  (registers the stream-building scope)
from service.runtime import Fabric, Worker, execute


def exchanged(scope: Any) -> Any:
    """input -> exchange -> iterate (a nested scope) -> probe: channels of every kind."""
    handle, stream = scope.new_input()
    inner = scope.iterative()
    looped = stream.exchange(lambda r: r).enter(inner).map(lambda r: r + 1).leave()
    return handle, looped.probe()


@pytest.mark.parametrize("workers", [1, 3])
async def test_completed_dataflows_release_every_channel(workers: int) -> None:
    async def work(worker: Worker) -> Fabric:
        for _round in range(3):
            handle, probe = worker.dataflow(exchanged)
            if worker.index == 0:
                handle.send_batch(range(10))
            handle.close()
            await worker.step_while(lambda: not probe.done())  # noqa: B023
        await worker.step_while(lambda: bool(worker.dataflow_indexes()))
        return worker.fabric

    results = await execute(work, workers=workers)
    [fabric] = {id(f): f for f in results}.values()
    # Three dataflows completed on every worker: none of their channels is left.
    assert fabric.channel_count() == 0


async def test_dropped_dataflows_release_their_channels_once_every_worker_dropped() -> None:
    fabric = Fabric(3)
    workers = [Worker(i, 3, fabric) for i in range(3)]
    before = fabric.channel_count()
    for _cycle in range(50):
        built = [worker.dataflow(exchanged) for worker in workers]
        held = fabric.channel_count()
        assert held > before
        index = workers[0].dataflow_indexes()[-1]
        # Another worker may still send on the channels until it drops the dataflow too.
        for worker in workers[:2]:
            assert worker.drop_dataflow(index)
            assert fabric.channel_count() == held
        assert workers[2].drop_dataflow(index)
        assert fabric.channel_count() == before
        # Dropping again (the service's drop after a failure, say) releases nothing more.
        assert not workers[0].drop_dataflow(index)
        assert fabric.channel_count() == before
        del built
