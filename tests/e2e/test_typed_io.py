"""Typed inputs and columnar outputs, end to end over real sockets (issue 20, points 2 and 4).

One server in a subprocess (two workers) serves most tests; the restart test runs its own
with ``durability: fsync`` and restarts it. A typed input's records are checked against its
schema once per batch (a misfit is a 422 naming the record and the field, nothing applied),
travel as Arrow columns, are journaled as Arrow IPC, and come out of a typed output as typed
Arrow columns, or as the same JSON events an untyped output sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pyarrow as pa
import pyarrow.ipc
import pytest
from websockets.exceptions import ConnectionClosed

from tests.e2e.conftest import Frames, Server, WsProducer, running, ws_connect, ws_frames

PROBLEM = "application/problem+json"
ARROW = "application/vnd.apache.arrow.stream"
SCHEMA = {
    "key": "string",
    "value": "int64",
    "tags": {"list": "string"},
    "where": {"object": {"lat": "float64", "lon": "float64"}, "nullable": True},
}
TYPED = {
    "nodes": {"rows": {"op": "input", "schema": SCHEMA}, "out": {"op": "output"}},
    "edges": [["rows", "out"]],
}
UNTYPED = {"nodes": {"rows": {"op": "input"}, "out": {"op": "output"}}, "edges": [["rows", "out"]]}
RECORD_TYPE = pa.struct(
    [
        pa.field("key", pa.string(), False),
        pa.field("value", pa.int64(), False),
        pa.field("tags", pa.list_(pa.field("item", pa.string(), False)), False),
        pa.field(
            "where",
            pa.struct([pa.field("lat", pa.float64(), False), pa.field("lon", pa.float64(), False)]),
            True,
        ),
    ]
)
READ_SCHEMA = pa.schema([pa.field("time", pa.int64(), False), *RECORD_TYPE])
A = {"key": "a", "value": 1, "tags": ["x", "y"], "where": {"lat": 1.5, "lon": -2.0}}
B = {"key": "b", "value": -7, "tags": [], "where": None}
C = {"key": "c", "value": 2**63 - 1, "tags": ["z"], "where": {"lat": 0.0, "lon": 0.25}}


async def call(
    server: Server,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    accept: str = "application/json",
) -> tuple[int, str, dict[str, str], Any]:
    """One request: ``(status, content type, headers, body)``, JSON decoded, Arrow as bytes."""
    data = body if isinstance(body, bytes) or body is None else orjson.dumps(body)
    headers = {"Accept": accept}
    if data is not None:
        headers["Content-Type"] = content_type
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, server.url + path, data=data, headers=headers) as response,
    ):
        raw = await response.read()
        decoded: Any = raw
        if response.content_type in ("application/json", PROBLEM):
            decoded = orjson.loads(raw)
        return response.status, response.content_type, dict(response.headers), decoded


def arrow_body(columns: dict[str, pa.Array]) -> bytes:
    table = pa.table(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


async def dataflow(server: Server, graph: dict[str, Any]) -> str:
    status, _, _, created = await call(server, "POST", "/v1/dataflows", {"graph": graph})
    assert status == 201, created
    return str(created["id"])


async def open_session(server: Server, df: str) -> str:
    path = f"/v1/dataflows/{df}/inputs/rows/sessions"
    status, _, _, opened = await call(server, "POST", path, {})
    assert status == 201, opened
    return str(opened["session"])


async def until(read: Callable[[], Any], done: Callable[[Any], bool], timeout: float = 5.0) -> Any:
    """Poll ``read()`` until ``done`` says so (every wait has a deadline)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await read()
        if done(value):
            return value
        assert asyncio.get_running_loop().time() < deadline, f"never done: {value!r}"
        await asyncio.sleep(0.02)


async def json_times(server: Server, df: str) -> Any:
    status, _, _, page = await call(server, "GET", f"/v1/dataflows/{df}/outputs/out/times")
    assert status == 200, page
    return page


async def arrow_times(server: Server, df: str) -> pa.Table:
    status, content_type, _, body = await call(
        server, "GET", f"/v1/dataflows/{df}/outputs/out/times", accept=ARROW
    )
    assert (status, content_type) == (200, ARROW), body
    return pa.ipc.open_stream(body).read_all()


