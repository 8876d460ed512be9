"""GET /v1/dataflows/{id}/explain over HTTP: hand-built situations, exact holders.

Each test builds a situation (a held capability, records waiting on an exchange, open
sessions and a transaction, a loop inside an iterative scope, incomparable product times),
waits until the trackers show it, and compares the whole answer.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.server import create_app
from operators.graph import CATALOGUE
from service.app import Settings
from service.app import plugins as manager_module

sys.path.insert(0, str(Path(__file__).parent))
import stall_operators

Client = TestClient[Any, Any]
Make = Callable[..., Any]

HIST = {
    "nodes": {
        "words": {"op": "input"},
        "histogram": {"op": "count_by", "key": "r"},
        "counts": {"op": "output"},
    },
    "edges": [["words", "histogram"], ["histogram", "counts"]],
}
PASS = {"nodes": {"words": {"op": "input"}, "out": {"op": "output"}}, "edges": [["words", "out"]]}
STALL = {
    "nodes": {"words": {"op": "input"}, "stall": {"op": "stall"}, "counts": {"op": "output"}},
    "edges": [["words", "stall"], ["stall", "counts"]],
}
LOOP = {
    "scopes": {"loop": {"kind": "iterative"}},
    "nodes": {
        "words": {"op": "input"},
        "merge": {"op": "concat", "scope": "loop"},
        "hold": {"op": "stall", "scope": "loop"},
        "step": {"op": "map", "expr": "r + 1", "scope": "loop"},
        "test": {"op": "branch", "expr": "r >= 3", "scope": "loop"},
        "back": {"op": "feedback", "scope": "loop"},
        "out": {"op": "output"},
    },
    "edges": [
        ["words", "merge:0"],
        ["back", "merge:1"],
        ["merge", "hold"],
        ["hold", "step"],
        ["step", "test"],
        ["test:0", "back"],
        ["test:1", "out"],
    ],
}


@pytest.fixture(autouse=True)
def restore_catalogue() -> Iterator[None]:
    # The stall operator is registered process-wide: undo it for the other tests.
    before = dict(CATALOGUE)
    loaded = set(manager_module._LOADED_PLUGINS)
    stall_operators.STALLED[:] = [True]
    yield
    stall_operators.STALLED[:] = [True]
    CATALOGUE.clear()
    CATALOGUE.update(before)
    manager_module._LOADED_PLUGINS.clear()
    manager_module._LOADED_PLUGINS.update(loaded)


@pytest.fixture
async def serve() -> AsyncIterator[Make]:
    clients: list[Client] = []

    async def make(workers: int = 1) -> Client:
        settings = Settings(workers=workers, operator_modules=("stall_operators",))
        client: Client = TestClient(TestServer(create_app(settings), host="127.0.0.1"))
        await client.start_server()
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def create(client: Client, graph: dict[str, Any]) -> str:
    answer = await client.post("/v1/dataflows", data=orjson.dumps({"graph": graph}))
    assert answer.status == 201, await answer.text()
    return str((await answer.json())["id"])


async def call(client: Client, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else orjson.dumps(body)
    answer = await client.request(method, path, data=data)
    assert answer.status < 300, await answer.text()
    return await answer.json()


async def explain(client: Client, dataflow: str, location: str, time: Any) -> tuple[int, Any]:
    raw = time if isinstance(time, str) else orjson.dumps(time).decode()
    answer = await client.get(
        f"/v1/dataflows/{dataflow}/explain", params={"location": location, "time": raw}
    )
    return answer.status, await answer.json(content_type=None)


async def settled(client: Client, dataflow: str, location: str, time: Any, want: Any) -> Any:
    """The answer once it is ``want`` (the workers run on): at most a second's wait."""
    for _ in range(200):
        status, body = await explain(client, dataflow, location, time)
        if status == 200 and body == want:
            break
        await asyncio.sleep(0.005)
    assert status == 200
    return body


def holder(kind: str, operator: str, time: Any, **fields: Any) -> dict[str, Any]:
    """A holder as the API writes it: the given fields over the defaults."""
    return {
        "kind": kind,
        "operator": operator,
        "port": None,
        "edge": None,
        "time": time,
        "count": 1,
        "summary": "+0",
        "arrives": time,
        "path": [],
        "session": None,
        "transaction": None,
        "holders": [],
        **fields,
    }


def answer(dataflow: str, location: str, time: Any, frontier: Any, *holders: Any) -> Any:
    return {
        "dataflow": dataflow,
        "location": location,
        "time": time,
        "complete": not holders,
        "frontier": frontier,
        "holders": list(holders),
    }


