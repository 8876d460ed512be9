"""A dataflow that completes, or is dropped on every worker, releases its channels.

``test_completed_dataflows_release_every_channel`` runs on one process and across processes
(``tests/runtime/fabrics.py``: 3x1). What it counts is one fabric's channels, which live in
one process's memory: across processes it asserts, per process, what holds there: each
process's own fabric (a :class:`CountingClusterFabric`) has as many channels once every
local worker finished as when it was formed. ``test_dropped_dataflows_...`` stays in one
process: it builds workers by hand on one fabric and drops dataflows without running them,
counting between one worker's drop and the next, so there is no run to put across
processes (the cluster fabric keeps its channels as the local fabric does: it is one).
"""

from __future__ import annotations

from typing import Any

import pytest

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker, execute
from operators.runtime import Fabric
from operators.runtime.cluster import ClusterFabric, ClusterSpec, Link
from tests.runtime.fabrics import Clusters, Layout, layouts


def exchanged(scope: Any) -> Any:
    """input -> exchange -> iterate (a nested scope) -> probe: channels of every kind."""
    handle, stream = scope.new_input()
    inner = scope.iterative()
    looped = stream.exchange(lambda r: r).enter(inner).map(lambda r: r + 1).leave()
    return handle, looped.probe()


class CountingClusterFabric(ClusterFabric):
    """A cluster fabric whose summary is its channel count when formed and once closed."""

    def __init__(self, spec: ClusterSpec, links: dict[int, Link]) -> None:
        super().__init__(spec, links)
        self.channels_at_start = self.channel_count()

    def summary(self) -> tuple[int, int]:
        return self.channels_at_start, self.channel_count()


async def three_dataflows(worker: Worker) -> tuple[int, bool]:
    """Run three dataflows to completion, one after the other; whether they held channels."""
    held = True
    for _round in range(3):
        handle, probe = worker.dataflow(exchanged)
        held = held and worker.fabric.channel_count() > 0
        if worker.index == 0:
            handle.send_batch(range(10))
        handle.close()
        await worker.step_while(lambda: not probe.done())  # noqa: B023
    await worker.step_while(lambda: bool(worker.dataflow_indexes()))
    return worker.index, held


@pytest.mark.parametrize("layout", layouts(1, 3))
async def test_completed_dataflows_release_every_channel(
    layout: Layout, clusters: Clusters
) -> None:
    expected = [(w, True) for w in range(layout.peers)]
    if layout.processes == 1:
        fabric = Fabric(layout.workers)
        before = fabric.channel_count()
        assert await execute(three_dataflows, layout.workers, fabric) == expected
        # Three dataflows completed on every worker: none of their channels is left.
        assert (before, fabric.channel_count()) == (0, 0)
        return
    results, counts = await clusters.run_on_fabric(layout, CountingClusterFabric, three_dataflows)
    assert results == expected
    # In each process, as many channels as when it was formed.
    assert counts == [(0, 0)] * layout.processes


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