async def complete(server: Server, df: str, frontier: list[int]) -> Any:
    return await until(lambda: json_times(server, df), lambda page: page["frontier"] == frontier)


# --------------------------------------------------------------------------- submission


async def test_a_schema_with_problems_is_refused_naming_each(service: Server) -> None:
    graph = {
        "nodes": {
            "rows": {
                "op": "input",
                "schema": {"n": "int32", "l": {"list": "string", "size": 3}, "o": {"object": {}}},
            },
            "out": {"op": "output"},
        },
        "edges": [["rows", "out"]],
    }
    status, content_type, _, problem = await call(
        service, "POST", "/v1/dataflows", {"graph": graph}
    )
    assert (status, content_type) == (422, PROBLEM)
    types = (
        'a type is "int64", "uint64", "float64", "string" or "bool" (nullable with a trailing '
        '"?"), {"list": <type>} or {"object": {<field>: <type>, ...}} (nullable with '
        '"nullable": true)'
    )
    assert problem["problems"] == [
        {"pointer": "/nodes/rows/schema/n", "detail": f"unknown type 'int32': {types}"},
        {"pointer": "/nodes/rows/schema/l/size", "detail": "unknown field 'size'"},
        {
            "pointer": "/nodes/rows/schema/o/object",
            "detail": "must be a non-empty object of field -> type",
        },
    ]


async def test_the_dataflow_and_the_input_show_the_schema(service: Server) -> None:
    df = await dataflow(service, TYPED)
    _, _, _, described = await call(service, "GET", f"/v1/dataflows/{df}")
    assert described["inputs"]["rows"]["schema"] == SCHEMA
    _, _, _, shown = await call(service, "GET", f"/v1/dataflows/{df}/inputs/rows")
    assert shown["schema"] == SCHEMA
    _, _, _, output = await call(service, "GET", f"/v1/dataflows/{df}/outputs/out")
    assert output["schema"] == SCHEMA
    untyped = await dataflow(service, UNTYPED)
    _, _, _, plain = await call(service, "GET", f"/v1/dataflows/{untyped}/inputs/rows")
    assert "schema" not in plain


# --------------------------------------------------------------------------- pushes


@pytest.mark.parametrize(
    ("record", "pointer", "detail"),
    [
        ({**B, "value": "x"}, "/records/1/1/value", 'expected int64, got "x"'),
        ({**B, "value": 1.5}, "/records/1/1/value", "expected int64, got 1.5"),
        (
            {**B, "value": 2**63},
            "/records/1/1/value",
            f"expected int64, got {2**63} (out of range)",
        ),
        ({**B, "value": True}, "/records/1/1/value", "expected int64, got true"),
        ({**B, "extra": 1}, "/records/1/1/extra", "unexpected field"),
        ({"value": 1, "tags": []}, "/records/1/1/key", "missing (expected string)"),
        ({**B, "tags": "ab"}, "/records/1/1/tags", 'expected a list, got "ab"'),
        ({**B, "tags": ["a", None]}, "/records/1/1/tags/1", "expected string, got null"),
        ({**B, "where": {"lat": 1}}, "/records/1/1/where/lon", "missing (expected float64)"),
        (
            {**B, "where": {"lat": "n", "lon": 0}},
            "/records/1/1/where/lat",
            'expected float64, got "n"',
        ),
        (7, "/records/1/1", "expected an object, got 7"),
    ],
)
async def test_a_json_push_that_does_not_fit_is_refused_whole(
    service: Server, record: Any, pointer: str, detail: str
) -> None:
    df = await dataflow(service, TYPED)
    sid = await open_session(service, df)
    push = f"/v1/dataflows/{df}/inputs/rows/sessions/{sid}/push"
    status, content_type, _, problem = await call(
        service, "POST", push, {"seq": 1, "records": [[0, A], [0, record]]}
    )
    assert (status, content_type) == (422, PROBLEM)
    assert problem["problems"] == [{"pointer": pointer, "detail": detail}]
    assert problem["detail"] == (
        f"the batch does not fit input 'rows''s schema: {pointer}: {detail}; nothing of it was "
        "applied"
    )
    _, _, _, shown = await call(service, "GET", f"/v1/dataflows/{df}/inputs/rows")
    assert shown["records_in"] == 0
    # The same seq is not spent: the producer sends the batch again, fixed.
    status, _, _, ack = await call(service, "POST", push, {"seq": 1, "records": [[0, A]]})
    assert (status, ack["applied"]) == (200, 1)