async def test_a_held_capability_and_a_complete_time(serve: Make) -> None:
    client = await serve()
    dataflow = await create(client, HIST)
    inputs = f"/v1/dataflows/{dataflow}/inputs/words"
    session = (await call(client, "POST", f"{inputs}/sessions", {}))["session"]
    await call(
        client, "POST", f"{inputs}/sessions/{session}/push", {"seq": 1, "records": [[3, "a"]]}
    )
    await call(client, "POST", f"{inputs}/sessions/{session}/advance", {"time": 3})
    input_path = ["words", "histogram", "counts"]
    want = answer(
        dataflow,
        "counts",
        3,
        [3],
        holder("capability", "words", 3, port="words:0", path=input_path),
        holder("session", "words", 3, port="words:0", path=input_path, session=session),
        # count_by keeps a capability at 3 (inside the node: no port of the graph) until
        # its input passes 3, to emit the counts of 3 then.
        holder("capability", "histogram", 3, path=["histogram", "counts"]),
    )
    assert await settled(client, dataflow, "counts", 3, want) == want
    # Before 3 everything is complete, and nothing holds it.
    assert await settled(client, dataflow, "counts", 2, None) == answer(dataflow, "counts", 2, [3])
    # The frontier events' names are taken too, and answered with the graph's.
    status, body = await explain(client, dataflow, "operator:histogram:0", 2)
    assert (status, body["location"], body["complete"]) == (200, "histogram:0", True)


async def test_records_in_flight_on_an_exchange(serve: Make) -> None:
    client = await serve(workers=2)
    dataflow = await create(client, STALL)
    inputs = f"/v1/dataflows/{dataflow}/inputs/words"
    session = (await call(client, "POST", f"{inputs}/sessions", {}))["session"]
    records = [[0, "a"], [0, "b"], [0, "c"]]
    await call(client, "POST", f"{inputs}/sessions/{session}/push", {"seq": 1, "records": records})
    path = ["words", "stall", "counts"]
    want = answer(
        dataflow,
        "counts",
        0,
        [0],
        holder("capability", "words", 0, port="words:0", path=path),
        holder("session", "words", 0, port="words:0", path=path, session=session),
        # Sent to the stall operator on whichever worker each record's value chose, and
        # counted there by every worker's tracker until it reads them.
        holder("records", "stall", 0, count=3, edge=["words:0", "stall:0"], path=path[1:]),
    )
    try:
        assert await settled(client, dataflow, "counts", 0, want) == want
    finally:
        stall_operators.STALLED.clear()
        await call(client, "POST", f"{inputs}/close")


async def test_an_open_session_and_a_transaction_at_an_input(serve: Make) -> None:
    client = await serve()
    dataflow = await create(client, PASS)
    inputs = f"/v1/dataflows/{dataflow}/inputs/words"
    session = (await call(client, "POST", f"{inputs}/sessions", {"start": 2}))["session"]
    await call(client, "PUT", f"{inputs}/transactions/t1", {"records": [[4, "x"], [6, "y"]]})
    path = ["words", "out"]
    # The input's own time stays 0 while no session moves it: its capability holds 0, and
    # the open transaction would commit there (without a session).
    own = holder(
        "capability",
        "words",
        0,
        port="words:0",
        path=path,
        holders=[
            holder("transaction", "words", 0, count=2, port="words:0", path=path, transaction="t1")
        ],
    )
    later = holder("session", "words", 2, port="words:0", path=path, session=session)
    want = answer(dataflow, "out", 5, [0], own, later)
    assert await settled(client, dataflow, "out", 5, want) == want
    want = answer(dataflow, "out", 1, [0], own)
    assert await settled(client, dataflow, "out", 1, want) == want


