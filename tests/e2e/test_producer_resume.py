"""A WebSocket producer resumes after a network break (issue 22), against a real server.

The producer's session outlives its socket for ``session_grace_seconds``: a producer whose
connection broke with frames in flight reconnects with ``?session=``, sends again every frame
it has no ack for, and those the server had applied are acknowledged with ``applied`` 0, not
applied twice. After the grace period the session is closed, as when a producer goes away.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from websockets.exceptions import InvalidStatus

from api.client import AsyncClient
from tests.e2e.conftest import Server, WsProducer, running, within, ws_connect

GRAPH = {
    "nodes": {"x": {"op": "input"}, "n": {"op": "count_by", "key": "r"}, "out": {"op": "output"}},
    "edges": [["x", "n"], ["n", "out"]],
}
GRACE = 2.0


@pytest.fixture
def service(tmp_path: Any) -> Any:
    with running(tmp_path, config={"limits": {"session_grace_seconds": GRACE}}) as server:
        yield server


def push(seq: int) -> dict[str, Any]:
    return {"type": "push", "seq": seq, "records": [[0, f"k{seq % 3}"], [1, "all"]]}


async def broken_after(server: Server, path: str, frames: int, acked: int) -> str:
    """Open a session, send ``frames`` pushes, read ``acked`` acks, then break the connection.

    The break is the network's: the TCP connection is dropped without a close handshake,
    once the server has surely applied every frame sent.
    """
    ws = await ws_connect(server, path)
    producer = await WsProducer.open(ws)
    for seq in range(1, frames + 1):
        await producer.send(push(seq))
    for seq in range(1, acked + 1):
        assert (await producer.reply())["seq"] == seq
    await asyncio.sleep(0.3)  # the server answers the rest; the producer never reads it
    ws.transport.abort()
    await within(ws.wait_closed())
    return producer.session


async def test_a_producer_resumes_its_session_and_resent_frames_apply_once(
    service: Server,
) -> None:
    async with AsyncClient(service.url) as client:
        dataflow = (await client.create_dataflow(GRAPH))["id"]
        path = f"/v1/dataflows/{dataflow}/inputs/x/push"
        session = await broken_after(service, path, frames=5, acked=2)
        await asyncio.sleep(0.5)  # the server has seen the socket end: still the session
        assert [s["session"] for s in (await client.input(dataflow, "x"))["sessions"]] == [session]
        async with ws_connect(service, f"{path}?session={session}") as ws:
            producer = await WsProducer.open(ws)
            assert producer.session == session
            # Frames 3 to 5 have no ack here: sent again, acknowledged, applied before.
            for seq in (3, 4, 5):
                ack = await producer.call(push(seq))
                assert (ack["type"], ack["seq"], ack["applied"]) == ("ack", seq, 0)
            ack = await producer.call(push(6))
            assert (ack["seq"], ack["applied"]) == (6, 2)
            ack = await producer.call({"type": "advance", "seq": 7, "time": 2})
            assert (ack["seq"], ack["input_frontier"]) == (7, [2])
        read = {t: records async for t, records in client.times(dataflow, "out")}
    counts = {t: {r["key"]: r["count"] for r in records} for t, records in read.items()}
    assert counts == {0: {"k0": 2, "k1": 2, "k2": 2}, 1: {"all": 6}}


async def test_after_the_grace_period_the_session_is_closed(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        dataflow = (await client.create_dataflow(GRAPH))["id"]
        path = f"/v1/dataflows/{dataflow}/inputs/x/push"
        session = await broken_after(service, path, frames=1, acked=1)
        await asyncio.sleep(GRACE + 1.0)
        assert (await client.input(dataflow, "x"))["sessions"] == []
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(service, f"{path}?session={session}"):
                pass
        assert refused.value.response.status_code == 404
        problem = orjson.loads(refused.value.response.body or b"{}")
        assert problem["detail"] == f"input 'x' has no open session {session!r}"