async def test_typed_records_come_out_as_typed_columns_and_as_json(service: Server) -> None:
    df = await dataflow(service, TYPED)
    sid = await open_session(service, df)
    base = f"/v1/dataflows/{df}/inputs/rows/sessions/{sid}"
    status, _, _, ack = await call(
        service, "POST", f"{base}/push", {"seq": 1, "records": [[0, A], [1, B]]}
    )
    assert (status, ack["applied"]) == (200, 2)
    # An Arrow body: value as int32 and where absent (nullable), cast exactly.
    body = arrow_body(
        {
            "time": pa.array([1, 2], pa.int64()),
            "key": ["c", "d"],
            "value": pa.array([5, 6], pa.int32()),
            "tags": pa.array([["z"], []], pa.list_(pa.string())),
        }
    )
    status, _, _, ack = await call(service, "POST", f"{base}/push?seq=2", body, ARROW)
    assert (status, ack["applied"]) == (200, 2)
    await call(service, "POST", f"{base}/advance", {"time": 3})
    page = await complete(service, df, [3])
    d = {"key": "d", "value": 6, "tags": [], "where": None}
    c5 = {"key": "c", "value": 5, "tags": ["z"], "where": None}
    assert page["times"] == [
        {"time": 0, "records": [A]},
        {"time": 1, "records": [B, c5]},
        {"time": 2, "records": [d]},
    ]
    table = await arrow_times(service, df)
    assert table.schema == READ_SCHEMA
    assert table.to_pylist() == [
        {"time": 0, **A},
        {"time": 1, **B},
        {"time": 1, **c5},
        {"time": 2, **d},
    ]


async def test_an_output_behind_a_forwarding_operator_reads_as_typed_columns(
    service: Server,
) -> None:
    graph = {
        "nodes": {
            "rows": {"op": "input", "schema": SCHEMA},
            "look": {"op": "inspect"},
            "out": {"op": "output"},
        },
        "edges": [["rows", "look"], ["look", "out"]],
    }
    df = await dataflow(service, graph)
    sid = await open_session(service, df)
    base = f"/v1/dataflows/{df}/inputs/rows/sessions/{sid}"
    await call(service, "POST", f"{base}/push", {"seq": 1, "records": [[0, A], [0, C]]})
    await call(service, "POST", f"{base}/advance", {"time": 1})
    await complete(service, df, [1])
    table = await arrow_times(service, df)
    assert table.schema == READ_SCHEMA
    assert table.to_pylist() == [{"time": 0, **A}, {"time": 0, **C}]


async def test_an_arrow_push_that_does_not_fit_is_refused_naming_the_column(
    service: Server,
) -> None:
    df = await dataflow(service, TYPED)
    sid = await open_session(service, df)
    push = f"/v1/dataflows/{df}/inputs/rows/sessions/{sid}/push?seq=1"
    good = {"time": pa.array([0, 0]), "key": ["a", "b"], "value": pa.array([1, 2])}
    good["tags"] = pa.array([[], []], pa.list_(pa.string()))
    cases = [
        (
            {**good, "value": pa.array(["1", "2"])},
            "value",
            "expected int64, got a column of string",
        ),
        (
            {**good, "value": pa.array([1.0, 2.5])},
            "value",
            "row 1: expected int64: Float value 2.500000 was truncated converting to int64",
        ),
        (
            {**good, "key": pa.array(["a", None])},
            "key",
            "row 1: null where the field is not nullable",
        ),
        (
            {**good, "more": pa.array([1, 2])},
            "more",
            "unexpected column (not a field of the input's schema)",
        ),
        ({k: v for k, v in good.items() if k != "key"}, "key", "missing column (expected string)"),
    ]
    for columns, pointer, detail in cases:
        status, content_type, _, problem = await call(
            service, "POST", push, arrow_body(columns), ARROW
        )
        assert (status, content_type) == (422, PROBLEM), problem
        assert problem["problems"] == [{"pointer": pointer, "detail": detail}]
    status, _, _, ack = await call(service, "POST", push, arrow_body(good), ARROW)
    assert (status, ack["applied"]) == (200, 2)


