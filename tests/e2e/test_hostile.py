"""End to end over real sockets: what one hostile client must not do to the others.

Poison records (too deep, too large) are refused where they arrive; slow and idle
connections are closed; connections are capped; a tenant over its request rate gets 429
with Retry-After; /metrics shows no tenant's dataflows to a client without a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
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
    metric,
    progress,
    read_to_close,
    running,
    ws_connect,
)

PROBLEM = "application/problem+json"
RECORD_BYTES = 10_000
STAGED_BYTES = 2_000
LIMITS = {
    "max_record_bytes": RECORD_BYTES,
    "max_record_depth": 64,
    "max_staged_bytes_per_input": STAGED_BYTES,
}


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
ARROW = "application/vnd.apache.arrow.stream"


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


async def test_staged_records_are_held_to_the_record_limits(server: Server) -> None:
    async with aiohttp.ClientSession(server.url) as http, AsyncClient(server.url) as client:
        df = (await client.create_dataflow(PASS_THROUGH))["id"]
        base = f"/v1/dataflows/{df}/inputs/words/transactions"

        async def put(txn: str, body: bytes, content_type: str) -> tuple[int, Any]:
            async with http.put(
                f"{base}/{txn}", data=body, headers={"Content-Type": content_type}
            ) as response:
                return response.status, await response.json(content_type=None)

        deep = dumps({"records": [[0, "ok"], [0, Deep(65)]]})
        assert await put("t1", deep, "application/json") == (422, too_deep(1, 65))
        arrow = arrow_body([0, 0, 0], ["a", nested(3), Deep(300)])
        status, problem = await put("t1", arrow, ARROW)
        assert (status, problem["detail"], problem["problems"]) == (
            422,
            "record 2 nests 300 levels deep, beyond max_record_depth (64)",
            [{"pointer": "row 2", "detail": "beyond max_record_depth"}],
        )
        assert (await client.request("GET", f"/v1/dataflows/{df}/inputs/words"))["staged"] == 0


async def test_staged_bodies_are_capped_in_bytes(server: Server) -> None:
    async with aiohttp.ClientSession(server.url) as http, AsyncClient(server.url) as client:
        df = (await client.create_dataflow(PASS_THROUGH))["id"]
        base = f"/v1/dataflows/{df}/inputs/words/transactions"
        body = orjson.dumps({"records": [[0, "x" * 1_400]]})  # 1,419 bytes, one record

        async def put(txn: str) -> tuple[int, Any]:
            async with http.put(f"{base}/{txn}", data=body, headers=JSON) as response:
                return response.status, await response.json(content_type=None)

        assert await put("t1") == (200, {"staged": 1})
        status, problem = await put("t2")
        assert (status, problem["detail"]) == (
            429,
            f"input 'words' would hold more than max_staged_bytes_per_input ({STAGED_BYTES}) "
            "bytes of staged bodies",
        )
        async with http.delete(f"{base}/t1") as response:
            assert response.status == 200
        assert await put("t2") == (200, {"staged": 1})  # the abort gave its bytes back


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


TYPED = {
    "nodes": {
        "rows": {"op": "input", "schema": {"key": "string", "n": "int64"}},
        "out": {"op": "output"},
    },
    "edges": [["rows", "out"]],
}


def typed_body(keys: list[str], seq: int | None = None) -> bytes:
    """An Arrow IPC stream of rows ``{key, n: 1}`` at time 0, typed as the input's schema."""
    table = pa.table(
        {
            "time": pa.array([0] * len(keys), pa.int64()),
            "key": pa.array(keys, pa.string()),
            "n": pa.array([1] * len(keys), pa.int64()),
        }
    )
    if seq is not None:
        table = table.replace_schema_metadata({"seq": str(seq)})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


