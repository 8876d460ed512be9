"""End to end over real sockets: what one hostile client must not do to the others.

Poison records (too deep, too large) are refused where they arrive; slow and idle
connections are closed; connections are capped; a tenant over its request rate gets 429
with Retry-After; /metrics shows no tenant's dataflows to a client without a token.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import aiohttp
import orjson
import pyarrow as pa
import pytest

from api.client import AsyncClient
from tests.e2e.conftest import (
    PASS_THROUGH,
    Frames,
    Server,
    messages,
    progress,
    read_to_close,
    running,
    ws_connect,
)

PROBLEM = "application/problem+json"
RECORD_BYTES = 10_000
LIMITS = {"max_record_bytes": RECORD_BYTES, "max_record_depth": 64}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(tmp_path_factory.mktemp("hostile"), config={"limits": LIMITS}) as started:
        yield started


def nested(depth: int) -> Any:
    """A record of ``depth`` nested lists around 1 (``nested(2) == [[1]]``)."""
    record: Any = 1
    for _ in range(depth):
        record = [record]
    return record


def too_deep(index: int, depth: int) -> dict[str, Any]:
    return {
        "type": "https://frontier.dev/problems/invalid",
        "title": "Unprocessable content",
        "status": 422,
        "detail": f"record {index} nests {depth} levels deep, beyond max_record_depth (64)",
        "problems": [{"pointer": f"/records/{index}/1", "detail": "beyond max_record_depth"}],
    }


class Deep:
    """A record of ``depth`` nested lists around 1, written as text (JSON libraries refuse
    to write past a few hundred levels; only the server's parser is asked to read it)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth


def dumps(value: Any) -> bytes:
    """JSON of ``value``, where a :class:`Deep` is as deep as it says."""
    if isinstance(value, Deep):
        return b"[" * value.depth + b"1" + b"]" * value.depth
    if isinstance(value, list):
        return b"[" + b",".join(map(dumps, value)) + b"]"
    if isinstance(value, dict):
        return b"{" + b",".join(orjson.dumps(k) + b":" + dumps(v) for k, v in value.items()) + b"}"
    return orjson.dumps(value)


async def post(http: aiohttp.ClientSession, path: str, body: Any) -> tuple[int, str, Any]:
    async with http.post(path, data=dumps(body), headers=JSON) as response:
        return response.status, response.content_type, await response.json(content_type=None)


JSON = {"Content-Type": "application/json"}


def arrow_body(times: list[int], records: list[Any]) -> bytes:
    """An Arrow IPC stream with a ``time`` column and a ``record`` column of JSON text."""
    table = pa.table(
        {
            "time": pa.array(times, pa.int64()),
            "record": pa.array([dumps(r).decode() for r in records], pa.string()),
        }
    )
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


async def test_a_record_nested_beyond_max_record_depth_is_refused_where_it_arrives(
    server: Server,
) -> None:
    async with aiohttp.ClientSession(server.url) as http, AsyncClient(server.url) as client:
        df = (await client.create_dataflow(PASS_THROUGH))["id"]
        base = f"/v1/dataflows/{df}/inputs/words"
        session = (await client.session(df, "words")).id
        push = f"{base}/sessions/{session}/push"
        events = Frames(client.events(df, "out"))
        # Integer times (the bulk-checked path), product-free but 65 and 251 deep.
        for depth in (65, 251, 500):
            body = {"seq": 1, "records": [[0, "ok"], [0, Deep(depth)]]}
            assert await post(http, push, body) == (422, PROBLEM, too_deep(1, depth))
        # Arrow, with the record as JSON text.
        arrow = arrow_body([0, 0, 0], ["a", nested(3), Deep(300)])
        async with http.post(
            f"{push}?seq=1",
            data=arrow,
            headers={"Content-Type": "application/vnd.apache.arrow.stream"},
        ) as response:
            assert response.status == 422
            assert await response.json(content_type=None) == too_deep(2, 300)
        # Over the WebSocket: the frame is answered with the problem and the socket stays.
        async with ws_connect(server, f"{base}/push") as ws:
            opened = orjson.loads(await ws.recv())
            frame = {"type": "push", "seq": 1, "records": [[0, Deep(251)]]}
            await ws.send(dumps(frame))
            error = orjson.loads(await ws.recv())
            assert {k: error[k] for k in ("type", "status", "detail")} == {
                "type": "error",
                "status": 422,
                "detail": too_deep(0, 251)["detail"],
            }
            await ws.send(orjson.dumps({"type": "push", "seq": 1, "records": [[0, nested(64)]]}))
            ack = orjson.loads(await ws.recv())
            assert (ack["type"], ack["seq"]) == ("ack", 1)
            await ws.send(orjson.dumps({"type": "close"}))
            await read_to_close(ws)
            assert opened["session"] != session
        # Nothing of a refused batch was applied; 64 levels is within the limit.
        assert (await post(http, push, {"seq": 1, "records": [[0, nested(64)]]}))[0] == 200
        advance = f"{base}/sessions/{session}/advance"
        assert (await post(http, advance, {"time": 1}))[0] == 200
        assert (await client.request("GET", base))["records_in"] == 2
        page = await client.request("GET", f"/v1/dataflows/{df}/outputs/out/times")
        assert page["times"] == [{"time": 0, "records": [nested(64), nested(64)]}]
        seen = await events.until(lambda e: e["type"] == "progress")
        assert seen == [messages(0, nested(64), nested(64)), progress((1, 1), (0, -1))]
        await events.aclose()


async def test_a_record_over_max_record_bytes_is_refused_and_small_ones_are_not(
    server: Server,
) -> None:
    async with aiohttp.ClientSession(server.url) as http, AsyncClient(server.url) as client:
        df = (await client.create_dataflow(PASS_THROUGH))["id"]
        base = f"/v1/dataflows/{df}/inputs/words"
        session = (await client.session(df, "words")).id
        push = f"{base}/sessions/{session}/push"
        big = "x" * RECORD_BYTES  # its JSON has two quotes more
        body = {"seq": 1, "records": [[0, "a"], [0, {"k": "v"}], [0, big]]}
        assert await post(http, push, body) == (
            422,
            PROBLEM,
            {
                "type": "https://frontier.dev/problems/invalid",
                "title": "Unprocessable content",
                "status": 422,
                "detail": f"record 2 is {RECORD_BYTES + 2} bytes, over max_record_bytes "
                f"({RECORD_BYTES})",
                "problems": [{"pointer": "/records/2/1", "detail": "over max_record_bytes"}],
            },
        )
        # A body larger than one record may be, of records within it: accepted whole.
        small = "y" * (RECORD_BYTES - 2)
        status, _, ack = await post(http, push, {"seq": 1, "records": [[0, small]] * 5})
        assert (status, ack["applied"]) == (200, 5)
        assert (await client.request("GET", base))["records_in"] == 5