async def test_a_websocket_push_that_does_not_fit_gets_an_error_frame(service: Server) -> None:
    df = await dataflow(service, TYPED)
    async with ws_connect(service, f"/v1/dataflows/{df}/inputs/rows/push") as ws:
        producer = await WsProducer.open(ws)
        refused = await producer.call(
            {"type": "push", "seq": 1, "records": [[0, A], [0, {**A, "value": "x"}]]}
        )
        assert refused == {
            "type": "error",
            "title": "Unprocessable content",
            "status": 422,
            "detail": "the batch does not fit input 'rows''s schema: /records/1/1/value: "
            'expected int64, got "x"; nothing of it was applied',
            "problems": [{"pointer": "/records/1/1/value", "detail": 'expected int64, got "x"'}],
            "credits": 16,  # the credit is given back
        }
        acked = await producer.call({"type": "push", "seq": 1, "records": [[0, A], [0, C]]})
        assert (acked["type"], acked["applied"]) == ("ack", 2)
    _, _, _, shown = await call(service, "GET", f"/v1/dataflows/{df}/inputs/rows")
    assert shown["records_in"] == 2


def arrow_frame(seq: int | None, columns: dict[str, pa.Array]) -> bytes:
    """An Arrow push frame: an IPC stream whose schema's metadata says its ``seq``."""
    table = pa.table(columns)
    if seq is not None:
        table = table.replace_schema_metadata({"seq": str(seq)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


async def test_a_websocket_takes_arrow_push_frames_into_a_typed_input(service: Server) -> None:
    df = await dataflow(service, TYPED)
    columns = {
        "time": pa.array([0, 1]),
        "key": ["a", "b"],
        "value": pa.array([1, -7]),
        "tags": pa.array([["x", "y"], []], pa.list_(pa.string())),
        "where": pa.array([{"lat": 1.5, "lon": -2.0}, None]),
    }
    async with ws_connect(service, f"/v1/dataflows/{df}/inputs/rows/push") as ws:
        producer = await WsProducer.open(ws)
        await ws.send(arrow_frame(1, columns))
        acked = await producer.reply()
        assert (acked["type"], acked["seq"], acked["applied"]) == ("ack", 1, 2)
        await ws.send(arrow_frame(2, {**columns, "value": pa.array(["1", "2"])}))
        refused = await producer.reply()
        assert (refused["status"], refused["problems"]) == (
            422,
            [{"pointer": "value", "detail": "expected int64, got a column of string"}],
        )
        await ws.send(arrow_frame(1, columns))  # sent again: acknowledged, not applied twice
        again = await producer.reply()
        assert (again["type"], again["seq"], again["applied"]) == ("ack", 1, 0)
        await ws.send(arrow_frame(None, columns))
        bad = orjson.loads(await ws.recv())
        assert (bad["type"], bad["status"]) == ("error", 400)
        assert bad["detail"].startswith("an Arrow push frame needs a positive integer seq")
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4400
    await call(service, "POST", f"/v1/dataflows/{df}/inputs/rows/close", None)
    await complete(service, df, [])
    assert (await arrow_times(service, df)).to_pylist() == [{"time": 0, **A}, {"time": 1, **B}]


async def test_subscribers_of_a_typed_output_get_the_json_events_of_an_untyped_one(
    service: Server,
) -> None:
    received = []
    for graph in (TYPED, UNTYPED):
        df = await dataflow(service, graph)
        async with ws_connect(service, f"/v1/dataflows/{df}/outputs/out/events") as events:
            frames = Frames(ws_frames(events))
            sid = await open_session(service, df)
            base = f"/v1/dataflows/{df}/inputs/rows/sessions/{sid}"
            await call(service, "POST", f"{base}/push", {"seq": 1, "records": [[0, A], [0, B]]})
            await call(service, "POST", f"{base}/push", {"seq": 2, "records": [[1, C]]})
            await call(service, "POST", f"/v1/dataflows/{df}/inputs/rows/close", None)
            seen = await frames.until(lambda e: e["type"] == "progress" and [0, -1] in e["changes"])
            await frames.aclose()
        received.append(seen)
    typed, untyped = received
    assert typed == untyped
    assert [e for e in typed if e["type"] == "messages"] == [
        {"type": "messages", "time": 0, "records": [A, B]},
        {"type": "messages", "time": 1, "records": [C]},
    ]


# --------------------------------------------------------------------------- staging


async def test_staged_typed_records_are_checked_and_committed_as_columns(
    service: Server,
) -> None:
    df = await dataflow(service, TYPED)
    inputs = f"/v1/dataflows/{df}/inputs/rows"
    status, _, _, problem = await call(
        service, "PUT", f"{inputs}/transactions/t1", {"records": [[0, {**A, "tags": [1]}]]}
    )
    assert (status, problem["problems"]) == (
        422,
        [{"pointer": "/records/0/1/tags/0", "detail": "expected string, got 1"}],
    )
    status, _, _, staged = await call(
        service, "PUT", f"{inputs}/transactions/t1", {"records": [[0, A], [1, B]]}
    )
    assert (status, staged) == (200, {"staged": 2})
    body = arrow_body(
        {
            "time": pa.array([0], pa.uint64()),
            "key": ["c"],
            "value": pa.array([2**63 - 1], pa.uint64()),
            "tags": pa.array([["z"]]),
            "where": pa.array([{"lat": 0.0, "lon": 0.25}]),
        }
    )
    status, _, _, staged = await call(service, "PUT", f"{inputs}/transactions/t1", body, ARROW)
    assert (status, staged) == (200, {"staged": 3})
    bad = arrow_body({"time": pa.array([0]), "key": ["c"], "value": pa.array([2**63], pa.uint64())})
    status, _, _, problem = await call(service, "PUT", f"{inputs}/transactions/t1", bad, ARROW)
    assert status == 422
    assert problem["problems"][0]["pointer"] == "value"
    assert problem["problems"][0]["detail"].startswith("row 0: expected int64: Integer value")
    status, _, _, ack = await call(
        service,
        "POST",
        f"{inputs}/commit",
        {"transactions": ["t1"], "idempotency_key": "k1", "advance_to": 2},
    )
    assert (status, ack["applied"]) == (200, 3)
    await complete(service, df, [2])
    assert (await arrow_times(service, df)).to_pylist() == [
        {"time": 0, **A},
        {"time": 0, **C},
        {"time": 1, **B},
    ]


# --------------------------------------------------------------------------- a restart


async def test_typed_batches_replay_as_the_same_records_after_a_restart(tmp_path: Path) -> None:
    workdir = tmp_path / "server"
    with running(workdir, "--durability", "fsync") as server:
        df = await dataflow(server, TYPED)
        sid = await open_session(server, df)
        base = f"/v1/dataflows/{df}/inputs/rows/sessions/{sid}"
        await call(server, "POST", f"{base}/push", {"seq": 1, "records": [[0, A], [1, B]]})
        body = arrow_body(
            {
                "time": pa.array([1]),
                "key": ["c"],
                "value": pa.array([3], pa.int8()),
                "tags": pa.array([["q"]]),
            }
        )
        await call(server, "POST", f"{base}/push?seq=2", body, ARROW)
        inputs = f"/v1/dataflows/{df}/inputs/rows"
        await call(server, "PUT", f"{inputs}/transactions/open", {"records": [[2, C]]})
        await call(server, "POST", f"{base}/advance", {"time": 2})
        await complete(server, df, [2])
        before = await arrow_times(server, df)
    with running(workdir, "--durability", "fsync") as again:
        await complete(again, df, [2])
        after = await arrow_times(again, df)
        assert after.schema == READ_SCHEMA
        assert after.equals(before)
        c3 = {"key": "c", "value": 3, "tags": ["q"], "where": None}
        assert after.to_pylist() == [{"time": 0, **A}, {"time": 1, **B}, {"time": 1, **c3}]
        # The open transaction came back with its columns, and commits after the restart.
        status, _, _, ack = await call(
            again, "POST", f"{base}/commit", {"transactions": ["open"], "idempotency_key": "k"}
        )
        assert (status, ack["applied"]) == (200, 1)
        await call(again, "POST", f"{base}/advance", {"time": 3})
        await complete(again, df, [3])
        assert (await json_times(again, df))["times"][-1] == {"time": 2, "records": [C]}