async def test_a_loop_inside_an_iterative_scope(serve: Make) -> None:
    client = await serve()
    dataflow = await create(client, LOOP)
    inputs = f"/v1/dataflows/{dataflow}/inputs/words"
    session = (await call(client, "POST", f"{inputs}/sessions", {}))["session"]
    await call(
        client, "POST", f"{inputs}/sessions/{session}/push", {"seq": 1, "records": [[0, 1], [0, 2]]}
    )
    await call(client, "POST", f"{inputs}/sessions/{session}/advance", {"time": 1})
    stalled = holder(
        "records",
        "hold",
        [0, 0],
        count=2,
        edge=["merge:0", "hold:0"],
        summary="(+0, +0)",
        path=["hold", "step", "test"],
    )
    # Outside, the scope holds 0 at its output (whose stream is test:1) for the records
    # stalled inside it, at their inner time.
    want = answer(
        dataflow,
        "out",
        0,
        [0],
        holder("scope", "loop", 0, port="test:1", path=["loop", "out"], holders=[stalled]),
    )
    try:
        assert await settled(client, dataflow, "out", 0, want) == want
        # Inside, the same records come back to the loop's head one iteration later.
        around = {
            **stalled,
            "summary": "(+0, +1)",
            "arrives": [0, 1],
            "path": ["hold", "step", "test", "back", "merge"],
        }
        want = answer(dataflow, "merge:0", [0, 5], [[0, 1], [1, 0]], around)
        assert await settled(client, dataflow, "merge:0", [0, 5], want) == want
        # [1, 0] is held from outside: the input, at 1, enters the scope at [1, 0].
        outside = [
            holder("capability", "words", 1, port="words:0", path=["words", "loop"]),
            holder("session", "words", 1, port="words:0", path=["words", "loop"], session=session),
        ]
        entering = holder(
            "outside", "loop", [1, 0], summary="(+0, +0)", path=["merge"], holders=outside
        )
        want = answer(dataflow, "merge:0", [1, 0], [[0, 1], [1, 0]], entering)
        assert await settled(client, dataflow, "merge:0", [1, 0], want) == want
    finally:
        stall_operators.STALLED.clear()
        await call(client, "POST", f"{inputs}/close")


async def test_two_incomparable_product_times(serve: Make) -> None:
    client = await serve()
    dataflow = await create(client, {"time": {"product": ["u64", "u64"]}, **PASS})
    inputs = f"/v1/dataflows/{dataflow}/inputs/words"
    first = (await call(client, "POST", f"{inputs}/sessions", {"start": [1, 0]}))["session"]
    second = (await call(client, "POST", f"{inputs}/sessions", {"start": [0, 1]}))["session"]
    same = {"port": "words:0", "path": ["words", "out"], "summary": "(+0, +0)"}
    own = holder("capability", "words", [0, 0], **same)
    one_zero = holder("session", "words", [1, 0], session=first, **same)
    zero_one = holder("session", "words", [0, 1], session=second, **same)
    for time, held in (
        ([1, 1], [own, zero_one, one_zero]),
        ([1, 0], [own, one_zero]),
        ([0, 3], [own, zero_one]),
    ):
        want = answer(dataflow, "out", time, [[0, 0]], *held)
        assert await settled(client, dataflow, "out", time, want) == want


async def test_bad_locations_and_times_are_problems(serve: Make) -> None:
    client = await serve()
    dataflow = await create(client, HIST)
    listed = "words:0, histogram:0, counts (a node's output port as node:port, or an output's name)"
    for location in ("nope", "counts:3", "histogram:1"):
        status, problem = await explain(client, dataflow, location, 0)
        assert (status, problem["type"], problem["detail"]) == (
            404,
            "https://frontier.dev/problems/not-found",
            f"dataflow {dataflow!r} has no location {location!r}; its locations are: {listed}",
        )
    integer = "expected an integer 0 <= t < 2^64"
    for raw, shown in (
        ("[1, 2]", "[1, 2]"),
        ("abc", "abc"),
        ("-1", "-1"),
        ("1.5", "1.5"),
        ("true", "True"),
    ):
        status, problem = await explain(client, dataflow, "counts", raw)
        assert (status, problem["type"], problem["detail"]) == (
            422,
            "https://frontier.dev/problems/invalid",
            f"time {shown} is not a time at counts: {integer}",
        )
    product = await create(client, {"time": {"product": ["u64", "u64"]}, **PASS})
    status, problem = await explain(client, product, "out", 3)
    assert (status, problem["detail"]) == (
        422,
        "time 3 is not a time at out: expected a time like [0, 0] (nested [outer, inner] "
        "arrays of integers)",
    )
    answer_ = await client.get(f"/v1/dataflows/{dataflow}/explain", params={"location": "counts"})
    assert answer_.status == 400
    assert answer_.headers["Content-Type"] == "application/problem+json"
    assert (await answer_.json(content_type=None))["detail"] == (
        "the query parameter time is required: a time (an integer, or [outer, inner] for products)"
    )
    status, problem = await explain(client, "nothing", "counts", 0)
    assert (status, problem["detail"]) == (404, "no dataflow 'nothing'")