async def test_a_typed_arrow_record_over_max_record_bytes_is_refused_as_an_untyped_one_is(
    server: Server,
) -> None:
    # A record's size is its JSON's, {"key":"...","n":1}: 16 bytes and its key's JSON text.
    # 2,000 control characters are 2,000 bytes of Arrow but 12,000 of JSON (each \u0001),
    # in a body smaller than the limit; the largest record is the one named.
    keys = ["a", "\x01" * 2_000, "x" * RECORD_BYTES]
    refused = {
        "type": "https://frontier.dev/problems/invalid",
        "title": "Unprocessable content",
        "status": 422,
        "detail": f"record 1 is 12016 bytes, over max_record_bytes ({RECORD_BYTES})",
        "problems": [{"pointer": "/records/1/1", "detail": "over max_record_bytes"}],
    }
    just = "y" * (RECORD_BYTES - 16)  # its record is exactly max_record_bytes: accepted
    headers = {"Content-Type": ARROW}
    async with aiohttp.ClientSession(server.url) as http, AsyncClient(server.url) as client:
        df = (await client.create_dataflow(TYPED))["id"]
        base = f"/v1/dataflows/{df}/inputs/rows"
        session = (await client.session(df, "rows")).id
        push = f"{base}/sessions/{session}/push?seq=1"
        async with http.post(push, data=typed_body(keys[:2]), headers=headers) as response:
            assert (response.status, response.content_type) == (422, PROBLEM)
            assert await response.json(content_type=None) == refused
        async with http.post(push, data=typed_body(keys), headers=headers) as response:
            assert await response.json(content_type=None) == refused
        async with http.put(f"{base}/transactions/t", data=typed_body(keys), headers=headers) as r:
            staged = await r.json(content_type=None)
            assert (r.status, staged["detail"], staged["problems"]) == (
                422,
                refused["detail"],
                [{"pointer": "row 1", "detail": "over max_record_bytes"}],
            )
        async with http.post(push, data=typed_body(["a", just]), headers=headers) as response:
            assert (response.status, (await response.json())["applied"]) == (200, 2)
        async with ws_connect(server, f"{base}/push") as ws:
            opened = orjson.loads(await ws.recv())
            await ws.send(typed_body(keys, seq=1))
            frame = orjson.loads(await ws.recv())
            assert frame == {
                "type": "error",
                "title": refused["title"],
                "status": 422,
                "detail": refused["detail"],
                "problems": refused["problems"],
                "credits": opened["credits"],
            }
        assert (await client.request("GET", base))["records_in"] == 2


# --------------------------------------------------------------------------- connections

GUARDED = {
    "header_timeout_seconds": 0.5,
    "body_timeout_seconds": 1.0,
    "idle_timeout_seconds": 1.0,
    "tenant_requests_per_second": 2.0,
    "tenant_request_burst": 5,
}
TOKENS = ("--token", "a=alice", "--token", "b=bob")


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(tmp_path_factory.mktemp("guarded"), *TOKENS, config={"limits": GUARDED}) as s:
        yield s


async def until_closed(reader: asyncio.StreamReader, within: float = 5.0) -> tuple[bytes, float]:
    """What the server sends until it closes the connection, and how long that took."""
    started = time.monotonic()
    data = await asyncio.wait_for(reader.read(), within)
    return data, time.monotonic() - started


def answer(data: bytes) -> tuple[str, dict[str, str], Any]:
    """The status line, headers and decoded body of one raw HTTP response."""
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return status, headers, orjson.loads(body) if body else None


async def test_a_connection_whose_headers_do_not_arrive_in_time_gets_408(guarded: Server) -> None:
    detail = "the request's headers did not arrive within header_timeout_seconds (0.5)"
    expected = {
        "type": "https://frontier.dev/problems/request-timeout",
        "title": "Request Timeout",
        "status": 408,
        "detail": detail,
    }
    # Silent from the start.
    reader, writer = await asyncio.open_connection("127.0.0.1", guarded.port)
    data, took = await until_closed(reader)
    status, headers, body = answer(data)
    assert (status, headers["Connection"], body) == (
        "HTTP/1.1 408 Request Timeout",
        "close",
        expected,
    )
    assert 0.4 < took < 3.0
    writer.close()
    # A header line now and then (slowloris): the deadline is for all of them.
    reader, writer = await asyncio.open_connection("127.0.0.1", guarded.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    closed = asyncio.ensure_future(until_closed(reader))
    for n in range(50):
        if closed.done():
            break
        with contextlib.suppress(ConnectionError):
            writer.write(f"X-Slow-{n}: 1\r\n".encode())
        await asyncio.sleep(0.1)
    data, took = await closed
    assert answer(data)[::2] == ("HTTP/1.1 408 Request Timeout", expected)
    assert 0.4 < took < 3.0
    writer.close()


async def test_a_body_that_does_not_arrive_in_time_is_408(guarded: Server) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", guarded.port)
    writer.write(
        b"POST /v1/dataflows HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer a\r\n"
        b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"graph": '
    )
    data = await asyncio.wait_for(reader.readuntil(b"}"), 5.0)
    status, _, body = answer(data)
    assert (status, body) == (
        "HTTP/1.1 408 Request Timeout",
        {
            "type": "https://frontier.dev/problems/request-timeout",
            "title": "Request timeout",
            "status": 408,
            "detail": "the request's body did not arrive within body_timeout_seconds (1)",
        },
    )
    writer.close()


async def test_an_idle_kept_alive_connection_is_closed_after_idle_timeout(guarded: Server) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", guarded.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
    assert head.startswith(b"HTTP/1.1 200")
    length = int(answer(head)[1]["Content-Length"])
    await reader.readexactly(length)
    rest, took = await until_closed(reader)
    assert rest == b""
    assert 0.8 < took < 3.0
    writer.close()


async def test_connections_beyond_max_connections_are_refused_at_once(start_server: Any) -> None:
    server = start_server(config={"limits": {"max_connections": 5, "header_timeout_seconds": 2}})
    held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(5)]
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    data, took = await until_closed(reader)
    assert answer(data)[::2] == (
        "HTTP/1.1 503 Service Unavailable",
        {
            "type": "https://frontier.dev/problems/service-unavailable",
            "title": "Service Unavailable",
            "status": 503,
            "detail": "the server holds its most connections (5): try again shortly",
        },
    )
    assert took < 1.0
    writer.close()
    for _, held_writer in held:  # once they are gone, there is room again
        held_writer.close()
        await held_writer.wait_closed()
    async with aiohttp.ClientSession() as http:
        for _ in range(50):
            async with http.get(f"{server.url}/metrics") as response:
                text = await response.text()
            if metric(text, "frontier_connections") == 1.0:
                break
            await asyncio.sleep(0.05)
        assert metric(text, "frontier_connections_refused_total") == 1.0
        assert metric(text, "frontier_connections") == 1.0


