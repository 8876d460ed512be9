"""Dataflows are looked up by name: ``GET /v1/dataflows?name=`` is in the contract, and the
server keeps a graph's name and filters by it (in-process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from aiohttp.test_utils import TestClient, TestServer

from api.server import create_app
from service.app import Settings

OPENAPI = Path(__file__).resolve().parents[2] / "openapi.yaml"


def _document() -> Any:
    return yaml.safe_load(OPENAPI.read_text(encoding="utf-8"))


def _deref(document: Any, node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node and node["$ref"].startswith("#/"):
        target = document
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def test_list_dataflows_takes_a_name() -> None:
    document = _document()
    operation = document["paths"]["/v1/dataflows"]["get"]
    parameters = {p["name"]: p for p in (_deref(document, p) for p in operation["parameters"])}
    assert set(parameters) == {"limit", "cursor", "name"}
    assert parameters["name"]["in"] == "query"
    assert parameters["name"]["schema"]["type"] == "string"


GRAPH = {
    "name": "from the graph",
    "nodes": {"words": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["words", "out"]],
}


async def test_the_server_keeps_names_and_filters_by_them(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path / "data"), workers=1)
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as client:
        created = []
        for body in [{"graph": GRAPH}, {"graph": GRAPH, "name": "asked"}, {"graph": GRAPH}]:
            answer = await client.post("/v1/dataflows", json=body)
            assert answer.status == 201, await answer.text()
            created.append(await answer.json())
        assert [c["name"] for c in created] == ["from the graph", "asked", "from the graph"]
        page = await (await client.get("/v1/dataflows", params={"name": "from the graph"})).json()
        assert [item["id"] for item in page["items"]] == [created[0]["id"], created[2]["id"]]
        one = await client.get("/v1/dataflows", params={"name": "from the graph", "limit": "1"})
        first = await one.json()
        assert [item["id"] for item in first["items"]] == [created[0]["id"]]
        rest = await client.get(
            "/v1/dataflows", params={"name": "from the graph", "cursor": first["next_cursor"]}
        )
        assert [item["id"] for item in (await rest.json())["items"]] == [created[2]["id"]]
        none = await (await client.get("/v1/dataflows", params={"name": "nobody"})).json()
        assert none == {"items": [], "next_cursor": None}
