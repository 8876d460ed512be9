"""Nothing is left behind when a dataflow is dropped, and nothing is done for idle ones.

A dropped dataflow releases its channels, tasks, watches and logs; a watched dataflow whose
frontiers do not move costs nothing when others move.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from typing import Any

from service.app import DataflowManager
from tests.service.support import Start, settle, until

COUNT = {
    "nodes": {
        "x": {"op": "input"},
        "spread": {"op": "exchange", "key": "r"},
        "n": {"op": "count_by", "key": "r % 3"},
        "out": {"op": "output"},
    },
    "edges": [["x", "spread"], ["spread", "n"], ["n", "out"]],
}


def footprint(manager: DataflowManager) -> dict[str, int]:
    """Everything the service and the engine hold per dataflow, counted."""
    assert manager.placement.fabric is not None
    return {
        "channels": manager.placement.fabric.channel_count(),
        "dataflows": len(manager.dataflows),
        "frontier feeds": len(manager.frontier_watchers),
        "moved": len(manager.feeds.pending),
        "on workers": sum(len(w.dataflow_indexes()) for w in manager.plane.workers),
        "tasks": len(asyncio.all_tasks()),
    }


async def one_cycle(manager: DataflowManager) -> None:
    """Create a dataflow, use every part of it, then drop it."""
    record = await manager.create("t", COUNT)
    x = manager.input("t", record.id, "x")
    session = x.open_session()
    x.push(session.id, 1, [(0, 1), (0, 2), (0, 4)])
    watch = manager.watch("t", record.id, operators=True)
    subscriber = manager.subscribe("t", record.id, "out", None)
    log = manager.output("t", record.id, "out")
    log.commit("reader", 0)
    x.advance(session.id, 1)
    await until(lambda: sorted(log.frontier()) == [1], "the output passes 0")
    assert sorted((r["key"], r["count"]) for r in log.records_at(0)) == [(1, 2), (2, 1)]
    assert ("output:out", [1]) in watch.take()
    assert subscriber.take() != []
    await manager.drop("t", record.id)
    assert watch.closed == "the dataflow was dropped"
    assert subscriber.closed == "the dataflow was dropped"
    subscriber.leave()
    manager.unwatch(watch)


async def test_a_thousand_create_drop_cycles_leave_nothing_behind(start: Start) -> None:
    manager = await start(2)
    await settle()
    before = footprint(manager)
    for _ in range(1_000):
        await one_cycle(manager)
    await settle()
    gc.collect()
    assert footprint(manager) == before
    # Only the ids of dropped dataflows stay, so their clients get 410 rather than 404:
    # a bounded table (the latest 10,000).
    assert len(manager.registry.dropped) == 1_000


async def test_only_the_dataflows_whose_frontiers_moved_are_published(start: Start) -> None:
    manager = await start(2)
    records = [await manager.create("t", COUNT) for _ in range(20)]
    watches = [manager.watch("t", r.id, operators=True) for r in records]
    for watch in watches:
        assert watch.take()[0] == ("input:x", [0])  # the frontiers as they are at first
    reads: dict[str, int] = {}
    for record in records:
        # Counts every look at an input's frontier (a watched dataflow's frontiers are read
        # to find what changed).
        producer = manager.input("t", record.id, "x").core
        frontier = producer.frontier

        def counted(read: Any = frontier, dataflow: str = record.id) -> list[Any]:
            reads[dataflow] = reads.get(dataflow, 0) + 1
            return list(read())

        producer.frontier = counted  # type: ignore[method-assign]
    busy = records[0]
    x = manager.input("t", busy.id, "x")
    session = x.open_session()
    log = manager.output("t", busy.id, "out")
    for t in range(50):
        x.push(session.id, t + 1, [(t, t), (t, t + 1)])
        x.advance(session.id, t + 1)
        await until(lambda: sorted(log.frontier()) == [t + 1], f"the output passes {t}")  # noqa: B023
    await settle()
    # The idle dataflows were never looked at again, however many steps the busy one took.
    assert set(reads) == {busy.id}
    taken = watches[0].take()
    assert ("input:x", [50]) in taken
    assert ("output:out", [50]) in taken
    assert ("operator:n:0", [50]) in taken
    assert all(w.take() == [] for w in watches[1:])


async def test_advancing_times_no_record_reaches_holds_nothing_per_time(start: Start) -> None:
    # A chain of 60 operators that never receive a record: every advance moves every
    # frontier in it. Before, each operator kept an entry per advanced time.
    nodes: dict[str, Any] = {"x": {"op": "input"}}
    edges, previous = [], "x"
    for i in range(30):
        nodes[f"m{i}"] = {"op": "map", "expr": "r"}
        nodes[f"f{i}"] = {"op": "filter", "expr": "false"}
        edges += [[previous, f"m{i}"], [f"m{i}", f"f{i}"]]
        previous = f"f{i}"
    nodes["out"] = {"op": "output"}
    edges.append([previous, "out"])
    manager = await start(1)
    record = await manager.create("t", {"nodes": nodes, "edges": edges})
    x = manager.input("t", record.id, "x")
    session = x.open_session()
    log = manager.output("t", record.id, "out")

    async def advance(times: int) -> None:
        for _ in range(times):
            x.advance(session.id, x.sessions[session.id].time + 1)
            await until(lambda: sorted(log.frontier()) == x.frontier(), "the output follows")

    await advance(100)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        await advance(1_000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 60 operators x 1,000 times held an entry each before (over 2 MB); now nothing grows
    # with the number of times (what is left is the loop's and the allocator's noise).
    assert grown < 200_000, grown