async def test_one_client_holding_many_sockets_leaves_room_for_health_probes(
    start_server: Any,
) -> None:
    """A per-client cap (issue 22): the sockets one client holds stop at its share, and a
    probe from another address (loopback's 127.0.0.2) is answered every time."""
    limits = {"max_connections": 300, "max_connections_per_client": 100}
    server = start_server(config={"limits": {**limits, "header_timeout_seconds": 30}})
    opened = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(250)]
    refused = 0
    for reader, _writer in opened[100:]:
        data, _took = await until_closed(reader)
        assert answer(data)[2]["detail"] == (
            "this client holds the most connections one client may (100, "
            "max_connections_per_client): close some"
        )
        refused += 1
    assert refused == 150
    connector = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0), force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:
        statuses = []
        for _ in range(50):
            async with http.get(f"{server.url}/healthz") as response:
                statuses.append(response.status)
    assert statuses == [200] * 50
    for _, writer in opened:
        writer.close()


# --------------------------------------------------------------------------- tenants


async def test_a_tenant_over_its_rate_gets_429_with_retry_after_and_others_do_not(
    guarded: Server,
) -> None:
    async with aiohttp.ClientSession(guarded.url) as http:

        async def get(token: str | None, path: str = "/v1/dataflows") -> Any:
            headers = {} if token is None else {"Authorization": f"Bearer {token}"}
            async with http.get(path, headers=headers) as response:
                return response.status, response.headers.get("Retry-After"), await response.read()

        await asyncio.sleep(3.0)  # a full bucket, whatever the tests before took
        statuses = [(await get("a"))[0] for _ in range(5)]
        assert statuses == [200] * 5
        status, retry_after, body = await get("a")
        assert (status, retry_after) == (429, "1")
        assert orjson.loads(body) == {
            "type": "https://frontier.dev/problems/too-many-requests",
            "title": "Too many requests",
            "status": 429,
            "detail": "tenant 'alice' is over tenant_requests_per_second (2, bursts of 5): "
            "retry in 1 s",
        }
        assert (await get("b"))[0] == 200  # bob has a bucket of his own
        assert [(await get(None, "/healthz"))[0] for _ in range(10)] == [200] * 10
        await asyncio.sleep(1.0)
        assert (await get("a"))[0] == 200


async def test_metrics_show_a_tenant_s_dataflows_only_with_its_token(guarded: Server) -> None:
    await asyncio.sleep(3.0)  # a full bucket
    async with (
        AsyncClient(guarded.url, token="a") as alice,
        AsyncClient(guarded.url, token="b") as bob,
    ):
        mine = (await alice.create_dataflow(PASS_THROUGH))["id"]
        theirs = (await bob.create_dataflow(PASS_THROUGH))["id"]
    async with aiohttp.ClientSession(guarded.url) as http:

        async def scrape(token: str | None) -> tuple[int, str]:
            headers = {} if token is None else {"Authorization": f"Bearer {token}"}
            async with http.get("/metrics", headers=headers) as response:
                return response.status, await response.text()

        status, text = await scrape(None)
        assert status == 200
        assert "dataflow=" not in text
        assert metric(text, "frontier_dataflows", status="running") == 2.0
        status, text = await scrape("a")
        assert mine in text and theirs not in text
        assert metric(text, "frontier_records_in_total", dataflow=mine, input="words") == 0.0
        assert metric(text, "frontier_dataflows", status="running") == 1.0
        assert (await scrape("nobody"))[0] == 401
