"""A new operator is one registry entry: registered here, it is in ``GET /v1/operators``,
usable in a submitted graph (checked, built, run), and reported by the docs check."""

from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.server import create_app
from operators import Stream
from operators.graph import CATALOGUE, NodeBuilder, OpKind, Param, register_operator
from operators.graph.registry import ON_ERROR
from service.app import Settings
from tests.docs.catalogue import catalogue_problems


def _repeat(node: NodeBuilder) -> list[Stream]:
    values = node.batched("expr", "map")
    times = int(node.params.get("times", 2))
    return [node.inputs[0].map_batches(lambda rs: [v for v in values(rs) for _ in range(times)])]


# The whole of the new operator: its ports, its typed parameters and its builder.
REPEAT = OpKind(
    "repeat",
    1,
    1,
    {
        "expr": Param("expr", batch=("map",)),
        "times": Param("int", required=False, minimum=1, maximum=10),
        "on_error": ON_ERROR,
    },
    build=_repeat,
)


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    # Registration is process-wide: unregister after, so other tests see the built-ins only.
    register_operator(REPEAT)
    yield
    del CATALOGUE["repeat"]


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(create_app(Settings()), host="127.0.0.1")) as c:
        yield c


GRAPH = {
    "nodes": {
        "x": {"op": "input"},
        "twice": {"op": "repeat", "expr": "r.v * 10"},
        "thrice": {"op": "repeat", "expr": "r + 1", "times": 3},
        "out": {"op": "output"},
    },
    "edges": [["x", "twice"], ["twice", "thrice"], ["thrice", "out"]],
}


async def test_the_operator_is_in_the_catalogue(client: TestClient[Any, Any]) -> None:
    listed = await (await client.get("/v1/operators")).json()
    assert listed["operators"][-1] == {
        "op": "repeat",
        "inputs": 1,
        "outputs": 1,
        "params": {
            "expr": {"kind": "expr", "required": True, "variables": ["r"]},
            "times": {"kind": "int", "required": False, "minimum": 1, "maximum": 10},
            "on_error": {"kind": "choice", "required": False, "choices": ["drop", "fail"]},
        },
    }


async def test_a_submitted_graph_uses_it(client: TestClient[Any, Any]) -> None:
    created = await client.post("/v1/dataflows", data=orjson.dumps({"graph": GRAPH}))
    assert created.status == 201
    dataflow = f"/v1/dataflows/{(await created.json())['id']}"
    opened = await client.post(f"{dataflow}/inputs/x/sessions", json={})
    session = f"{dataflow}/inputs/x/sessions/{(await opened.json())['session']}"
    records = [[0, {"v": 1}], [0, {"w": 2}], [1, {"v": 5}]]
    pushed = await client.post(f"{session}/push", data=orjson.dumps({"seq": 1, "records": records}))
    assert pushed.status == 200
    await client.post(f"{session}/advance", json={"time": 2})
    listed = await (await client.get(f"{dataflow}/outputs/out/times")).json()
    assert [(t["time"], sorted(t["records"])) for t in listed["times"]] == [
        (0, [11] * 6),
        (1, [51] * 6),
    ]
    # The record without "v" was dropped by the node's error policy, and counted.
    shown = await (await client.get(dataflow)).json()
    assert shown["record_errors"] == {"twice": {"count": 1, "last": "no such key: v"}}


async def test_its_parameters_are_checked_at_submission(client: TestClient[Any, Any]) -> None:
    nodes = {**GRAPH["nodes"], "thrice": {"op": "repeat", "expr": "r +", "times": 11}}
    answer = await client.post("/v1/dataflows", json={"graph": {**GRAPH, "nodes": nodes}})
    assert answer.status == 422
    assert (await answer.json())["problems"] == [
        {
            "pointer": "/nodes/thrice/expr",
            "detail": "expression does not compile: line 1, column 4: unexpected end of expression",
        },
        {"pointer": "/nodes/thrice/times", "detail": "must be an integer from 1 to 10"},
    ]


def test_the_docs_check_reports_it_undescribed() -> None:
    assert catalogue_problems(CATALOGUE) == [
        "docs/graphs.md does not describe the registered operator 'repeat'"
    ]
