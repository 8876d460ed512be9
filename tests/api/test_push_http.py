"""Pushes over HTTP, on the bulk-checked path (integer times) and the model's path."""

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.server import create_app
from service.app import Limits, Settings

PASS = {"nodes": {"x": {"op": "input"}, "out": {"op": "output"}}, "edges": [["x", "out"]]}
PRODUCT = {"time": {"product": ["u64", "u64"]}, **PASS}


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    settings = Settings(limits=Limits(max_batch_records=3))
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as c:
        yield c


async def session(client: TestClient[Any, Any], graph: dict[str, Any], start: Any = None) -> str:
    created = await client.post("/v1/dataflows", data=orjson.dumps({"graph": graph}))
    dataflow = (await created.json())["id"]
    body = {} if start is None else {"start": start}
    opened = await client.post(f"/v1/dataflows/{dataflow}/inputs/x/sessions", json=body)
    return f"/v1/dataflows/{dataflow}/inputs/x/sessions/{(await opened.json())['session']}"


async def push(client: TestClient[Any, Any], path: str, seq: int, records: Any) -> Any:
    answer = await client.post(f"{path}/push", data=orjson.dumps({"seq": seq, "records": records}))
    return answer.status, await answer.json()


async def test_integer_times_one_and_several_per_batch(client: TestClient[Any, Any]) -> None:
    path = await session(client, PASS, start=2)
    status, ack = await push(client, path, 1, [[2, "a"], [2, "b"]])
    assert (status, ack["applied"], ack["session_time"]) == (200, 2, 2)
    status, ack = await push(client, path, 2, [[4, "c"], [3, "d"], [4, "e"]])
    assert (status, ack["applied"]) == (200, 3)
    # Before the session's time: refused whole, with the offending record named.
    status, problem = await push(client, path, 3, [[5, "f"], [1, "g"]])
    assert (status, problem["detail"]) == (
        409,
        "record 1 is at 1, before the session's time 2: the push was refused and nothing of "
        "it applied",
    )
    status, problem = await push(client, path, 3, [[5, "f"]] * 4)
    assert (status, problem["detail"]) == (
        429,
        "a batch of 4 records exceeds max_batch_records (3)",
    )
    await client.post(f"{path}/advance", json={"time": 6})
    dataflow = path.split("/")[3]
    listed = await (await client.get(f"/v1/dataflows/{dataflow}/outputs/out/times")).json()
    assert [(t["time"], sorted(t["records"])) for t in listed["times"]] == [
        (2, ["a", "b"]),
        (3, ["d"]),
        (4, ["c", "e"]),
    ]


async def test_integer_times_into_a_product_input_are_refused_with_a_pointer(
    client: TestClient[Any, Any],
) -> None:
    path = await session(client, PRODUCT)
    status, problem = await push(client, path, 1, [[3, "a"]])
    assert status == 422
    assert problem["problems"] == [
        {
            "pointer": "/records/0/0",
            "detail": "3 is not a time of this input's domain (like [0, 0])",
        }
    ]
    status, ack = await push(client, path, 1, [[[0, 3], "a"]])
    assert (status, ack["applied"]) == (200, 1)


async def test_bad_times_are_explained_by_the_model(client: TestClient[Any, Any]) -> None:
    path = await session(client, PASS)
    for records, pointer in [
        ([[0, "a"], [True, "b"]], "/records/1/0"),
        ([[1.5, "a"]], "/records/0/0"),
    ]:
        status, problem = await push(client, path, 1, records)
        assert status == 422
        assert [p["pointer"] for p in problem["problems"]] == [pointer]
