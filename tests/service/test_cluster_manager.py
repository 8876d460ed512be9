"""Two managers of one cluster in one process, over real sockets on 127.0.0.1.

Each manager runs its workers on the cluster fabric (``Settings.cluster``); both run on the
test's loop, which makes what a process sees when its peer is lost, or leaves, observable
in place: the requests it is asked then are refused with 503 naming the peer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.codec import frontier_event
from api.server import create_app
from operators.runtime.cluster import ClusterFabric
from service.app import Cluster, DataflowManager, Settings, Unavailable
from service.store.catalogue import Catalogue
from tests.runtime.fabrics import free_ports

PASS = {"nodes": {"x": {"op": "input"}, "out": {"op": "output"}}, "edges": [["x", "out"]]}


async def within(condition: Any, what: str, seconds: float = 10.0) -> None:
    """Wait until ``condition()`` holds: what crosses a socket takes time, not loop turns."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.005)


def settings(
    processes: int, fabric: list[int], apis: list[int], data: Path | None = None
) -> list[Settings]:
    peers = tuple(("127.0.0.1", port) for port in fabric)
    addresses = tuple(f"127.0.0.1:{port}" for port in apis)
    return [
        Settings(
            cluster=Cluster(processes, index, peers, addresses, b"secret", 10.0),
            data_dir=None if data is None else str(data / f"process-{index}"),
            durability="none",
        )
        for index in range(processes)
    ]


@pytest.fixture
async def pair() -> AsyncIterator[list[DataflowManager]]:
    """Two started managers forming one cluster; both stopped after the test."""
    ports = free_ports(4)
    managers = [
        DataflowManager(s, frontier_codec=frontier_event) for s in settings(2, ports[:2], ports[2:])
    ]
    await asyncio.gather(*(manager.start() for manager in managers))
    try:
        yield managers
    finally:
        for manager in managers:
            await manager.stop()


async def test_a_dataflow_created_at_one_is_running_at_both(pair: list[DataflowManager]) -> None:
    first, second = pair
    record = await first.create("t", PASS, "pass")
    copy = second.get("t", record.id)
    assert (copy.name, copy.status, copy.graph, copy.created_at) == (
        "pass",
        "running",
        PASS,
        record.created_at,
    )
    await second.drop("t", record.id)
    await within(lambda: record.id not in first.dataflows, "the first forgets it too")
    assert first.listing("t") == second.listing("t") == []


async def test_a_lost_peer_stops_the_process_with_503_naming_it(
    pair: list[DataflowManager],
) -> None:
    first, second = pair
    assert isinstance(second.placement.fabric, ClusterFabric)
    await second.placement.fabric.abort()  # as a crash does: no goodbye
    assert first.fatal is not None
    await asyncio.wait_for(first.fatal.wait(), 10.0)
    with pytest.raises(Unavailable) as refused:
        first.check_ready()
    assert refused.value.detail.startswith("the service stopped: process 1 (127.0.0.1:")
    assert "connection lost" in refused.value.detail
    assert first.failure is not None and first.failure.startswith("PeerLost: process 1 (")
    app = create_app(first.settings, first)
    app.cleanup_ctx.clear()  # the manager is the fixture's to stop
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        answer = await client.get("/v1/dataflows")
        problem: dict[str, Any] = await answer.json()
        assert (answer.status, answer.content_type) == (503, "application/problem+json")
        assert problem["detail"] == refused.value.detail
        health = await client.get("/healthz")
        assert (health.status, (await health.json())["status"]) == (503, "failed")


async def test_a_peer_that_leaves_stops_the_process_gracefully(
    pair: list[DataflowManager],
) -> None:
    first, second = pair
    await second.stop()
    await asyncio.wait_for(first.left.wait(), 10.0)
    assert first.left_by is not None and first.left_by.startswith("process 1 (127.0.0.1:")
    assert first.failure is None


async def test_a_dataflow_stored_at_one_process_only_is_dropped_at_recovery(
    tmp_path: Path,
) -> None:
    ports = free_ports(4)

    async def started() -> list[DataflowManager]:
        managers = [DataflowManager(s) for s in settings(2, ports[:2], ports[2:], tmp_path)]
        await asyncio.gather(*(manager.start() for manager in managers))
        return managers

    first, second = await started()
    kept = await first.create("t", PASS, "kept")
    lost = await first.create("t", PASS, "stored at process 1 only")
    for manager in (first, second):
        await manager.stop()
    # As a crash between the two processes' storing it would leave the catalogues.
    catalogue = Catalogue(tmp_path / "process-0")
    catalogue.drop_dataflow(lost.id)
    catalogue.close()
    first, second = await started()
    try:
        await within(lambda: first.ready and second.ready, "both recover")
        for manager in (first, second):
            assert [(r.id, r.status) for r in manager.listing("t")] == [(kept.id, "running")]
        stored = Catalogue(tmp_path / "process-1")
        assert [d.id for d in stored.dataflows()] == [kept.id]
        stored.close()
    finally:
        for manager in (first, second):
            await manager.stop()
