"""Arrow IPC bodies: pushes and staged records from columnar producers, and columnar reads."""

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.ipc
import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.server import create_app
from service.app import Settings

ARROW = "application/vnd.apache.arrow.stream"
GRAPH = {
    "nodes": {
        "rows": {"op": "input"},
        "count": {"op": "count_by", "key": "r.key"},
        "out": {"op": "output"},
    },
    "edges": [["rows", "count"], ["count", "out"]],
}


def arrow(columns: dict[str, Any]) -> bytes:
    table = pa.table(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(create_app(Settings()), host="127.0.0.1")) as c:
        yield c


async def session(client: TestClient[Any, Any]) -> tuple[str, str]:
    created = await client.post("/v1/dataflows", data=orjson.dumps({"graph": GRAPH}))
    dataflow = (await created.json())["id"]
    opened = await client.post(f"/v1/dataflows/{dataflow}/inputs/rows/sessions", data=b"{}")
    return dataflow, (await opened.json())["session"]


async def test_an_arrow_push_is_applied_whole_and_read_back_as_arrow(
    client: TestClient[Any, Any],
) -> None:
    dataflow, sid = await session(client)
    base = f"/v1/dataflows/{dataflow}/inputs/rows/sessions/{sid}"
    body = arrow({"time": pa.array([0, 0, 1], pa.int64()), "key": ["a", "b", "a"]})
    pushed = await client.post(f"{base}/push?seq=1", data=body, headers={"Content-Type": ARROW})
    assert (pushed.status, await pushed.json()) == (
        200,
        {"seq": 1, "session_time": 0, "input_frontier": [0], "applied": 3},
    )
    await client.post(f"{base}/advance", data=b'{"time": 2}')
    for _ in range(100):
        read = await client.get(
            f"/v1/dataflows/{dataflow}/outputs/out/times", headers={"Accept": ARROW}
        )
        if read.headers["X-Frontier"] == "[2]":
            break
    assert read.content_type == ARROW
    rows = pa.ipc.open_stream(await read.read()).read_all().to_pylist()
    assert sorted((r["time"], orjson.loads(r["record"])["key"]) for r in rows) == [
        (0, "a"),
        (0, "b"),
        (1, "a"),
    ]


async def test_a_record_column_of_json_text_is_decoded_and_staging_takes_arrow(
    client: TestClient[Any, Any],
) -> None:
    dataflow, sid = await session(client)
    inputs = f"/v1/dataflows/{dataflow}/inputs/rows"
    body = arrow({"time": pa.array([3], pa.int64()), "record": ['{"key": "z"}']})
    staged = await client.put(
        f"{inputs}/transactions/t1", data=body, headers={"Content-Type": ARROW}
    )
    assert (staged.status, await staged.json()) == (200, {"staged": 1})
    committed = await client.post(
        f"{inputs}/sessions/{sid}/commit",
        data=orjson.dumps({"transactions": ["t1"], "idempotency_key": "k", "advance_to": 4}),
    )
    assert (await committed.json())["applied"] == 1


@pytest.mark.parametrize(
    ("query", "body", "detail"),
    [
        ("?seq=1", b"not arrow", "the body is not an Arrow IPC stream"),
        ("", None, "an Arrow push needs ?seq= a positive integer, not ''"),
        ("?seq=1", {"key": ["a"]}, "an Arrow push needs a 'time' column"),
        ("?seq=1", {"time": ["x"]}, "the 'time' column must hold integers, not string"),
        ("?seq=1", {"time": pa.array([-1], pa.int64())}, "row 0: time -1 is outside [0, 2**64)"),
        (
            "?seq=1",
            {"time": pa.array([0], pa.int64()), "record": ["{"]},
            "row 0: the record is not valid JSON",
        ),
    ],
)
async def test_bad_arrow_pushes_are_refused_whole(
    client: TestClient[Any, Any], query: str, body: Any, detail: str
) -> None:
    dataflow, sid = await session(client)
    raw = arrow(body) if isinstance(body, dict) else (body or arrow({"time": pa.array([0])}))
    answer = await client.post(
        f"/v1/dataflows/{dataflow}/inputs/rows/sessions/{sid}/push{query}",
        data=raw,
        headers={"Content-Type": ARROW},
    )
    problem = await answer.json()
    assert answer.status == 400
    assert answer.content_type == "application/problem+json"
    assert problem["detail"].startswith(detail)
