"""Hostile graphs over HTTP: deep nesting, huge strings, many parts are each a 422 naming the
limit, at once; never a RecursionError, a hang, or a service that stops.

Before these limits, a graph nested more than the JSON parser's ~200 levels was a 400 "not
valid JSON", one of 500 nested scopes raised RecursionError in the workers and stopped the
whole service, and a 16 MiB graph was parsed whole whatever it held.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.graph_model import MAX_GRAPH_BYTES, MAX_GRAPH_DEPTH
from api.server import create_app
from service.app import Settings

Client = TestClient[Any, Any]

PIPE: dict[str, Any] = {
    "nodes": {"in": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["in", "out"]],
}
DEPTH = f"at most {MAX_GRAPH_DEPTH} levels of nesting are allowed in a graph"


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with TestClient(TestServer(create_app(Settings()), host="127.0.0.1")) as c:
        yield c


async def submit(client: Client, body: bytes, dry_run: bool = False) -> tuple[int, Any]:
    """POST the body as a graph; (status, answer), within a few seconds whatever it holds."""
    path = "/v1/dataflows?dry_run=true" if dry_run else "/v1/dataflows"
    async with asyncio.timeout(10):
        answer = await client.post(path, data=io.BytesIO(body))  # aiohttp warns of large bytes
        return answer.status, await answer.json()


async def problems(client: Client, graph: Any) -> list[tuple[str, str]]:
    status, answer = await submit(client, orjson.dumps({"graph": graph}))
    assert status == 422, answer
    assert answer["detail"] == f"the graph has {len(answer['problems'])} problem(s)"
    return [(p["pointer"], p["detail"]) for p in answer["problems"]]


def deep_body(lists: int) -> bytes:
    """A graph whose node ``a`` has a parameter of ``lists`` nested lists."""
    return (
        b'{"graph": {"nodes": {"a": {"op": "input", "x": ' + b"[" * lists + b"]" * lists + b"}}}}"
    )


async def test_a_graph_nested_thousands_deep_is_a_422_naming_the_limit(client: Client) -> None:
    for lists in (5_000, 1_000, 200, MAX_GRAPH_DEPTH - 2):  # the parser gives up at ~200
        for dry_run in (False, True):
            status, answer = await submit(client, deep_body(lists), dry_run)
            assert (status, answer["problems"]) == (422, [{"pointer": "", "detail": DEPTH}])
    # As deep as allowed: the graph is checked (x is no parameter of input's).
    status, answer = await submit(client, deep_body(MAX_GRAPH_DEPTH - 3))
    assert (status, answer["problems"][0]["pointer"]) == (422, "/nodes/a/x")


async def test_megabytes_of_name_or_expression_are_a_422_naming_the_limit(client: Client) -> None:
    big = "x" * 2_000_000
    for graph in (
        {"nodes": {big: {"op": "input"}}},
        {"nodes": {"m": {"op": "map", "expr": big}}},
        {"nodes": {"in": {"op": "input"}}, "description": big},
    ):
        body = orjson.dumps({"graph": graph})
        assert await problems(client, graph) == [
            (
                "",
                f"at most {MAX_GRAPH_BYTES} bytes of JSON are allowed in a graph (this "
                f"request's body has {len(body)})",
            )
        ]


async def test_a_long_expression_under_the_byte_limit_names_the_expression_limit(
    client: Client,
) -> None:
    graph = {**PIPE, "nodes": {**PIPE["nodes"], "m": {"op": "map", "expr": "r" * 500_000}}}
    graph["edges"] = [["in", "m"], ["m", "out"]]
    assert await problems(client, graph) == [
        (
            "/nodes/m/expr",
            "expression does not compile: line 1, column 4097: expression too long (500000 "
            "characters, the limit is 4096)",
        )
    ]


async def test_100_000_nodes_and_1001_nodes(client: Client) -> None:
    many = {f"n{i}": {"op": "input"} for i in range(100_000)}
    body = orjson.dumps({"graph": {"nodes": many}})
    assert await problems(client, {"nodes": many}) == [
        (
            "",
            f"at most {MAX_GRAPH_BYTES} bytes of JSON are allowed in a graph (this request's "
            f"body has {len(body)})",
        )
    ]
    nodes = dict(list(many.items())[:1001])
    assert await problems(client, {"nodes": nodes}) == [
        ("/nodes", "at most 1000 nodes are allowed")
    ]


async def test_too_many_edges_and_scopes(client: Client) -> None:
    assert await problems(client, {**PIPE, "edges": [["in", "out"]] * 10_001}) == [
        ("/edges", "at most 10000 edges are allowed")
    ]
    scopes = {f"s{i}": {} for i in range(1001)}
    assert await problems(client, {**PIPE, "scopes": scopes}) == [
        ("/scopes", "at most 1000 scopes are allowed")
    ]


def loop_in_scopes(depth: int, time_depth: int) -> dict[str, Any]:
    """A loop (add 1 until 5) in the innermost of ``depth`` nested iterative scopes."""
    scopes = {f"s{i}": ({"parent": f"s{i - 1}"} if i else {}) for i in range(depth)}
    inner = f"s{depth - 1}"
    time: Any = "u64"
    for _ in range(time_depth):
        time = {"product": [time, "u64"]}
    return {
        "time": time,
        "scopes": scopes,
        "nodes": {
            "in": {"op": "input"},
            "merge": {"op": "concat", "scope": inner},
            "step": {"op": "map", "expr": "r + 1", "scope": inner},
            "test": {"op": "branch", "expr": "r >= 5", "scope": inner},
            "back": {"op": "feedback", "scope": inner},
            "out": {"op": "output"},
        },
        "edges": [
            ["in", "merge:0"],
            ["back", "merge:1"],
            ["merge", "step"],
            ["step", "test"],
            ["test:0", "back"],
            ["test:1", "out"],
        ],
    }


def product_time(coordinate: int, depth: int) -> Any:
    """The time of ``depth`` nested products whose every coordinate is ``coordinate``."""
    time: Any = coordinate
    for _ in range(depth):
        time = [time, coordinate]
    return time


async def test_500_nested_scopes_are_refused_and_the_service_goes_on(client: Client) -> None:
    found = await problems(client, loop_in_scopes(500, 0))
    message = "at most 32 scopes may nest in one another"
    assert found == [(f"/scopes/s{i}/parent", message) for i in range(32, 500)]
    status, _ = await submit(client, orjson.dumps({"graph": PIPE}))
    assert status == 201


async def test_a_graph_at_the_nesting_limits_runs(client: Client) -> None:
    # 32 nested loops in a root of 31 products (the most the document's depth lets through):
    # times of 64 coordinates inside, built, run and described.
    status, created = await submit(client, orjson.dumps({"graph": loop_in_scopes(32, 31)}))
    assert status == 201, created
    dataflow = f"/v1/dataflows/{created['id']}"
    opened = await client.post(f"{dataflow}/inputs/in/sessions", json={})
    session = f"{dataflow}/inputs/in/sessions/{(await opened.json())['session']}"
    pushed = await client.post(
        f"{session}/push", data=orjson.dumps({"seq": 1, "records": [[product_time(0, 31), 2]]})
    )
    assert pushed.status == 200, await pushed.json()
    advance = {"time": product_time(1, 31)}
    advanced = await client.post(f"{session}/advance", data=orjson.dumps(advance))
    assert advanced.status == 200, await advanced.json()
    async with asyncio.timeout(10):
        while True:
            listed = await (await client.get(f"{dataflow}/outputs/out/times")).json()
            if listed["times"]:
                break
            await asyncio.sleep(0.01)
    assert [t["records"] for t in listed["times"]] == [[5]]
    described = await client.get(f"{dataflow}?operators=true")
    assert described.status == 200
